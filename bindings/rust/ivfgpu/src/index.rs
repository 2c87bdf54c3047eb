//! `Index`: an owned `ivf_index` handle and the calls on it.

use core::ffi::c_void;
use core::fmt;
use core::ops::ControlFlow;
use core::ptr::NonNull;
use std::ffi::CString;
use std::path::Path;

use ivfgpu_sys as sys;

use crate::element::Element;
use crate::error::{check, Error, Result};
use crate::params::{Backend, IndexParams, Metric, RawParams, SearchParams, StorageType};
use crate::progress::{self, ProgressFn, Stage};

/// The id of a padding entry: a result row holds fewer than `k` real neighbours when fewer
/// candidates exist; the rest have this id and an infinite distance (+inf for L2, -inf for
/// inner product and cosine).
pub const NO_ID: i64 = -1;

/// An IVF-Flat index, owning its C handle; dropping it frees the index. Its rows are stored
/// as `f32` unless [`IndexParams::storage_type`] says otherwise; the methods take `f32` rows,
/// and their `_typed` forms rows of any [`Element`] type (the index's storage type, read in
/// place).
///
/// Lifecycle: [`Index::new`] → [`train`](Index::train) → [`add`](Index::add) /
/// [`add_with_ids`](Index::add_with_ids) → [`search`](Index::search).
/// Vectors are passed row-major in flat slices whose length must be a multiple of
/// [`dim`](Index::dim); every length is checked before calling into the library.
///
/// ```
/// use ivfgpu::{Backend, Index, IndexParams, SearchParams};
///
/// let dim = 4;
/// // 64 vectors: vector i is (i, i, i, i).
/// let data: Vec<f32> = (0..64).flat_map(|i| [i as f32; 4]).collect();
/// let index = Index::new(dim, &IndexParams::new().nlist(4).backend(Backend::CPU))?;
/// index.train(&data)?;
/// index.add(&data)?;
/// assert_eq!(index.ntotal()?, 64);
///
/// // Exact search (all lists probed): the 3 nearest neighbours of (10.2, 10.2, 10.2, 10.2).
/// let found = index.search_with(&[10.2; 4], 3, &SearchParams::new().nprobe(4))?;
/// assert_eq!(found.ids(), &[10, 11, 9]);
/// # Ok::<(), ivfgpu::Error>(())
/// ```
///
/// Errors carry a kind, the C status code and the library's message:
///
/// ```
/// use ivfgpu::{Backend, ErrorKind, Index, IndexParams};
///
/// let index = Index::new(8, &IndexParams::new().backend(Backend::CPU))?;
/// // Searching an untrained index is refused by the library ...
/// let err = index.search(&[0.0; 8], 1).unwrap_err();
/// assert_eq!(err.kind(), ErrorKind::InvalidState);
/// // ... and a query of the wrong length by the binding, before any C call.
/// let err = index.search(&[0.0; 7], 1).unwrap_err();
/// assert_eq!(err.kind(), ErrorKind::InvalidArgument);
/// # Ok::<(), ivfgpu::Error>(())
/// ```
///
/// An index cannot be used after it is dropped, nor freed twice: ownership rules it out at
/// compile time.
///
/// ```compile_fail,E0382
/// # use ivfgpu::{Index, IndexParams};
/// let index = Index::new(8, &IndexParams::new())?;
/// drop(index);
/// index.ntotal()?; // error[E0382]: borrow of moved value: `index`
/// # Ok::<(), ivfgpu::Error>(())
/// ```
#[derive(Debug)]
pub struct Index {
    handle: NonNull<sys::ivf_index>,
    dim: usize,
}

// Thread-safety, from the C contract in ivfgpu.h ("every call on an index may run
// concurrently from any number of threads, except ivf_free"):
// - Send: a handle has no thread affinity. Any call may be made from any thread, and
//   ivf_free "works from any thread". The thread-local error message does not tie the handle
//   to a thread: `check` copies it on the calling thread right after each call.
// - Sync: every call this API makes through `&Index` is one the header allows to run
//   concurrently with any other call on the same index: searches and other reads
//   (ivf_search, ivf_ntotal, ivf_index_info, ivf_serialize, ivf_save) and mutations
//   (ivf_train, ivf_add, ivf_reset and their _ex forms). A mutation builds a new state and
//   publishes it atomically; mutations take the index's mutation lock among themselves but
//   never wait for searches, and a search reads one published state from start to end.
//   So the mutations take `&self` too, and an `Arc<Index>` can ingest while it serves.
// - ivf_free "must not race with any other call": `Drop` takes the index by value, so no
//   borrow (and no other thread's call) can be alive while it runs.
unsafe impl Send for Index {}
unsafe impl Sync for Index {}

fn to_i64(value: usize) -> i64 {
    // Slice lengths never exceed isize::MAX, so this never saturates for them.
    i64::try_from(value).unwrap_or(i64::MAX)
}

fn path_to_cstring(path: &Path) -> Result<CString> {
    use std::os::unix::ffi::OsStrExt;
    CString::new(path.as_os_str().as_bytes())
        .map_err(|_| Error::invalid_argument(format!("path {path:?} contains a NUL byte")))
}

