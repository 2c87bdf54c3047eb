//! Builder-style parameters, turned into a C `ivf_params` object only for the call that reads
//! them (so they are plain Rust values: `Clone`, `Send`, `Sync`, no handle to free).

use core::ffi::c_void;
use core::ptr::NonNull;
use core::time::Duration;

use ivfgpu_sys as sys;

use crate::error::{check, Error, Result};
use crate::filter::Filter;

/// Distance measure. An integer newtype rather than an enum, so that a value reported by a
/// newer library is representable.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Metric(i32);

impl Metric {
    /// Squared Euclidean distance, smallest first.
    pub const L2: Metric = Metric(sys::IVF_METRIC_L2);
    /// Dot product, largest first.
    pub const INNER_PRODUCT: Metric = Metric(sys::IVF_METRIC_INNER_PRODUCT);
    /// Cosine similarity (data and queries normalised), largest first.
    pub const COSINE: Metric = Metric(sys::IVF_METRIC_COSINE);

    /// The metric with C value `raw` (`IVF_METRIC_*`).
    pub const fn from_raw(raw: i32) -> Metric {
        Metric(raw)
    }
    /// The C value (`IVF_METRIC_*`).
    pub const fn raw(self) -> i32 {
        self.0
    }
}

/// Where an index lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Backend(i32);

impl Backend {
    /// The first usable CUDA device, else the CPU.
    pub const AUTO: Backend = Backend(sys::IVF_BACKEND_AUTO);
    /// The CPU reference backend.
    pub const CPU: Backend = Backend(sys::IVF_BACKEND_CPU);
    /// A CUDA device (fails with `Unsupported` without one).
    pub const CUDA: Backend = Backend(sys::IVF_BACKEND_CUDA);

    /// The backend with C value `raw` (`IVF_BACKEND_*`).
    pub const fn from_raw(raw: i32) -> Backend {
        Backend(raw)
    }
    /// The C value (`IVF_BACKEND_*`).
    pub const fn raw(self) -> i32 {
        self.0
    }
}

/// The element type an index stores its rows in ([`IndexParams::storage_type`]), and the type
/// of rows given to it (an [`Element`](crate::Element)'s). An integer newtype, as [`Metric`].
///
/// Every index takes `f32` rows; an index of a compact type also takes rows of that type
/// ([`Index::add_typed`](crate::Index::add_typed), ...). `f32` rows given to a compact index
/// are converted: f16 and bf16 round to nearest even (a value beyond the type's range is
/// refused), u8 and i8 take only integers in range (no scaling; anything else is refused,
/// naming the row). Every backend holds every type (on CUDA, device memory falls with the
/// element size); cosine needs a floating type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct StorageType(i32);

impl StorageType {
    /// `f32` (the default).
    pub const F32: StorageType = StorageType(sys::IVF_DTYPE_F32);
    /// IEEE half precision ([`F16`](crate::F16) rows, or `f32`).
    pub const F16: StorageType = StorageType(sys::IVF_DTYPE_F16);
    /// `u8` (rows of `u8`, or integer-valued `f32`).
    pub const U8: StorageType = StorageType(sys::IVF_DTYPE_U8);
    /// `i8` (rows of `i8`, or integer-valued `f32`).
    pub const I8: StorageType = StorageType(sys::IVF_DTYPE_I8);
    /// bfloat16 ([`Bf16`](crate::Bf16) rows, or `f32`).
    pub const BF16: StorageType = StorageType(sys::IVF_DTYPE_BF16);

    /// The type with C value `raw` (`IVF_DTYPE_*`).
    pub const fn from_raw(raw: i32) -> StorageType {
        StorageType(raw)
    }
    /// The C value (`IVF_DTYPE_*`).
    pub const fn raw(self) -> i32 {
        self.0
    }
}

/// How an index of several parts ([`IndexParams::shards`]) holds its vectors.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ShardMode(i32);

impl ShardMode {
    /// Rows are dealt to the parts in turn; a search runs on every part and their top-k are
    /// merged into exactly the one-part result (ids except ties). The default.
    pub const SPLIT: ShardMode = ShardMode(sys::IVF_SHARD_SPLIT);
    /// Every part holds every row; a search's queries are split among the parts, and a part
    /// whose device is lost is dropped while the others keep serving.
    pub const REPLICATE: ShardMode = ShardMode(sys::IVF_SHARD_REPLICATE);

