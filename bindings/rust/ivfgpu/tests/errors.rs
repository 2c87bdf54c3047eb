//! Bad input gives the right typed error, with the library's message, and changes nothing.

mod common;

use common::*;
use ivfgpu::{Backend, ErrorKind, Index, IndexParams, SearchParams};
use ivfgpu_sys as sys;

#[test]
fn wrong_lengths_are_refused_before_the_call() {
    let (index, data) = filled_index();
    for err in [
        index.search(&data[..DIM - 1], 1).unwrap_err(),
        index.search(&[], 1).unwrap_err(),
        index.search(&data[..DIM], 0).unwrap_err(),
        index.add(&data[..DIM + 3]).unwrap_err(),
        index.add_with_ids(&data[..2 * DIM], &[1]).unwrap_err(),
        index.train(&data[..5]).unwrap_err(),
    ] {
        assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{err}");
        assert_eq!(err.code(), sys::IVF_ERR_INVALID_ARGUMENT);
        assert!(!err.message().is_empty());
    }
    let mut ids = vec![0i64; 3];
    let mut dists = vec![0f32; 4];
    let err = index
        .search_into(&data[..2 * DIM], 2, &mut ids, &mut dists)
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument);
    assert_eq!(ids, [0, 0, 0], "outputs untouched");
    // Nothing was added by the refused calls.
    assert_eq!(index.ntotal().unwrap(), N);
}

#[test]
fn library_errors_carry_kind_code_and_message() {
    let index = Index::new(DIM, &test_params()).unwrap();
    let data = generate(N, DIM, 1);

    let err = index.search(&data[..DIM], 1).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidState);
    assert_eq!(err.code(), sys::IVF_ERR_INVALID_STATE);
    assert!(!err.message().is_empty());
    assert!(err.to_string().contains("invalid state"), "{err}");

    let err = index.add(&data).unwrap_err();
    assert_eq!(
        err.kind(),
        ErrorKind::InvalidState,
        "add before train: {err}"
    );

    // Fewer training vectors than lists.
    let err = index.train(&data[..(NLIST - 1) * DIM]).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{err}");

    index.train(&data).unwrap();
    let mut bad = data[..DIM].to_vec();
    bad[3] = f32::NAN;
    let err = index.add(&bad).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument, "NaN: {err}");
    assert_eq!(index.ntotal().unwrap(), 0, "a failed add changes nothing");
    bad[3] = f32::INFINITY;
    let err = index.search(&bad, 1).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument, "Inf: {err}");

    index.add(&data).unwrap();
    let err = index.train(&data).unwrap_err();
    assert_eq!(
        err.kind(),
        ErrorKind::InvalidState,
        "train a filled index: {err}"
    );
}

#[test]
fn parameters_out_of_bounds_are_invalid_arguments() {
    for params in [
        IndexParams::new().nlist(0),
        IndexParams::new().nprobe(0),
        IndexParams::new().num_threads(1 << 20),
        IndexParams::new().seed(u64::MAX),
        IndexParams::new().metric(ivfgpu::Metric::from_raw(42)),
    ] {
        let err = Index::new(4, &params).unwrap_err();
        assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{params:?}: {err}");
        assert!(!err.message().is_empty());
    }
    let err = Index::new(0, &IndexParams::new()).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument);

    let (index, data) = filled_index();
    let err = index
        .search_with(&data[..DIM], 1, &SearchParams::new().nprobe(0))
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument);
}

#[test]
fn cuda_without_a_device_is_unsupported() {
    if ivfgpu::cuda_device_count().unwrap() > 0 {
        return; // the GPU machine: covered by the CUDA test below
    }
    let err = Index::new(4, &IndexParams::new().backend(Backend::CUDA)).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Unsupported, "{err}");
}

#[test]
fn error_kinds_map_every_code() {
    let pairs = [
        (sys::IVF_ERR_INVALID_ARGUMENT, ErrorKind::InvalidArgument),
        (
            sys::IVF_ERR_OUT_OF_DEVICE_MEMORY,
            ErrorKind::OutOfDeviceMemory,
        ),
        (sys::IVF_ERR_OUT_OF_HOST_MEMORY, ErrorKind::OutOfHostMemory),
        (sys::IVF_ERR_CUDA, ErrorKind::Cuda),
        (sys::IVF_ERR_UNSUPPORTED, ErrorKind::Unsupported),
        (sys::IVF_ERR_INVALID_STATE, ErrorKind::InvalidState),
        (sys::IVF_ERR_BUFFER_TOO_SMALL, ErrorKind::BufferTooSmall),
        (sys::IVF_ERR_IO, ErrorKind::Io),
        (sys::IVF_ERR_CORRUPT_DATA, ErrorKind::CorruptData),
        (sys::IVF_ERR_VERSION_MISMATCH, ErrorKind::VersionMismatch),
        (sys::IVF_ERR_DEVICE_LOST, ErrorKind::DeviceLost),
        (sys::IVF_ERR_INTERNAL, ErrorKind::Internal),
        (sys::IVF_ERR_CANCELLED, ErrorKind::Cancelled),
        (-1000, ErrorKind::Unknown),
    ];
    for (code, kind) in pairs {
        assert_eq!(ErrorKind::from_code(code), kind);
    }
    assert!(ErrorKind::OutOfDeviceMemory.is_out_of_memory());
    assert!(!ErrorKind::Io.is_out_of_memory());
}

#[test]
fn missing_files_are_io_errors_or_unsupported() {
    let err = Index::load("/nonexistent/dir/index.ivf", &IndexParams::new()).unwrap_err();
    assert!(
        matches!(err.kind(), ErrorKind::Io | ErrorKind::Unsupported),
        "{err}"
    );
    let err = Index::load("bad\0path", &IndexParams::new()).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument);
}