impl Index {
    /// Creates an empty, untrained index of dimension `dim` with the given build parameters.
    /// The backend is fixed here.
    pub fn new(dim: usize, params: &IndexParams) -> Result<Index> {
        if dim == 0 {
            return Err(Error::invalid_argument("dim must be >= 1".into()));
        }
        let raw = params.to_raw()?;
        let mut handle = core::ptr::null_mut();
        check(unsafe { sys::ivf_create(&mut handle, to_i64(dim), RawParams::ptr(&raw)) })?;
        Ok(Index::from_created(handle, dim))
    }

    fn from_created(handle: *mut sys::ivf_index, dim: usize) -> Index {
        Index {
            handle: NonNull::new(handle).expect("the library returned IVF_OK and NULL"),
            dim,
        }
    }

    /// Takes ownership of a handle created by the library, e.g. through `ivfgpu-sys`.
    ///
    /// # Safety
    /// `handle` must come from `ivf_create`, `ivf_load` or `ivf_deserialize`, must not be
    /// freed elsewhere, and nothing else may use it afterwards.
    pub unsafe fn from_raw(handle: NonNull<sys::ivf_index>) -> Result<Index> {
        let mut dim = 0;
        check(unsafe { sys::ivf_index_info(handle.as_ptr(), sys::IVF_INFO_DIM, &mut dim) })?;
        Ok(Index {
            handle,
            dim: dim as usize,
        })
    }

    /// The raw handle, for calls this crate does not wrap. It stays owned by `self`.
    pub fn as_raw(&self) -> *const sys::ivf_index {
        self.handle.as_ptr()
    }

    /// Dimension of the vectors.
    pub fn dim(&self) -> usize {
        self.dim
    }

    /// Number of vectors in `data`, checking that it is a non-empty whole number of rows.
    fn rows<T>(&self, data: &[T], what: &str) -> Result<usize> {
        if data.is_empty() {
            return Err(Error::invalid_argument(format!("{what}: no vectors given")));
        }
        if data.len() % self.dim != 0 {
            return Err(Error::invalid_argument(format!(
                "{what}: length {} is not a multiple of the dimension {}",
                data.len(),
                self.dim
            )));
        }
        Ok(data.len() / self.dim)
    }

    /// Trains the coarse quantizer (k-means) on `data` (at least nlist vectors). Fails with
    /// `InvalidState` when the index already holds vectors.
    ///
    /// Like every mutation (`train`, `add*`, `reset`) it takes `&self`: it never waits for
    /// searches, which keep reading the previous state until it returns, and mutations on
    /// one index run one at a time. A search that starts after it returned sees it.
    pub fn train(&self, data: &[f32]) -> Result<()> {
        self.train_impl(data, None)
    }

    /// [`train`](Index::train) on rows of any [`Element`] type: `f32`, or the index's storage
    /// type (a `u8` index trained on `&[u8]`, say).
    pub fn train_typed<T: Element>(&self, data: &[T]) -> Result<()> {
        self.train_impl(data, None)
    }

    fn train_impl<T: Element>(
        &self,
        data: &[T],
        progress: Option<&mut ProgressFn<'_>>,
    ) -> Result<()> {
        let n = self.rows(data, "train")?;
        progress::call(None, progress, |params| unsafe {
            sys::ivf_train_ex(
                self.handle.as_ptr(),
                params,
                data.as_ptr().cast(),
                T::STORAGE.raw(),
                to_i64(n),
                to_i64(self.dim),
            )
        })
    }

    /// A view of the index whose calls (train, add, search) report their progress to
    /// `progress` and can be cancelled by it; see [`WithProgress`].
    ///
    /// ```
    /// use std::ops::ControlFlow;
    /// use ivfgpu::{Backend, ErrorKind, Index, IndexParams, Stage};
    ///
    /// let data: Vec<f32> = (0..64).flat_map(|i| [i as f32; 4]).collect();
    /// let index = Index::new(4, &IndexParams::new().nlist(4).backend(Backend::CPU))?;
    ///
    /// let mut reports = Vec::new();
    /// index
    ///     .with_progress(|stage, fraction| {
    ///         reports.push((stage, fraction));
    ///         ControlFlow::Continue(())
    ///     })
    ///     .train(&data)?;
    /// assert_eq!(reports.first(), Some(&(Stage::TRAIN, 0.0)));
    /// assert_eq!(reports.last(), Some(&(Stage::TRAIN, 1.0)));
    ///
    /// // Break cancels: the call fails with `Cancelled` and the index is unchanged.
    /// let err = index.with_progress(|_, _| ControlFlow::Break(())).add(&data).unwrap_err();
    /// assert_eq!(err.kind(), ErrorKind::Cancelled);
    /// assert_eq!(index.ntotal()?, 0);
    /// # Ok::<(), ivfgpu::Error>(())
    /// ```
    pub fn with_progress<F>(&self, progress: F) -> WithProgress<'_, F>
    where
        F: FnMut(Stage, f64) -> ControlFlow<()>,
    {
        WithProgress {
            index: self,
            progress,
        }
    }

    /// Adds vectors with sequential ids (continuing from [`ntotal`](Index::ntotal)).
    /// All or nothing: on failure the index is unchanged.
    pub fn add(&self, data: &[f32]) -> Result<()> {
        self.add_impl(data, None, None)
    }

    /// Adds vectors with caller ids, one per vector (any value except [`NO_ID`]).
    pub fn add_with_ids(&self, data: &[f32], ids: &[i64]) -> Result<()> {
        self.add_impl(data, Some(ids), None)
    }