    /// The mode with C value `raw` (`IVF_SHARD_*`).
    pub const fn from_raw(raw: i32) -> ShardMode {
        ShardMode(raw)
    }
    /// The C value (`IVF_SHARD_*`).
    pub const fn raw(self) -> i32 {
        self.0
    }
}

/// A key's value as given: `None` when it does not fit the C `int64_t` (reported as
/// `InvalidArgument` when the parameters are used).
type Entry = (sys::ivf_param_key, Option<i64>);

fn set(entries: &mut Vec<Entry>, key: sys::ivf_param_key, value: Option<i64>) {
    entries.retain(|(k, _)| *k != key);
    entries.push((key, value));
}

fn int<T: TryInto<i64>>(value: T) -> Option<i64> {
    value.try_into().ok()
}

/// Build parameters of an index, read by [`Index::new`](crate::Index::new) (and `load`).
/// Unset keys keep the library's defaults; values are checked against the library's bounds
/// when the index is created.
///
/// ```
/// use ivfgpu::{Backend, IndexParams, Metric};
/// let params = IndexParams::new().nlist(64).metric(Metric::INNER_PRODUCT).backend(Backend::CPU);
/// # let _ = params;
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct IndexParams {
    entries: Vec<Entry>,
}

impl IndexParams {
    /// All defaults.
    pub fn new() -> IndexParams {
        IndexParams::default()
    }
    /// Number of inverted lists (default 1024); training needs at least this many vectors.
    pub fn nlist(mut self, nlist: usize) -> Self {
        set(&mut self.entries, sys::IVF_PARAM_NLIST, int(nlist));
        self
    }
    /// Distance measure (default [`Metric::L2`]).
    pub fn metric(mut self, metric: Metric) -> Self {
        set(
            &mut self.entries,
            sys::IVF_PARAM_METRIC,
            Some(metric.raw().into()),
        );
        self
    }
    /// Backend (default [`Backend::AUTO`]).
    pub fn backend(mut self, backend: Backend) -> Self {
        set(
            &mut self.entries,
            sys::IVF_PARAM_BACKEND,
            Some(backend.raw().into()),
        );
        self
    }
    /// CUDA device ordinal for the CUDA and AUTO backends (default 0).
    pub fn device(mut self, device: u32) -> Self {
        set(
            &mut self.entries,
            sys::IVF_PARAM_DEVICE,
            Some(device.into()),
        );
        self
    }
    /// k-means iterations (default 10, as FAISS IVF).
    pub fn kmeans_iters(mut self, iters: usize) -> Self {
        set(&mut self.entries, sys::IVF_PARAM_KMEANS_ITERS, int(iters));
        self
    }
    /// Training sample cap: this many points per list (default 256).
    pub fn max_points_per_centroid(mut self, points: usize) -> Self {
        set(
            &mut self.entries,
            sys::IVF_PARAM_MAX_POINTS_PER_CENTROID,
            int(points),
        );
        self
    }
    /// Random seed for sampling and k-means (default 1234).
    pub fn seed(mut self, seed: u64) -> Self {
        set(&mut self.entries, sys::IVF_PARAM_SEED, int(seed));
        self
    }
    /// CPU threads, 0 = all cores (default 0).
    pub fn num_threads(mut self, threads: usize) -> Self {
        set(&mut self.entries, sys::IVF_PARAM_NUM_THREADS, int(threads));
        self
    }
    /// The index's default number of lists probed per query (default 8).
    pub fn nprobe(mut self, nprobe: usize) -> Self {
        set(&mut self.entries, sys::IVF_PARAM_NPROBE, int(nprobe));
        self
    }
    /// Unique ids (default false, as FAISS): every id names at most one vector, and an add
    /// or update that would repeat an id is refused. Otherwise ids may repeat, and
    /// [`remove`](crate::Index::remove) / [`update`](crate::Index::update) act on every
    /// vector with the id.
    pub fn unique_ids(mut self, unique: bool) -> Self {
        set(
            &mut self.entries,
            sys::IVF_PARAM_UNIQUE_IDS,
            Some(i64::from(unique)),
        );
        self
    }

