"""ivfgpu: IVF-Flat vector search on the GPU (libivfgpu), from Python.

A pure-Python package over the C ABI of ``libivfgpu.so`` (ctypes, no compiled extension).
The library is found through ``$IVFGPU_LIBRARY`` (the file) or ``$IVFGPU_LIB_DIR`` (its
directory), then the prefix recorded when this package was installed, then the Python prefix's
``lib/``, then the dynamic loader's path; ``library_path()`` says which one was used.

    >>> import numpy as np, ivfgpu
    >>> index = ivfgpu.Index(64, nlist=16, backend="cpu")
    >>> x = np.random.default_rng(0).random((1000, 64), dtype=np.float32)
    >>> index.train(x); index.add(x)
    >>> distances, ids = index.search(x[:2], 3)

Long calls (train, add, search, load, deserialize) take ``progress=``, a callable
``progress(stage, fraction)`` that returns False to cancel (``CancelledError``); Ctrl-C
cancels them too (KeyboardInterrupt), leaving the index unchanged.
"""
from __future__ import annotations

from ctypes import byref, c_int32

from . import _lib
from ._errors import (BufferTooSmallError, CancelledError, CorruptDataError, CudaError,
                      DeviceLostError, InternalError, InvalidArgumentError, InvalidStateError,
                      IOError_, IvfError, IvfIOError, OutOfDeviceMemoryError, OutOfHostMemoryError,
                      UnsupportedError, VersionMismatchError, check as _check)
from ._host_memory import host_empty, host_registered
from ._index import Backend, Filter, Index, Metric, SearchResult, StorageType
from ._progress import Stage
from ._lib import LibraryNotFoundError

__version__ = "0.2.0"

METRIC_L2 = Metric.L2
METRIC_INNER_PRODUCT = Metric.INNER_PRODUCT
METRIC_COSINE = Metric.COSINE
BACKEND_AUTO = Backend.AUTO
BACKEND_CPU = Backend.CPU
BACKEND_CUDA = Backend.CUDA
# Storage types (Index(storage=...)): also "f32", "f16", "bf16", "uint8", "int8" or numpy dtypes.
STORAGE_F32 = StorageType.F32
STORAGE_F16 = StorageType.F16
STORAGE_BF16 = StorageType.BF16
STORAGE_UINT8 = StorageType.UINT8
STORAGE_INT8 = StorageType.INT8
# Index(shard_mode=...): also "split" or "replicate".
SHARD_SPLIT = _lib.IVF_SHARD_SPLIT
SHARD_REPLICATE = _lib.IVF_SHARD_REPLICATE

# Keys of Index.info().
INFO_DIM = _lib.IVF_INFO_DIM
INFO_NLIST = _lib.IVF_INFO_NLIST
INFO_METRIC = _lib.IVF_INFO_METRIC
INFO_BACKEND = _lib.IVF_INFO_BACKEND
INFO_DEVICE = _lib.IVF_INFO_DEVICE
INFO_NTOTAL = _lib.IVF_INFO_NTOTAL
INFO_IS_TRAINED = _lib.IVF_INFO_IS_TRAINED
INFO_NPROBE = _lib.IVF_INFO_NPROBE
INFO_DEVICE_MEMORY_BYTES = _lib.IVF_INFO_DEVICE_MEMORY_BYTES
INFO_HOST_MEMORY_BYTES = _lib.IVF_INFO_HOST_MEMORY_BYTES
INFO_STATE_VERSION = _lib.IVF_INFO_STATE_VERSION
INFO_POOL_BYTES = _lib.IVF_INFO_POOL_BYTES
INFO_UNIQUE_IDS = _lib.IVF_INFO_UNIQUE_IDS
INFO_REMOVED_ROWS = _lib.IVF_INFO_REMOVED_ROWS
INFO_ID_MAP_BYTES = _lib.IVF_INFO_ID_MAP_BYTES
# The host tier (Index(device_budget=...)); 0 for an index without a budget.
INFO_DEVICE_BUDGET = _lib.IVF_INFO_DEVICE_BUDGET
INFO_RESIDENT_LISTS = _lib.IVF_INFO_RESIDENT_LISTS
INFO_RESIDENT_BYTES = _lib.IVF_INFO_RESIDENT_BYTES
INFO_HOST_TIER_BYTES = _lib.IVF_INFO_HOST_TIER_BYTES
INFO_CACHE_HITS = _lib.IVF_INFO_CACHE_HITS
INFO_CACHE_MISSES = _lib.IVF_INFO_CACHE_MISSES
INFO_STREAMED_BYTES = _lib.IVF_INFO_STREAMED_BYTES
# Dynamic batching, several parts, storage type (also Index.merged_searches, .shards,
# .live_shards, .storage).
INFO_MERGED_SEARCHES = _lib.IVF_INFO_MERGED_SEARCHES
INFO_SHARDS = _lib.IVF_INFO_SHARDS
INFO_LIVE_SHARDS = _lib.IVF_INFO_LIVE_SHARDS
INFO_STORAGE_TYPE = _lib.IVF_INFO_STORAGE_TYPE
INFO_GRAPH_SEARCHES = _lib.IVF_INFO_GRAPH_SEARCHES
INFO_MERGE_NANOSECONDS = _lib.IVF_INFO_MERGE_NANOSECONDS
INFO_PEER_MERGE = _lib.IVF_INFO_PEER_MERGE
INFO_FUSED_SEARCHES = _lib.IVF_INFO_FUSED_SEARCHES


def library_path() -> str:
    """Where libivfgpu was loaded from (loading it if needed; LibraryNotFoundError lists every
    place tried when none works)."""
    return _lib.library_path()


def version() -> str:
    """The loaded library's version, "MAJOR.MINOR.PATCH"."""
    return _lib.load().ivf_version().decode()


def abi_version() -> int:
    """The loaded library's ABI version (1)."""
    return int(_lib.load().ivf_abi_version())


def cuda_device_count() -> int:
    """Usable CUDA devices (0 when the library was built without CUDA or none is usable)."""
    n = c_int32()
    _check(_lib.load().ivf_cuda_device_count(byref(n)), "ivf_cuda_device_count")
    return n.value


__all__ = [
    "Index", "Filter", "SearchResult", "Metric", "Backend", "StorageType", "IvfError", "InvalidArgumentError",
    "OutOfDeviceMemoryError", "OutOfHostMemoryError", "CudaError", "UnsupportedError",
    "InvalidStateError", "BufferTooSmallError", "IvfIOError", "IOError_", "CorruptDataError",
    "VersionMismatchError", "DeviceLostError", "InternalError", "CancelledError", "Stage",
    "LibraryNotFoundError",
    "METRIC_L2", "METRIC_INNER_PRODUCT", "METRIC_COSINE", "BACKEND_AUTO", "BACKEND_CPU",
    "BACKEND_CUDA", "STORAGE_F32", "STORAGE_F16", "STORAGE_BF16", "STORAGE_UINT8",
    "STORAGE_INT8", "SHARD_SPLIT", "SHARD_REPLICATE", "library_path", "version", "abi_version", "cuda_device_count",
    "host_empty", "host_registered",
]