    /// [`add`](Index::add) of rows of any [`Element`] type: `f32`, or the index's storage
    /// type.
    pub fn add_typed<T: Element>(&self, data: &[T]) -> Result<()> {
        self.add_impl(data, None, None)
    }

    /// [`add_with_ids`](Index::add_with_ids) of rows of any [`Element`] type.
    pub fn add_with_ids_typed<T: Element>(&self, data: &[T], ids: &[i64]) -> Result<()> {
        self.add_impl(data, Some(ids), None)
    }

    fn add_impl<T: Element>(
        &self,
        data: &[T],
        ids: Option<&[i64]>,
        progress: Option<&mut ProgressFn<'_>>,
    ) -> Result<()> {
        let n = match ids {
            None => self.rows(data, "add")?,
            Some(ids) => {
                let n = self.rows(data, "add_with_ids")?;
                if ids.len() != n {
                    return Err(Error::invalid_argument(format!(
                        "add_with_ids: {} ids for {n} vectors",
                        ids.len()
                    )));
                }
                n
            }
        };
        let ids = ids.map_or(core::ptr::null(), |ids| ids.as_ptr());
        progress::call(None, progress, |params| unsafe {
            sys::ivf_add_ex(
                self.handle.as_ptr(),
                params,
                data.as_ptr().cast(),
                T::STORAGE.raw(),
                to_i64(n),
                to_i64(self.dim),
                ids,
            )
        })
    }

    /// Removes every vector, keeping the trained centroids.
    pub fn reset(&self) -> Result<()> {
        check(unsafe { sys::ivf_reset(self.handle.as_ptr()) })
    }

    /// [`train`](Index::train) on `n` vectors in CUDA device memory (a CUDA index only; the
    /// library refuses others with `InvalidArgument`). When `stream` (a `cudaStream_t`) is not
    /// null the library waits for the work queued on it before reading `data`. Synchronous.
    ///
    /// # Safety
    /// `data` must be a device pointer on the index's device to `n * dim()` readable `f32`s,
    /// valid until the call returns; `stream` must be null or a live stream of that device.
    pub unsafe fn train_device(
        &self,
        data: *const f32,
        n: usize,
        stream: *mut c_void,
    ) -> Result<()> {
        let raw = RawParams::device(stream)?;
        check(unsafe {
            sys::ivf_train_ex(
                self.handle.as_ptr(),
                RawParams::ptr(&raw),
                data.cast(),
                sys::IVF_DTYPE_F32,
                to_i64(n),
                to_i64(self.dim),
            )
        })
    }

    /// [`add`](Index::add) / [`add_with_ids`](Index::add_with_ids) of `n` vectors in CUDA
    /// device memory, as [`train_device`](Index::train_device) reads them. `ids` is null
    /// (sequential ids) or a device pointer to `n` ids.
    ///
    /// # Safety
    /// As for [`train_device`](Index::train_device); `ids`, when not null, must be a device
    /// pointer to `n` readable `i64`s on the index's device.
    pub unsafe fn add_device(
        &self,
        data: *const f32,
        n: usize,
        ids: *const i64,
        stream: *mut c_void,
    ) -> Result<()> {
        let raw = RawParams::device(stream)?;
        check(unsafe {
            sys::ivf_add_ex(
                self.handle.as_ptr(),
                RawParams::ptr(&raw),
                data.cast(),
                sys::IVF_DTYPE_F32,
                to_i64(n),
                to_i64(self.dim),
                ids,
            )
        })
    }

    /// Removes every vector whose id is in `ids` (absent ids are no error; repeats are
    /// harmless) and returns how many vectors were removed. A mutation: searches that started
    /// before it may still return the removed vectors, those that start after it never do.
    /// Removed rows are skipped by every scan and reclaimed when their list is compacted.
    pub fn remove(&self, ids: &[i64]) -> Result<usize> {
        let mut removed = 0;
        check(unsafe {
            sys::ivf_remove(
                self.handle.as_ptr(),
                core::ptr::null(),
                ids.as_ptr(),
                to_i64(ids.len()),
                &mut removed,
            )
        })?;
        Ok(removed as usize)
    }

    /// Upsert: for each id, the vectors held with that id (all of them, where ids repeat) are
    /// replaced by the matching row of `data`, so the id then has one vector; an id the index
    /// does not hold is added. `ids` must not repeat nor contain
    /// [`NO_ID`]. All or nothing, published as one state.
    pub fn update(&self, data: &[f32], ids: &[i64]) -> Result<()> {
        self.update_typed(data, ids)
    }

    /// [`update`](Index::update) with rows of any [`Element`] type: `f32`, or the index's
    /// storage type.
    pub fn update_typed<T: Element>(&self, data: &[T], ids: &[i64]) -> Result<()> {
        let n = self.rows(data, "update")?;
        if ids.len() != n {
            return Err(Error::invalid_argument(format!(
                "update: {} ids for {n} vectors",
                ids.len()
            )));
        }
        check(unsafe {
            sys::ivf_update(
                self.handle.as_ptr(),
                core::ptr::null(),
                data.as_ptr().cast(),
                T::STORAGE.raw(),
                to_i64(n),
                to_i64(self.dim),
                ids.as_ptr(),
            )
        })
    }

