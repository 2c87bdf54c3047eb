//! Page-locked buffers: searches from and into them give what plain slices give; the
//! registration guard refuses a second registration of the same memory and ends its own.

mod common;

use common::*;
use ivfgpu::{ErrorKind, HostBuffer, HostRegistration, SearchParams};

#[test]
fn searches_through_host_buffers_match_plain_slices() {
    let (index, _data) = filled_index();
    let queries = generate(50, DIM, 7);
    let k = 10;
    let params = SearchParams::new().nprobe(4);
    let expected = index.search_with(&queries, k, &params).unwrap();

    let pinned_queries = HostBuffer::from_slice(&queries).unwrap();
    assert_eq!(&pinned_queries[..], &queries[..]);
    let mut ids = HostBuffer::<i64>::zeroed(50 * k).unwrap();
    let mut dists = HostBuffer::<f32>::zeroed(50 * k).unwrap();
    assert!(ids.iter().all(|&i| i == 0));
    index
        .search_into_with(&pinned_queries, k, &mut ids, &mut dists, &params)
        .unwrap();
    assert_eq!(&ids[..], expected.ids());
    assert_eq!(&dists[..], expected.distances());

    let mut own = queries.clone();
    let registered = HostRegistration::new(&mut own).unwrap();
    let again = index.search_with(&registered, k, &params).unwrap();
    assert_eq!(again.ids(), expected.ids());
    assert_eq!(again.distances(), expected.distances());
}

#[test]
fn registrations_are_exclusive_and_end_on_drop() {
    let mut data = vec![1.5f32; 4096];
    {
        let mut first = HostRegistration::new(&mut data).unwrap();
        first[0] = 2.5;
        // The same memory again (through the raw call: safe code cannot alias the slice):
        // refused, nothing changed.
        let (ptr, bytes) = (first.as_mut_ptr(), core::mem::size_of_val(&first[..]));
        let status = unsafe { ivfgpu::sys::ivf_host_register(ptr.cast(), bytes) };
        assert_eq!(status, ivfgpu::sys::IVF_ERR_INVALID_ARGUMENT);
    }
    assert_eq!(data[0], 2.5);
    // Ended with the guard: registering again works.
    drop(HostRegistration::new(&mut data).unwrap());
    // Empty buffers and registrations hold nothing.
    let empty = HostBuffer::<u8>::zeroed(0).unwrap();
    assert!(empty.is_empty());
    let mut nothing: [f32; 0] = [];
    drop(HostRegistration::new(&mut nothing).unwrap());
}

#[test]
fn a_failed_registration_is_an_error_of_its_kind() {
    let mut data = vec![0u8; 8192];
    let ptr = data.as_mut_ptr();
    assert_eq!(
        unsafe { ivfgpu::sys::ivf_host_register(ptr.cast(), 8192) },
        ivfgpu::sys::IVF_OK
    );
    let err = HostRegistration::new(&mut data[..]).err().expect("registered already");
    assert_eq!(err.kind(), ErrorKind::InvalidArgument);
    assert!(err.message().contains("ivf_host_register"), "{err}");
    assert_eq!(
        unsafe { ivfgpu::sys::ivf_host_unregister(ptr.cast()) },
        ivfgpu::sys::IVF_OK
    );
}

#[test]
fn host_buffers_are_aligned_for_every_type() {
    let b = HostBuffer::<f64>::zeroed(3).unwrap();
    assert_eq!(b.as_ptr() as usize % 64, 0);
    let h = HostBuffer::<ivfgpu::F16>::zeroed(5).unwrap();
    assert_eq!(h.len(), 5);
    assert!(HostBuffer::<u64>::zeroed(usize::MAX).is_err());
}
