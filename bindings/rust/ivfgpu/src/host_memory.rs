//! Page-locked host memory for queries and results: [`HostBuffer`] (memory the library
//! allocates) and [`HostRegistration`] (the caller's own slice, locked in place).
//!
//! A CUDA index copies the queries of a host-memory search in and its results out. From
//! ordinary (pageable) memory the CUDA driver stages those copies at about the host's memcpy
//! rate; from page-locked memory it copies directly, about five times faster (5 MB of queries:
//! ~0.5 ms against ~0.1 ms). Worth it for buffers reused by many searches; searches take them
//! like any slice (they deref to `[T]`) and return the same results. Without a CUDA device the
//! memory is ordinary and a registration only recorded, so the same code runs everywhere.
//!
//! ```
//! use ivfgpu::{Backend, HostBuffer, Index, IndexParams};
//!
//! let dim = 4;
//! let data: Vec<f32> = (0..64 * dim).map(|i| (i / dim) as f32).collect();
//! let index = Index::new(dim, &IndexParams::new().nlist(4).backend(Backend::CPU))?;
//! index.train(&data)?;
//! index.add(&data)?;
//!
//! // Queries and results in page-locked memory, reused by every search.
//! let queries = HostBuffer::from_slice(&data[..2 * dim])?;
//! let mut ids = HostBuffer::<i64>::zeroed(2 * 3)?;
//! let mut distances = HostBuffer::<f32>::zeroed(2 * 3)?;
//! index.search_into(&queries, 3, &mut ids, &mut distances)?;
//! assert_eq!((ids[0], distances[0]), (0, 0.0));
//! # Ok::<(), ivfgpu::Error>(())
//! ```

use core::ops::{Deref, DerefMut};
use core::ptr::NonNull;

use crate::element::{Bf16, F16};
use crate::error::{check, Error, Result};
use crate::sys;

mod sealed {
    pub trait Sealed {}
}

/// A plain value type that may live in a [`HostBuffer`] or [`HostRegistration`]: every bit
/// pattern (all zeros included) is a valid value. Sealed: the primitive integers, `f32`,
/// `f64`, [`F16`] and [`Bf16`].
pub trait HostPod: sealed::Sealed + Copy + 'static {}
macro_rules! host_pod {
    ($($t:ty),*) => {$(
        impl sealed::Sealed for $t {}
        impl HostPod for $t {}
    )*};
}
host_pod!(u8, i8, u16, i16, u32, i32, u64, i64, f32, f64, F16, Bf16);

/// `len` values of `T` in page-locked host memory from `ivf_host_alloc`, zeroed at first,
/// freed on drop. Derefs to `[T]`.
pub struct HostBuffer<T: HostPod> {
    ptr: NonNull<T>,
    len: usize,
}

// SAFETY: the buffer owns its memory like a Box<[T]>; nothing in it is tied to a thread.
unsafe impl<T: HostPod + Send> Send for HostBuffer<T> {}
unsafe impl<T: HostPod + Sync> Sync for HostBuffer<T> {}

impl<T: HostPod> HostBuffer<T> {
    /// `len` zeros. An empty buffer allocates nothing.
    pub fn zeroed(len: usize) -> Result<HostBuffer<T>> {
        let bytes = len.checked_mul(core::mem::size_of::<T>()).ok_or_else(|| {
            Error::invalid_argument(format!("HostBuffer: {len} values overflow usize bytes"))
        })?;
        if bytes == 0 {
            return Ok(HostBuffer {
                ptr: NonNull::dangling(),
                len,
            });
        }
        let mut raw: *mut core::ffi::c_void = core::ptr::null_mut();
        // SAFETY: raw is a valid out-pointer; the library returns 64-byte aligned memory,
        // enough for every HostPod type.
        check(unsafe { sys::ivf_host_alloc(bytes, &mut raw) })?;
        let ptr = NonNull::new(raw.cast::<T>()).expect("ivf_host_alloc returned NULL with IVF_OK");
        // SAFETY: bytes writable bytes at ptr; all-zero bits are a valid T (HostPod).
        unsafe { core::ptr::write_bytes(ptr.as_ptr().cast::<u8>(), 0, bytes) };
        Ok(HostBuffer { ptr, len })
    }

    /// A copy of `values`.
    pub fn from_slice(values: &[T]) -> Result<HostBuffer<T>> {
        let mut b = HostBuffer::zeroed(values.len())?;
        b.copy_from_slice(values);
        Ok(b)
    }
}

impl<T: HostPod> Deref for HostBuffer<T> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        // SAFETY: len initialised values at ptr (dangling and len 0 only when no bytes).
        unsafe { core::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }
}

impl<T: HostPod> DerefMut for HostBuffer<T> {
    fn deref_mut(&mut self) -> &mut [T] {
        // SAFETY: as deref, and &mut self is unique.
        unsafe { core::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl<T: HostPod> Drop for HostBuffer<T> {
    fn drop(&mut self) {
        if self.len * core::mem::size_of::<T>() > 0 {
            // SAFETY: ptr came from ivf_host_alloc and is freed once; no search holds it
            // (searches borrow the buffer, and drop needs it unborrowed).
            let _ = unsafe { sys::ivf_host_free(self.ptr.as_ptr().cast()) };
        }
    }
}

impl<T: HostPod + core::fmt::Debug> core::fmt::Debug for HostBuffer<T> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

/// The caller's slice, page-locked in place (`ivf_host_register`) for as long as this guard
/// lives; it derefs to the slice. Registering costs about as much as copying the slice once
/// from pageable memory, so it pays for buffers that many searches reuse.
///
/// ```
/// let mut queries = vec![0.0f32; 1024];
/// let mut pinned = ivfgpu::HostRegistration::new(&mut queries)?;
/// pinned[0] = 1.0; // still the same memory
/// drop(pinned);     // unregistered
/// assert_eq!(queries[0], 1.0);
/// # Ok::<(), ivfgpu::Error>(())
/// ```
pub struct HostRegistration<'a, T: HostPod> {
    data: &'a mut [T],
}

impl<'a, T: HostPod> HostRegistration<'a, T> {
    /// Registers `data`. An empty slice registers nothing. Fails with `InvalidArgument` when
    /// the memory is registered already (here or by other CUDA code), `OutOfHostMemory` when
    /// the system will not lock that much (e.g. `RLIMIT_MEMLOCK`).
    pub fn new(data: &'a mut [T]) -> Result<HostRegistration<'a, T>> {
        let bytes = core::mem::size_of_val(data);
        if bytes > 0 {
            // SAFETY: data is valid for bytes and stays borrowed until drop unregisters it.
            check(unsafe { sys::ivf_host_register(data.as_mut_ptr().cast(), bytes) })?;
        }
        Ok(HostRegistration { data })
    }
}

impl<T: HostPod> Deref for HostRegistration<'_, T> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        self.data
    }
}

impl<T: HostPod> DerefMut for HostRegistration<'_, T> {
    fn deref_mut(&mut self) -> &mut [T] {
        self.data
    }
}

impl<T: HostPod> Drop for HostRegistration<'_, T> {
    fn drop(&mut self) {
        if core::mem::size_of_val(self.data) > 0 {
            // SAFETY: the pointer registered in new.
            let _ = unsafe { sys::ivf_host_unregister(self.data.as_mut_ptr().cast()) };
        }
    }
}