    /// [`update`](Index::update) of `n` vectors and ids in CUDA device memory, read as
    /// [`add_device`](Index::add_device) reads them.
    ///
    /// # Safety
    /// `data` and `ids` must be device pointers on the index's device to `n * dim()` `f32`s
    /// and `n` `i64`s, valid until the call returns; `stream` must be null or a live stream
    /// of that device.
    pub unsafe fn update_device(
        &self,
        data: *const f32,
        n: usize,
        ids: *const i64,
        stream: *mut c_void,
    ) -> Result<()> {
        let raw = RawParams::device(stream)?;
        check(unsafe {
            sys::ivf_update(
                self.handle.as_ptr(),
                RawParams::ptr(&raw),
                data.cast(),
                sys::IVF_DTYPE_F32,
                to_i64(n),
                to_i64(self.dim),
                ids,
            )
        })
    }

    /// The stored vector of each id (the index's own copy: unit length for the cosine
    /// metric), from one published state. An id with several vectors gives the first in list
    /// order ([`count_ids`](Index::count_ids) tells how many there are); an absent id gives
    /// `None` in [`StoredVectors::get`].
    pub fn get(&self, ids: &[i64]) -> Result<StoredVectors> {
        self.get_typed(ids)
    }

    /// [`get`](Index::get) returning the rows as `T`: `f32` (decoded), or the index's storage
    /// type (exactly the stored values). Another type is refused (`InvalidArgument`).
    pub fn get_typed<T: Element>(&self, ids: &[i64]) -> Result<StoredVectors<T>> {
        let total = ids
            .len()
            .checked_mul(self.dim)
            // n * dim * 4 bytes must fit, whatever T (the library checks that bound)
            .filter(|&t| t <= isize::MAX as usize / core::mem::size_of::<f32>())
            .ok_or_else(|| Error::invalid_argument(format!("get: {} ids overflow", ids.len())))?;
        let mut data = vec![T::default(); total];
        let mut found = vec![0u8; ids.len()];
        check(unsafe {
            sys::ivf_get(
                self.handle.as_ptr(),
                core::ptr::null(),
                ids.as_ptr(),
                to_i64(ids.len()),
                data.as_mut_ptr().cast(),
                T::STORAGE.raw(),
                to_i64(self.dim),
                found.as_mut_ptr(),
            )
        })?;
        Ok(StoredVectors {
            data,
            found: found.into_iter().map(|f| f != 0).collect(),
            dim: self.dim,
        })
    }

    /// The number of vectors held with each id (0: absent), from one published state.
    pub fn count_ids(&self, ids: &[i64]) -> Result<Vec<usize>> {
        let mut counts = vec![0i64; ids.len()];
        check(unsafe {
            sys::ivf_count_ids(
                self.handle.as_ptr(),
                ids.as_ptr(),
                to_i64(ids.len()),
                counts.as_mut_ptr(),
            )
        })?;
        Ok(counts.into_iter().map(|c| c as usize).collect())
    }

    /// The `k` nearest neighbours of each query, with the index's default parameters.
    pub fn search(&self, queries: &[f32], k: usize) -> Result<SearchResult> {
        self.search_with(queries, k, &SearchParams::new())
    }

    /// The `k` nearest neighbours of each query, with search parameters.
    pub fn search_with(
        &self,
        queries: &[f32],
        k: usize,
        params: &SearchParams,
    ) -> Result<SearchResult> {
        self.search_with_impl(queries, k, params, None)
    }

    /// [`search_with`](Index::search_with) for queries of any [`Element`] type: `f32`, or the
    /// index's storage type. Distances are `f32` as always; integer queries against integer
    /// rows give exact integer distances, rounded once to `f32`.
    pub fn search_typed<T: Element>(
        &self,
        queries: &[T],
        k: usize,
        params: &SearchParams,
    ) -> Result<SearchResult> {
        self.search_with_impl(queries, k, params, None)
    }

    /// [`search_into_with`](Index::search_into_with) for queries of any [`Element`] type.
    pub fn search_into_typed<T: Element>(
        &self,
        queries: &[T],
        k: usize,
        ids: &mut [i64],
        distances: &mut [f32],
        params: &SearchParams,
    ) -> Result<()> {
        self.search_into_impl(queries, k, ids, distances, params, None)
    }

    fn search_with_impl<T: Element>(
        &self,
        queries: &[T],
        k: usize,
        params: &SearchParams,
        progress: Option<&mut ProgressFn<'_>>,
    ) -> Result<SearchResult> {
        let n = self.rows(queries, "search")?;
        let total = result_len(n, k)?;
        let mut ids = vec![NO_ID; total];
        let mut distances = vec![0.0f32; total];
        self.search_into_impl(queries, k, &mut ids, &mut distances, params, progress)?;
        Ok(SearchResult { ids, distances, k })
    }

    /// Like [`search`](Index::search), writing into caller slices of exactly
    /// `queries.len() / dim * k` elements each (row-major, best first).
    pub fn search_into(
        &self,
        queries: &[f32],
        k: usize,
        ids: &mut [i64],
        distances: &mut [f32],
    ) -> Result<()> {
        self.search_into_with(queries, k, ids, distances, &SearchParams::new())
    }

    /// Like [`search_with`](Index::search_with), writing into caller slices. On error the
    /// slices are untouched when an argument check failed, otherwise unspecified.
    pub fn search_into_with(
        &self,
        queries: &[f32],
        k: usize,
        ids: &mut [i64],
        distances: &mut [f32],
        params: &SearchParams,
    ) -> Result<()> {
        self.search_into_impl(queries, k, ids, distances, params, None)
    }