    /// Bytes of device memory a CUDA index may hold (default 0: unlimited, every list on the
    /// device). With a budget every list lives in pinned host memory and the device holds the
    /// centroids, a staging ring, search scratch and a cache of the most-probed lists, all
    /// within the budget; a search streams the probed lists the cache does not hold. Also read
    /// by [`Index::load`](crate::Index::load) and [`Index::deserialize`](crate::Index::deserialize)
    /// ("open": the file's lists become the host tier). A budget too small for the centroids
    /// plus the ring and scratch is refused (`InvalidArgument`, naming the minimum). The CPU
    /// backend accepts it and has nothing to limit.
    pub fn device_budget(mut self, bytes: u64) -> Self {
        set(&mut self.entries, sys::IVF_PARAM_DEVICE_BUDGET, int(bytes));
        self
    }

    /// The element type rows are stored in (default [`StorageType::F32`]); see
    /// [`StorageType`]. Also read by [`Index::load`](crate::Index::load) and
    /// [`Index::deserialize`](crate::Index::deserialize): a file of `f32` rows is converted
    /// (a file already compact keeps its type).
    pub fn storage_type(mut self, storage: StorageType) -> Self {
        set(
            &mut self.entries,
            sys::IVF_PARAM_STORAGE_TYPE,
            Some(storage.raw().into()),
        );
        self
    }

    /// One index over `parts` parts (>= 1; default 1): CUDA parts on devices
    /// [`device`](IndexParams::device), +1, ... (wrapping round the usable devices) unless
    /// [`shard_device`](IndexParams::shard_device) places them, or CPU parts, behind the same
    /// handle and calls. Device memory lives on the first part's device. Also read by `load`
    /// and `deserialize`: a file opens on any number of parts.
    pub fn shards(mut self, parts: usize) -> Self {
        set(&mut self.entries, sys::IVF_PARAM_SHARDS, int(parts));
        self
    }

    /// Places part `part` of [`shards`](IndexParams::shards) on CUDA device `device` (a
    /// device may hold several parts); unset parts follow [`device`](IndexParams::device),
    /// +1, ... A part beyond 1023 is refused as an unknown key (`Unsupported`) when the
    /// parameters are used.
    pub fn shard_device(mut self, part: usize, device: u32) -> Self {
        // IVF_PARAM_SHARD_DEVICE(part) is a function-like macro: its base, as the header has it.
        let key = 4096 + part.min(1024) as sys::ivf_param_key;
        set(&mut self.entries, key, Some(device.into()));
        self
    }

    /// How the parts of [`shards`](IndexParams::shards) hold the rows (default
    /// [`ShardMode::SPLIT`]); also read by `load` and `deserialize`.
    pub fn shard_mode(mut self, mode: ShardMode) -> Self {
        set(
            &mut self.entries,
            sys::IVF_PARAM_SHARD_MODE,
            Some(mode.raw().into()),
        );
        self
    }

    /// Dynamic batching (default false): concurrent searches of at most 64 queries with the
    /// same k, nprobe and filter, arriving within [`SearchParams::batch_window`] of each
    /// other, run as one search; each caller gets its own rows, as it would alone.
    /// [`Index::merged_searches`](crate::Index::merged_searches) counts them. Also read by
    /// `load` and `deserialize` (it is not saved in files).
    pub fn dynamic_batching(mut self, on: bool) -> Self {
        set(
            &mut self.entries,
            sys::IVF_PARAM_DYNAMIC_BATCHING,
            Some(i64::from(on)),
        );
        self
    }

    pub(crate) fn to_raw(&self) -> Result<Option<RawParams>> {
        RawParams::from_entries(&self.entries)
    }
}

/// Search parameters, given to [`Index::search_with`](crate::Index::search_with) and
/// [`Index::search_into_with`](crate::Index::search_into_with). Queries and results are
/// always host memory in this API. The lifetime is that of the [`Filter`] the parameters
/// borrow, if any: it cannot be dropped while they exist.
#[derive(Debug, Clone, Default)]
pub struct SearchParams<'a> {
    entries: Vec<Entry>,
    filter: Option<&'a Filter>,
}

