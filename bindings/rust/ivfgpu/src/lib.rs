//! Safe Rust API for libivfgpu: IVF-Flat approximate nearest-neighbour search on the GPU
//! (CUDA), with a CPU reference backend.
//!
//! ```
//! use ivfgpu::{Backend, Index, IndexParams};
//!
//! let dim = 8;
//! // 1,000 pseudo-random vectors.
//! let mut state = 42u64;
//! let data: Vec<f32> = (0..1000 * dim)
//!     .map(|_| {
//!         state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
//!         (state >> 40) as f32 / (1u64 << 24) as f32
//!     })
//!     .collect();
//!
//! let index = Index::new(dim, &IndexParams::new().nlist(16).backend(Backend::CPU))?;
//! index.train(&data)?;
//! index.add(&data)?;
//!
//! // The first two vectors as queries: each finds itself first, at distance 0.
//! let result = index.search(&data[..2 * dim], 5)?;
//! for (i, (ids, distances)) in result.rows().enumerate() {
//!     assert_eq!(ids[0], i as i64);
//!     assert_eq!(distances[0], 0.0);
//! }
//! # Ok::<(), ivfgpu::Error>(())
//! ```
//!
//! * Errors: every call returns [`Result`]; an [`Error`] has a [`kind`](Error::kind)
//!   ([`ErrorKind`], non-exhaustive), the C status [`code`](Error::code) and the library's
//!   [`message`](Error::message), copied right after the failing call.
//! * Threads: [`Index`] is `Send` and `Sync`; searches and queries take `&self` and may run
//!   concurrently from many threads; so do train/add/reset, which never block searches
//!   (the library publishes each mutation as a new immutable state), so an `Arc<Index>` can
//!   ingest while it serves.
//! * Storage types, parts, batching: [`IndexParams::storage_type`] stores rows as f16, bf16,
//!   u8 or i8 (the `_typed` methods take rows of an [`Element`] type: `u8`, `i8`, [`F16`],
//!   [`Bf16`] bits, or `f32`); [`IndexParams::shards`] builds one index over several parts;
//!   [`IndexParams::dynamic_batching`] merges concurrent small searches.
//! * Progress and cancellation: [`Index::with_progress`] (train, add, search) and
//!   [`Index::load_with_progress`] / [`Index::deserialize_with_progress`] take a closure
//!   `FnMut(Stage, f64) -> ControlFlow<()>`; `Break` cancels with
//!   [`ErrorKind::Cancelled`] and leaves the index unchanged.
//! * Page-locked buffers: [`HostBuffer`] (allocated by the library) and [`HostRegistration`]
//!   (a slice locked in place) hold queries and results that a CUDA index copies at the bus's
//!   rate instead of the host's memcpy rate; they deref to slices.
//! * Linking: the `ivfgpu-sys` build script finds `libivfgpu.so` through `IVFGPU_LIB_DIR` or
//!   `pkg-config`; at run time the dynamic loader must find it too (install it, or set
//!   `LD_LIBRARY_PATH`).
#![warn(missing_docs)]

mod element;
mod error;
mod filter;
mod host_memory;
mod index;
mod params;
mod progress;

pub use element::{Bf16, Element, F16};
pub use error::{status_string, Error, ErrorKind, Result};
pub use filter::{Filter, FilterMode};
pub use host_memory::{HostBuffer, HostPod, HostRegistration};
pub use index::{Index, SearchResult, StoredVectors, WithProgress, NO_ID};
pub use params::{Backend, IndexParams, Metric, SearchParams, ShardMode, StorageType};
pub use progress::Stage;

/// The raw bindings, for calls this crate does not wrap.
pub use ivfgpu_sys as sys;

/// Version of the loaded library, "MAJOR.MINOR.PATCH".
pub fn version() -> &'static str {
    // SAFETY: static storage, never NULL.
    unsafe { core::ffi::CStr::from_ptr(sys::ivf_version()) }
        .to_str()
        .unwrap_or("")
}

/// ABI version of the loaded library; equals [`ABI_VERSION`] for a matching library.
pub fn abi_version() -> u32 {
    unsafe { sys::ivf_abi_version() }
}

/// The ABI version these bindings were generated for.
pub const ABI_VERSION: u32 = sys::IVF_ABI_VERSION as u32;

/// Number of usable CUDA devices (0 when the library was built without CUDA).
pub fn cuda_device_count() -> Result<usize> {
    let mut count = 0;
    error::check(unsafe { sys::ivf_cuda_device_count(&mut count) })?;
    Ok(count as usize)
}