    fn search_into_impl<T: Element>(
        &self,
        queries: &[T],
        k: usize,
        ids: &mut [i64],
        distances: &mut [f32],
        params: &SearchParams,
        progress: Option<&mut ProgressFn<'_>>,
    ) -> Result<()> {
        let n = self.rows(queries, "search")?;
        let total = result_len(n, k)?;
        if ids.len() != total || distances.len() != total {
            return Err(Error::invalid_argument(format!(
                "search: {n} queries x k = {k} need {total} ids and distances, got {} and {}",
                ids.len(),
                distances.len()
            )));
        }
        let raw = params.to_raw()?;
        progress::call(raw, progress, |params| unsafe {
            sys::ivf_search(
                self.handle.as_ptr(),
                params,
                queries.as_ptr().cast(),
                T::STORAGE.raw(),
                to_i64(n),
                to_i64(self.dim),
                to_i64(k),
                ids.as_mut_ptr(),
                distances.as_mut_ptr(),
            )
        })
    }

    fn info(&self, key: sys::ivf_info_key) -> Result<i64> {
        let mut value = 0;
        check(unsafe { sys::ivf_index_info(self.handle.as_ptr(), key, &mut value) })?;
        Ok(value)
    }

    /// Number of vectors held.
    pub fn ntotal(&self) -> Result<usize> {
        let mut n = 0;
        check(unsafe { sys::ivf_ntotal(self.handle.as_ptr(), &mut n) })?;
        Ok(n as usize)
    }
    /// Number of inverted lists.
    pub fn nlist(&self) -> Result<usize> {
        self.info(sys::IVF_INFO_NLIST).map(|v| v as usize)
    }
    /// Default number of lists probed per query.
    pub fn nprobe(&self) -> Result<usize> {
        self.info(sys::IVF_INFO_NPROBE).map(|v| v as usize)
    }
    /// The distance measure.
    pub fn metric(&self) -> Result<Metric> {
        self.info(sys::IVF_INFO_METRIC)
            .map(|v| Metric::from_raw(v as i32))
    }
    /// The resolved backend ([`Backend::CPU`] or [`Backend::CUDA`]).
    pub fn backend(&self) -> Result<Backend> {
        self.info(sys::IVF_INFO_BACKEND)
            .map(|v| Backend::from_raw(v as i32))
    }
    /// CUDA device ordinal, `None` on the CPU backend.
    pub fn device(&self) -> Result<Option<u32>> {
        self.info(sys::IVF_INFO_DEVICE)
            .map(|v| u32::try_from(v).ok())
    }
    /// Whether the index has been trained.
    pub fn is_trained(&self) -> Result<bool> {
        self.info(sys::IVF_INFO_IS_TRAINED).map(|v| v != 0)
    }
    /// Device memory held by the index, in bytes (0 on the CPU).
    pub fn device_memory_bytes(&self) -> Result<u64> {
        self.info(sys::IVF_INFO_DEVICE_MEMORY_BYTES)
            .map(|v| v as u64)
    }
    /// Host memory held by the index, in bytes.
    pub fn host_memory_bytes(&self) -> Result<u64> {
        self.info(sys::IVF_INFO_HOST_MEMORY_BYTES).map(|v| v as u64)
    }
    /// Number of the published state a call starting now reads: 0 for a new index, +1 per
    /// successful mutation (train, add, reset, ...). A failed mutation leaves it unchanged.
    pub fn state_version(&self) -> Result<u64> {
        self.info(sys::IVF_INFO_STATE_VERSION).map(|v| v as u64)
    }
    /// Whether ids are unique ([`IndexParams::unique_ids`]).
    pub fn unique_ids(&self) -> Result<bool> {
        self.info(sys::IVF_INFO_UNIQUE_IDS).map(|v| v != 0)
    }
    /// Removed rows still held, awaiting compaction (they are skipped by every scan).
    pub fn removed_rows(&self) -> Result<usize> {
        self.info(sys::IVF_INFO_REMOVED_ROWS).map(|v| v as usize)
    }
    /// Memory of the id map, in bytes (device memory on CUDA, else host memory).
    pub fn id_map_bytes(&self) -> Result<u64> {
        self.info(sys::IVF_INFO_ID_MAP_BYTES).map(|v| v as u64)
    }
    /// Device memory the index's memory pool keeps cached for later searches, in bytes (not
    /// in [`device_memory_bytes`](Index::device_memory_bytes); 0 on the CPU). `reset` and
    /// dropping the index give it back to the driver.
    pub fn pool_bytes(&self) -> Result<u64> {
        self.info(sys::IVF_INFO_POOL_BYTES).map(|v| v as u64)
    }
    /// The device budget in bytes ([`IndexParams::device_budget`]); 0 = unlimited, and on
    /// the CPU backend.
    pub fn device_budget(&self) -> Result<u64> {
        self.info(sys::IVF_INFO_DEVICE_BUDGET).map(|v| v as u64)
    }
    /// Lists with a copy on the device now (every non-empty list for a CUDA index without a budget).
    pub fn resident_lists(&self) -> Result<usize> {
        self.info(sys::IVF_INFO_RESIDENT_LISTS).map(|v| v as usize)
    }
    /// Bytes of list data held on the device now.
    pub fn resident_bytes(&self) -> Result<u64> {
        self.info(sys::IVF_INFO_RESIDENT_BYTES).map(|v| v as u64)
    }
    /// Pinned host memory of the host tier, in bytes (0 for an index without a budget).
    pub fn host_tier_bytes(&self) -> Result<u64> {
        self.info(sys::IVF_INFO_HOST_TIER_BYTES).map(|v| v as u64)
    }
    /// Probes ((query, list) pairs) served from the device cache since the index was created.
    pub fn cache_hits(&self) -> Result<u64> {
        self.info(sys::IVF_INFO_CACHE_HITS).map(|v| v as u64)
    }
    /// Probes ((query, list) pairs) whose list was streamed from the host since the index was created.
    pub fn cache_misses(&self) -> Result<u64> {
        self.info(sys::IVF_INFO_CACHE_MISSES).map(|v| v as u64)
    }
    /// Bytes copied from the host to the device by searches since the index was created.
    pub fn streamed_bytes(&self) -> Result<u64> {
        self.info(sys::IVF_INFO_STREAMED_BYTES).map(|v| v as u64)
    }