impl<'a> SearchParams<'a> {
    /// The index's defaults.
    pub fn new() -> SearchParams<'a> {
        SearchParams::default()
    }
    /// Lists probed per query (>= 1, clamped to nlist). nprobe = nlist is an exact search.
    pub fn nprobe(mut self, nprobe: usize) -> Self {
        set(&mut self.entries, sys::IVF_PARAM_NPROBE, int(nprobe));
        self
    }
    /// Dynamic batching ([`IndexParams::dynamic_batching`]): how long the first search of a
    /// batch waits for others (default 100 µs; zero never merges this call; microsecond
    /// resolution, at most 10 s). Ignored by an index built without dynamic batching.
    pub fn batch_window(mut self, window: Duration) -> Self {
        set(
            &mut self.entries,
            sys::IVF_PARAM_BATCH_WINDOW_US,
            int(window.as_micros()),
        );
        self
    }
    /// Restricts the search to the vectors `filter` permits (replacing an earlier filter).
    pub fn filter(mut self, filter: &'a Filter) -> Self {
        self.filter = Some(filter);
        self
    }

    pub(crate) fn to_raw(&self) -> Result<Option<RawParams>> {
        match self.filter {
            None => RawParams::build(&self.entries, &[]),
            Some(filter) => RawParams::build(
                &self.entries,
                // The library only reads the filter; the C key takes a non-const pointer.
                &[(sys::IVF_PARAM_FILTER, filter.as_raw() as *mut c_void)],
            ),
        }
    }
}

/// Equal when the same keys are set and the same filter (by identity) is borrowed.
impl PartialEq for SearchParams<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.entries == other.entries
            && match (self.filter, other.filter) {
                (None, None) => true,
                (Some(a), Some(b)) => core::ptr::eq(a, b),
                _ => false,
            }
    }
}

impl Eq for SearchParams<'_> {}

/// An owned C parameter object, alive for one call.
pub(crate) struct RawParams(NonNull<sys::ivf_params>);

/// A pointer key and its value (`IVF_PARAM_CUDA_STREAM`, `IVF_PARAM_FILTER`). The library
/// does not own the pointer.
pub(crate) type PtrEntry = (sys::ivf_param_key, *mut c_void);

impl RawParams {
    /// `None` (C: NULL, all defaults) when nothing was set.
    fn from_entries(entries: &[Entry]) -> Result<Option<RawParams>> {
        RawParams::build(entries, &[])
    }

    /// Integer keys and pointer keys; `None` (C: NULL) when there are none.
    pub(crate) fn build(entries: &[Entry], ptrs: &[PtrEntry]) -> Result<Option<RawParams>> {
        if entries.is_empty() && ptrs.is_empty() {
            return Ok(None);
        }
        let params = RawParams::empty()?;
        for &(key, value) in entries {
            let value = value.ok_or_else(|| {
                Error::invalid_argument(format!("parameter {key}: value does not fit in int64"))
            })?;
            check(unsafe { sys::ivf_params_set_int(params.0.as_ptr(), key, value) })?;
        }
        for &(key, value) in ptrs {
            check(unsafe { sys::ivf_params_set_ptr(params.0.as_ptr(), key, value) })?;
        }
        Ok(Some(params))
    }

    /// Parameters of a call whose input is CUDA device memory, waiting for `stream` (a
    /// `cudaStream_t`; NULL: none) before reading it.
    pub(crate) fn device(stream: *mut c_void) -> Result<Option<RawParams>> {
        let memory = [(
            sys::IVF_PARAM_MEMORY_KIND,
            Some(i64::from(sys::IVF_MEMORY_DEVICE)),
        )];
        if stream.is_null() {
            RawParams::build(&memory, &[])
        } else {
            RawParams::build(&memory, &[(sys::IVF_PARAM_CUDA_STREAM, stream)])
        }
    }

    /// A parameter object holding every default (to be given a progress callback).
    pub(crate) fn empty() -> Result<RawParams> {
        let mut ptr = core::ptr::null_mut();
        check(unsafe { sys::ivf_params_create(&mut ptr) })?;
        Ok(RawParams(
            NonNull::new(ptr).expect("ivf_params_create returned IVF_OK and NULL"),
        ))
    }

    pub(crate) fn as_mut_ptr(&self) -> *mut sys::ivf_params {
        self.0.as_ptr()
    }

    pub(crate) fn ptr(this: &Option<RawParams>) -> *const sys::ivf_params {
        this.as_ref().map_or(core::ptr::null(), |p| p.0.as_ptr())
    }
}

impl Drop for RawParams {
    fn drop(&mut self) {
        unsafe { sys::ivf_params_free(self.0.as_ptr()) }
    }
}
