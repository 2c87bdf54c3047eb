//! `Filter`: an owned `ivf_filter` handle, a reusable and immutable set of ids that restricts
//! searches.

use core::ptr::NonNull;

use ivfgpu_sys as sys;

use crate::error::{check, Result};

/// Whether a [`Filter`]'s ids are the only ones a search may return, or the ones it must not.
/// An integer newtype rather than an enum, like the other C enumerations.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FilterMode(i32);

impl FilterMode {
    /// Only vectors whose id is in the set may be returned.
    pub const ALLOW: FilterMode = FilterMode(sys::IVF_FILTER_ALLOW);
    /// Vectors whose id is in the set are never returned.
    pub const DENY: FilterMode = FilterMode(sys::IVF_FILTER_DENY);

    /// The mode with C value `raw` (`IVF_FILTER_*`).
    pub const fn from_raw(raw: i32) -> FilterMode {
        FilterMode(raw)
    }
    /// The C value (`IVF_FILTER_*`).
    pub const fn raw(self) -> i32 {
        self.0
    }
}

/// A set of ids restricting searches, built once and given to any number of searches, on any
/// index, through [`SearchParams::filter`](crate::SearchParams::filter). A filtered search
/// returns, per query, the `k` nearest permitted vectors among the lists it probes (exactly
/// what an index holding only the permitted vectors would return), padded with
/// [`NO_ID`](crate::NO_ID) when fewer exist. The filter is applied inside the list scan.
///
/// ```
/// use ivfgpu::{Backend, Filter, Index, IndexParams, SearchParams};
///
/// // 64 vectors: vector i is (i, i, i, i), with id i.
/// let data: Vec<f32> = (0..64).flat_map(|i| [i as f32; 4]).collect();
/// let index = Index::new(4, &IndexParams::new().nlist(4).backend(Backend::CPU))?;
/// index.train(&data)?;
/// index.add(&data)?;
///
/// // Nearest neighbours of (10.2, 10.2, 10.2, 10.2) among the even ids, then among all but 9..=11.
/// let even: Vec<i64> = (0..64).step_by(2).collect();
/// let allow = Filter::allow(&even)?;
/// let deny = Filter::deny(&[9, 10, 11])?;
/// let exact = SearchParams::new().nprobe(4);
/// let found = index.search_with(&[10.2; 4], 3, &exact.clone().filter(&allow))?;
/// assert_eq!(found.ids(), &[10, 12, 8]);
/// let found = index.search_with(&[10.2; 4], 2, &exact.filter(&deny))?;
/// assert_eq!(found.ids(), &[12, 8]);
/// # Ok::<(), ivfgpu::Error>(())
/// ```
///
/// The filter must outlive the searches that use it: search parameters borrow it, so it
/// cannot be dropped while they exist.
///
/// ```compile_fail,E0505
/// # use ivfgpu::{Filter, Index, IndexParams, SearchParams};
/// # let index = Index::new(4, &IndexParams::new())?;
/// let filter = Filter::allow(&[1, 2, 3])?;
/// let params = SearchParams::new().filter(&filter);
/// drop(filter); // error[E0505]: cannot move out of `filter` because it is borrowed
/// index.search_with(&[0.0; 4], 1, &params)?;
/// # Ok::<(), ivfgpu::Error>(())
/// ```
#[derive(Debug)]
pub struct Filter {
    handle: NonNull<sys::ivf_filter>,
    mode: FilterMode,
}

// Thread-safety, from the C contract: a filter is "immutable after creation; safe to share
// between threads". Every call through `&Filter` (ivf_filter_bytes, and searches reading it)
// only reads it, so it is Sync; it has no thread affinity and ivf_filter_free works from any
// thread, so it is Send. ivf_filter_free must not run while a search uses it: `Drop` needs
// ownership, and a search borrows the filter through its `SearchParams<'a>`.
unsafe impl Send for Filter {}
unsafe impl Sync for Filter {}

impl Filter {
    /// Builds a filter from `ids` (any values; repeats allowed; empty gives allow-nothing or
    /// deny-nothing).
    pub fn new(ids: &[i64], mode: FilterMode) -> Result<Filter> {
        let mut handle = core::ptr::null_mut();
        check(unsafe {
            sys::ivf_filter_create(&mut handle, ids.as_ptr(), ids.len() as i64, mode.raw())
        })?;
        Ok(Filter {
            handle: NonNull::new(handle).expect("ivf_filter_create returned IVF_OK and NULL"),
            mode,
        })
    }

    /// A filter that lets searches return only vectors whose id is in `ids`.
    pub fn allow(ids: &[i64]) -> Result<Filter> {
        Filter::new(ids, FilterMode::ALLOW)
    }

    /// A filter that keeps searches from returning vectors whose id is in `ids`.
    pub fn deny(ids: &[i64]) -> Result<Filter> {
        Filter::new(ids, FilterMode::DENY)
    }

    /// Whether the ids are allowed or denied.
    pub fn mode(&self) -> FilterMode {
        self.mode
    }

    /// Host memory the filter holds, in bytes.
    pub fn host_bytes(&self) -> Result<u64> {
        let mut bytes = 0;
        check(unsafe {
            sys::ivf_filter_bytes(self.handle.as_ptr(), &mut bytes, core::ptr::null_mut())
        })?;
        Ok(bytes as u64)
    }

    /// Device memory the filter holds, summed over the devices it was uploaded to (on first
    /// use by a search on a CUDA index), in bytes.
    pub fn device_bytes(&self) -> Result<u64> {
        let mut bytes = 0;
        check(unsafe {
            sys::ivf_filter_bytes(self.handle.as_ptr(), core::ptr::null_mut(), &mut bytes)
        })?;
        Ok(bytes as u64)
    }

    /// The raw handle, for calls this crate does not wrap. It stays owned by `self`.
    pub fn as_raw(&self) -> *const sys::ivf_filter {
        self.handle.as_ptr()
    }
}

impl Drop for Filter {
    fn drop(&mut self) {
        // SAFETY: created by the library, freed once; no search can be using it, since
        // searches borrow it and Drop has exclusive access.
        unsafe { sys::ivf_filter_free(self.handle.as_ptr()) }
    }
}