    /// The element type rows are stored in ([`IndexParams::storage_type`]).
    pub fn storage_type(&self) -> Result<StorageType> {
        self.info(sys::IVF_INFO_STORAGE_TYPE)
            .map(|v| StorageType::from_raw(v as i32))
    }
    /// Parts of the index ([`IndexParams::shards`]; 1 for a plain index).
    pub fn shards(&self) -> Result<usize> {
        self.info(sys::IVF_INFO_SHARDS).map(|v| v as usize)
    }
    /// Parts still serving (a [`ShardMode::REPLICATE`](crate::ShardMode::REPLICATE) part whose device was lost no longer
    /// does).
    pub fn live_shards(&self) -> Result<usize> {
        self.info(sys::IVF_INFO_LIVE_SHARDS).map(|v| v as usize)
    }
    /// Searches answered inside a merged batch of two or more
    /// ([`IndexParams::dynamic_batching`]) since the index was created.
    pub fn merged_searches(&self) -> Result<u64> {
        self.info(sys::IVF_INFO_MERGED_SEARCHES).map(|v| v as u64)
    }

    /// Searches of at most 64 queries answered by replaying a captured CUDA graph (the opt-in
    /// latency path, `IVFGPU_SEARCH_GRAPH=1`; README "Serving"); 0 on the CPU.
    pub fn graph_searches(&self) -> Result<u64> {
        self.info(sys::IVF_INFO_GRAPH_SEARCHES).map(|v| v as u64)
    }

    /// Searches of a few queries answered by the fused small-batch kernels (the default latency
    /// path; README "Serving") since creation; 0 on the CPU.
    pub fn fused_searches(&self) -> Result<u64> {
        self.info(sys::IVF_INFO_FUSED_SEARCHES).map(|v| v as u64)
    }

    /// Time split searches of an index of several parts spent after their parts returned
    /// (moving the parts' top-k to one device and merging them), since creation; zero for one
    /// part. Its share of the search time is the merge's cost.
    pub fn merge_time(&self) -> Result<std::time::Duration> {
        self.info(sys::IVF_INFO_MERGE_NANOSECONDS)
            .map(|v| std::time::Duration::from_nanos(v.max(0) as u64))
    }
    /// Whether the parts' results cross devices by peer copies (NVLink or PCIe peer-to-peer);
    /// false when they go through host memory, or every part shares one device or the CPU.
    pub fn peer_merge(&self) -> Result<bool> {
        self.info(sys::IVF_INFO_PEER_MERGE).map(|v| v != 0)
    }
    /// The CUDA device of part `part` (`None` on the CPU).
    pub fn part_device(&self, part: usize) -> Result<Option<i32>> {
        self.info(part_key(PART_DEVICE_BASE, part)?).map(|v| if v < 0 { None } else { Some(v as i32) })
    }
    /// Device memory of part `part`, in bytes (as [`Index::device_memory_bytes`]).
    pub fn part_device_memory_bytes(&self, part: usize) -> Result<u64> {
        self.info(part_key(PART_DEVICE_MEMORY_BASE, part)?).map(|v| v as u64)
    }

    /// Writes the index to `path` atomically (the file is replaced only on success).
    pub fn save(&self, path: impl AsRef<Path>) -> Result<()> {
        let path = path_to_cstring(path.as_ref())?;
        check(unsafe { sys::ivf_save(self.handle.as_ptr(), path.as_ptr()) })
    }

    /// Writes the index as a FAISS `IndexIVFFlat` file (L2 and inner product), atomically.
    pub fn save_faiss(&self, path: impl AsRef<Path>) -> Result<()> {
        let path = path_to_cstring(path.as_ref())?;
        check(unsafe { sys::ivf_save_faiss(self.handle.as_ptr(), path.as_ptr()) })
    }

    /// Reads an index written by [`save`](Index::save) or a FAISS `IndexIVFFlat` file.
    /// `params` choose the backend, device, threads, device budget, parts
    /// ([`shards`](IndexParams::shards), [`shard_mode`](IndexParams::shard_mode)), dynamic
    /// batching and a storage type to convert `f32` rows to; the rest comes from the file.
    pub fn load(path: impl AsRef<Path>, params: &IndexParams) -> Result<Index> {
        Index::load_impl(path.as_ref(), params, None)
    }

    /// [`load`](Index::load), reporting its progress ([`Stage::LOAD`]) to `progress` as
    /// [`with_progress`](Index::with_progress) does. A cancelled load returns `Cancelled`
    /// and no index.
    pub fn load_with_progress(
        path: impl AsRef<Path>,
        params: &IndexParams,
        mut progress: impl FnMut(Stage, f64) -> ControlFlow<()>,
    ) -> Result<Index> {
        Index::load_impl(path.as_ref(), params, Some(&mut progress))
    }

    fn load_impl(
        path: &Path,
        params: &IndexParams,
        progress: Option<&mut ProgressFn<'_>>,
    ) -> Result<Index> {
        let path = path_to_cstring(path)?;
        let raw = params.to_raw()?;
        let mut handle = core::ptr::null_mut();
        progress::call(raw, progress, |params| unsafe {
            sys::ivf_load(path.as_ptr(), params, &mut handle)
        })?;
        let handle = NonNull::new(handle).expect("ivf_load returned IVF_OK and NULL");
        // SAFETY: a fresh handle from ivf_load, owned by nobody else.
        unsafe { Index::from_raw(handle) }
    }

    /// The index as bytes (the format of [`save`](Index::save)).
    pub fn serialize(&self) -> Result<Vec<u8>> {
        let mut size = 0usize;
        check(unsafe {
            sys::ivf_serialize(self.handle.as_ptr(), core::ptr::null_mut(), 0, &mut size)
        })?;
        let mut bytes = vec![0u8; size];
        check(unsafe {
            sys::ivf_serialize(
                self.handle.as_ptr(),
                bytes.as_mut_ptr().cast(),
                size,
                &mut size,
            )
        })?;
        bytes.truncate(size);
        Ok(bytes)
    }

    /// Builds an index from bytes written by [`serialize`](Index::serialize) (or a FAISS
    /// `IndexIVFFlat` file image).
    pub fn deserialize(bytes: &[u8], params: &IndexParams) -> Result<Index> {
        Index::deserialize_impl(bytes, params, None)
    }

    /// [`deserialize`](Index::deserialize), reporting its progress ([`Stage::LOAD`]) to
    /// `progress` as [`with_progress`](Index::with_progress) does.
    pub fn deserialize_with_progress(
        bytes: &[u8],
        params: &IndexParams,
        mut progress: impl FnMut(Stage, f64) -> ControlFlow<()>,
    ) -> Result<Index> {
        Index::deserialize_impl(bytes, params, Some(&mut progress))
    }

    fn deserialize_impl(
        bytes: &[u8],
        params: &IndexParams,
        progress: Option<&mut ProgressFn<'_>>,
    ) -> Result<Index> {
        let raw = params.to_raw()?;
        let mut handle = core::ptr::null_mut();
        progress::call(raw, progress, |params| unsafe {
            sys::ivf_deserialize(bytes.as_ptr().cast(), bytes.len(), params, &mut handle)
        })?;
        let handle = NonNull::new(handle).expect("ivf_deserialize returned IVF_OK and NULL");
        // SAFETY: a fresh handle from ivf_deserialize, owned by nobody else.
        unsafe { Index::from_raw(handle) }
    }
}

impl Drop for Index {
    fn drop(&mut self) {
        // SAFETY: the handle came from the library, is freed exactly once, and no other call
        // on it can be running (Drop has exclusive access).
        unsafe { sys::ivf_free(self.handle.as_ptr()) }
    }
}

/// An index with a progress closure, from [`Index::with_progress`]: the index's train, add
/// and search calls, each reporting to the closure.
///
/// The closure receives the call's [`Stage`] and the fraction done (0 to 1, never
/// decreasing): once at the start (0), about every 50 ms while the work runs, and once at the
/// end (1; for train and add before the result is published). It runs on the calling thread,
/// inside the call. Returning `ControlFlow::Break(())` cancels the call: it fails with
/// [`ErrorKind::Cancelled`](crate::ErrorKind::Cancelled) and the index is exactly as it was
/// (a cancelled search's outputs are unspecified). A panic in the closure cancels the call
/// too, and then continues unwinding from the call once it has returned (the panic never
/// crosses the C library). The closure may read the index (`ntotal`, a search) but must not
/// mutate it (train, add, remove, update, reset): the mutation would wait for the call that
/// runs the closure.
///
/// The view can make several calls, with one closure: `&mut self` methods.
pub struct WithProgress<'i, F> {
    index: &'i Index,
    progress: F,
}

impl<'i, F> WithProgress<'i, F>
where
    F: FnMut(Stage, f64) -> ControlFlow<()>,
{
    /// The index.
    pub fn index(&self) -> &'i Index {
        self.index
    }
    /// The closure back, with whatever it captured.
    pub fn into_inner(self) -> F {
        self.progress
    }
    /// [`Index::train`], reporting [`Stage::TRAIN`].
    pub fn train(&mut self, data: &[f32]) -> Result<()> {
        self.index.train_impl(data, Some(&mut self.progress))
    }
    /// [`Index::add`], reporting [`Stage::ADD`].
    pub fn add(&mut self, data: &[f32]) -> Result<()> {
        self.index.add_impl(data, None, Some(&mut self.progress))
    }
    /// [`Index::add_with_ids`], reporting [`Stage::ADD`].
    pub fn add_with_ids(&mut self, data: &[f32], ids: &[i64]) -> Result<()> {
        self.index
            .add_impl(data, Some(ids), Some(&mut self.progress))
    }
    /// [`Index::search`], reporting [`Stage::SEARCH`].
    pub fn search(&mut self, queries: &[f32], k: usize) -> Result<SearchResult> {
        self.search_with(queries, k, &SearchParams::new())
    }
    /// [`Index::search_with`], reporting [`Stage::SEARCH`].
    pub fn search_with(
        &mut self,
        queries: &[f32],
        k: usize,
        params: &SearchParams,
    ) -> Result<SearchResult> {
        self.index
            .search_with_impl(queries, k, params, Some(&mut self.progress))
    }
    /// [`Index::search_into`], reporting [`Stage::SEARCH`].
    pub fn search_into(
        &mut self,
        queries: &[f32],
        k: usize,
        ids: &mut [i64],
        distances: &mut [f32],
    ) -> Result<()> {
        self.search_into_with(queries, k, ids, distances, &SearchParams::new())
    }
    /// [`Index::search_into_with`], reporting [`Stage::SEARCH`].
    pub fn search_into_with(
        &mut self,
        queries: &[f32],
        k: usize,
        ids: &mut [i64],
        distances: &mut [f32],
        params: &SearchParams,
    ) -> Result<()> {
        self.index
            .search_into_impl(queries, k, ids, distances, params, Some(&mut self.progress))
    }
}

impl<F> fmt::Debug for WithProgress<'_, F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WithProgress")
            .field("index", &self.index)
            .finish_non_exhaustive()
    }
}

fn result_len(n: usize, k: usize) -> Result<usize> {
    if k == 0 {
        return Err(Error::invalid_argument("search: k must be >= 1".into()));
    }
    n.checked_mul(k)
        .filter(|&total| total <= isize::MAX as usize / core::mem::size_of::<i64>())
        .ok_or_else(|| Error::invalid_argument(format!("search: {n} x {k} results overflow")))
}

/// Results of a search: `len()` rows of `k` neighbours, best first.
#[derive(Debug, Clone, PartialEq)]
pub struct SearchResult {
    ids: Vec<i64>,
    distances: Vec<f32>,
    k: usize,
}

impl SearchResult {
    /// Neighbours per query.
    pub fn k(&self) -> usize {
        self.k
    }
    /// Number of queries.
    pub fn len(&self) -> usize {
        self.ids.len() / self.k
    }
    /// True when there are no queries (never, for a successful search).
    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }
    /// All ids, row-major (`len() * k`); padding entries are [`NO_ID`].
    pub fn ids(&self) -> &[i64] {
        &self.ids
    }
    /// All distances, row-major (`len() * k`).
    pub fn distances(&self) -> &[f32] {
        &self.distances
    }
    /// The ids and distances of query `i`. Panics when `i >= len()`.
    pub fn row(&self, i: usize) -> (&[i64], &[f32]) {
        let range = i * self.k..(i + 1) * self.k;
        (&self.ids[range.clone()], &self.distances[range])
    }
    /// The rows, in query order.
    pub fn rows(&self) -> impl Iterator<Item = (&[i64], &[f32])> {
        self.ids
            .chunks_exact(self.k)
            .zip(self.distances.chunks_exact(self.k))
    }
    /// The ids and distances, row-major.
    pub fn into_parts(self) -> (Vec<i64>, Vec<f32>) {
        (self.ids, self.distances)
    }
}

/// Stored vectors read back by [`Index::get`] (`f32`) or [`Index::get_typed`] (`T`): one row
/// of [`dim`](StoredVectors::dim) values per requested id, in request order; the row of an
/// absent id is all zeros.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredVectors<T = f32> {
    data: Vec<T>,
    found: Vec<bool>,
    dim: usize,
}

impl<T> StoredVectors<T> {
    /// Number of requested ids.
    pub fn len(&self) -> usize {
        self.found.len()
    }
    /// True when no ids were requested.
    pub fn is_empty(&self) -> bool {
        self.found.is_empty()
    }
    /// Dimension of the rows.
    pub fn dim(&self) -> usize {
        self.dim
    }
    /// The vector of the `i`-th requested id, `None` when the index does not hold it. Panics
    /// when `i >= len()`.
    pub fn get(&self, i: usize) -> Option<&[T]> {
        self.found[i].then(|| &self.data[i * self.dim..(i + 1) * self.dim])
    }
    /// The rows in request order, `None` for absent ids.
    pub fn iter(&self) -> impl Iterator<Item = Option<&[T]>> {
        (0..self.len()).map(move |i| self.get(i))
    }
    /// Whether each requested id was found.
    pub fn found(&self) -> &[bool] {
        &self.found
    }
    /// All rows, row-major (`len() * dim()`), zeros for absent ids.
    pub fn data(&self) -> &[T] {
        &self.data
    }
    /// The rows (row-major) and the found flags.
    pub fn into_parts(self) -> (Vec<T>, Vec<bool>) {
        (self.data, self.found)
    }
}

// IVF_INFO_PART_DEVICE(part) and IVF_INFO_PART_DEVICE_MEMORY_BYTES(part) are function-like
// macros, which bindgen does not translate: their bases, as the header defines them.
const PART_DEVICE_BASE: sys::ivf_info_key = 4096;
const PART_DEVICE_MEMORY_BASE: sys::ivf_info_key = 8192;

fn part_key(base: sys::ivf_info_key, part: usize) -> Result<sys::ivf_info_key> {
    if part >= 4096 {
        return Err(Error::invalid_argument(format!("part {part} is beyond any index (at most 4096 parts)")));
    }
    Ok(base + part as sys::ivf_info_key)
}
