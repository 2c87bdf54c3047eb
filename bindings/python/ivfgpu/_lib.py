"""ctypes declarations of the whole C ABI (capi/include/ivfgpu/ivfgpu.h) and the library lookup.

Every function gets its argtypes and restype here, and nowhere else. Pointers to caller buffers
travel as ``c_void_p`` (plain integers), so a numpy array's ``ctypes.data`` goes to C as is.
ctypes releases the GIL around every foreign call (``CDLL``, not ``PyDLL``).
"""
from __future__ import annotations

import ctypes
import ctypes.util
import os
import sys
import threading
from ctypes import (CFUNCTYPE, POINTER, c_char_p, c_double, c_int32, c_int64, c_size_t, c_uint32,
                    c_void_p)
from typing import List, Optional

# Status codes (ivf_status), never renumbered.
IVF_OK = 0
IVF_ERR_INVALID_ARGUMENT = -1
IVF_ERR_OUT_OF_DEVICE_MEMORY = -2
IVF_ERR_OUT_OF_HOST_MEMORY = -3
IVF_ERR_CUDA = -4
IVF_ERR_UNSUPPORTED = -5
IVF_ERR_INVALID_STATE = -6
IVF_ERR_BUFFER_TOO_SMALL = -7
IVF_ERR_IO = -8
IVF_ERR_CORRUPT_DATA = -9
IVF_ERR_VERSION_MISMATCH = -10
IVF_ERR_DEVICE_LOST = -11
IVF_ERR_INTERNAL = -12
IVF_ERR_CANCELLED = -13

IVF_METRIC_L2 = 0
IVF_METRIC_INNER_PRODUCT = 1
IVF_METRIC_COSINE = 2

IVF_DTYPE_F32 = 0
IVF_DTYPE_F16 = 1
IVF_DTYPE_U8 = 2
IVF_DTYPE_I8 = 3
IVF_DTYPE_BF16 = 4

IVF_BACKEND_AUTO = 0
IVF_BACKEND_CPU = 1
IVF_BACKEND_CUDA = 2

IVF_MEMORY_HOST = 0
IVF_MEMORY_DEVICE = 1

IVF_PARAM_NLIST = 1
IVF_PARAM_METRIC = 2
IVF_PARAM_BACKEND = 3
IVF_PARAM_DEVICE = 4
IVF_PARAM_KMEANS_ITERS = 5
IVF_PARAM_MAX_POINTS_PER_CENTROID = 6
IVF_PARAM_SEED = 7
IVF_PARAM_NUM_THREADS = 8
IVF_PARAM_UNIQUE_IDS = 9
IVF_PARAM_DEVICE_BUDGET = 10
IVF_PARAM_DYNAMIC_BATCHING = 11
IVF_PARAM_SHARDS = 12
IVF_PARAM_SHARD_MODE = 13
IVF_PARAM_STORAGE_TYPE = 14
IVF_PARAM_NPROBE = 32
IVF_PARAM_MEMORY_KIND = 33
IVF_PARAM_CUDA_STREAM = 34
IVF_PARAM_FILTER = 35
IVF_PARAM_BATCH_WINDOW_US = 36

IVF_SHARD_SPLIT = 0
IVF_SHARD_REPLICATE = 1

IVF_PROGRESS_TRAIN = 1
IVF_PROGRESS_ADD = 2
IVF_PROGRESS_LOAD = 3
IVF_PROGRESS_SEARCH = 4

IVF_FILTER_ALLOW = 0
IVF_FILTER_DENY = 1

IVF_INFO_DIM = 1
IVF_INFO_NLIST = 2
IVF_INFO_METRIC = 3
IVF_INFO_BACKEND = 4
IVF_INFO_DEVICE = 5
IVF_INFO_NTOTAL = 6
IVF_INFO_IS_TRAINED = 7
IVF_INFO_NPROBE = 8
IVF_INFO_DEVICE_MEMORY_BYTES = 9
IVF_INFO_HOST_MEMORY_BYTES = 10
IVF_INFO_STATE_VERSION = 11
IVF_INFO_POOL_BYTES = 12
IVF_INFO_UNIQUE_IDS = 13
IVF_INFO_REMOVED_ROWS = 14
IVF_INFO_ID_MAP_BYTES = 15
IVF_INFO_DEVICE_BUDGET = 16
IVF_INFO_RESIDENT_LISTS = 17
IVF_INFO_RESIDENT_BYTES = 18
IVF_INFO_HOST_TIER_BYTES = 19
IVF_INFO_CACHE_HITS = 20
IVF_INFO_CACHE_MISSES = 21
IVF_INFO_STREAMED_BYTES = 22
IVF_INFO_MERGED_SEARCHES = 23
IVF_INFO_SHARDS = 24
IVF_INFO_LIVE_SHARDS = 25
IVF_INFO_STORAGE_TYPE = 26
IVF_INFO_GRAPH_SEARCHES = 27
IVF_INFO_MERGE_NANOSECONDS = 28
IVF_INFO_PEER_MERGE = 29
IVF_INFO_FUSED_SEARCHES = 30
# IVF_INFO_PART_DEVICE(part) and IVF_INFO_PART_DEVICE_MEMORY_BYTES(part): these bases + part
# (and IVF_PARAM_SHARD_DEVICE(part) below)
IVF_INFO_PART_DEVICE_BASE = 4096
IVF_INFO_PART_DEVICE_MEMORY_BYTES_BASE = 8192
IVF_PARAM_SHARD_DEVICE_BASE = 4096

ABI_VERSION = 1

_ptr = c_void_p   # every handle and buffer: an integer address or None
_pp = POINTER(c_void_p)
_i64p = POINTER(c_int64)

# ivf_progress_fn: int32_t (*)(ivf_progress_stage stage, double fraction, void* user)
PROGRESS_FN = CFUNCTYPE(c_int32, c_int32, c_double, c_void_p)

# name: (restype, argtypes)
SIGNATURES = {
    "ivf_version": (c_char_p, []),
    "ivf_abi_version": (c_uint32, []),
    "ivf_status_string": (c_char_p, [c_int32]),
    "ivf_last_error_message": (c_char_p, []),
    "ivf_params_create": (c_int32, [_pp]),
    "ivf_params_free": (None, [_ptr]),
    "ivf_params_set_int": (c_int32, [_ptr, c_int32, c_int64]),
    "ivf_params_get_int": (c_int32, [_ptr, c_int32, _i64p]),
    "ivf_params_set_ptr": (c_int32, [_ptr, c_int32, _ptr]),
    "ivf_params_set_progress": (c_int32, [_ptr, PROGRESS_FN, _ptr]),
    "ivf_param_bounds": (c_int32, [c_int32, _i64p, _i64p]),
    "ivf_create": (c_int32, [_pp, c_int64, _ptr]),
    "ivf_free": (None, [_ptr]),
    "ivf_train": (c_int32, [_ptr, _ptr, c_int32, c_int64, c_int64]),
    "ivf_add": (c_int32, [_ptr, _ptr, c_int32, c_int64, c_int64, _ptr]),
    "ivf_reset": (c_int32, [_ptr]),
    "ivf_train_ex": (c_int32, [_ptr, _ptr, _ptr, c_int32, c_int64, c_int64]),
    "ivf_add_ex": (c_int32, [_ptr, _ptr, _ptr, c_int32, c_int64, c_int64, _ptr]),
    "ivf_search": (c_int32, [_ptr, _ptr, _ptr, c_int32, c_int64, c_int64, c_int64, _ptr, _ptr]),
    "ivf_ntotal": (c_int32, [_ptr, _i64p]),
    "ivf_remove": (c_int32, [_ptr, _ptr, _ptr, c_int64, _i64p]),
    "ivf_update": (c_int32, [_ptr, _ptr, _ptr, c_int32, c_int64, c_int64, _ptr]),
    "ivf_get": (c_int32, [_ptr, _ptr, _ptr, c_int64, _ptr, c_int32, c_int64, _ptr]),
    "ivf_count_ids": (c_int32, [_ptr, _ptr, c_int64, _ptr]),
    "ivf_filter_create": (c_int32, [_pp, _ptr, c_int64, c_int32]),
    "ivf_filter_free": (None, [_ptr]),
    "ivf_filter_bytes": (c_int32, [_ptr, _i64p, _i64p]),
    "ivf_index_info": (c_int32, [_ptr, c_int32, _i64p]),
    "ivf_cuda_device_count": (c_int32, [POINTER(c_int32)]),
    "ivf_save": (c_int32, [_ptr, c_char_p]),
    "ivf_load": (c_int32, [c_char_p, _ptr, _pp]),
    "ivf_serialize": (c_int32, [_ptr, _ptr, c_size_t, POINTER(c_size_t)]),
    "ivf_deserialize": (c_int32, [_ptr, c_size_t, _ptr, _pp]),
    "ivf_save_faiss": (c_int32, [_ptr, c_char_p]),
    "ivf_get_api": (c_void_p, [c_uint32]),
    "ivf_host_alloc": (c_int32, [c_size_t, _pp]),
    "ivf_host_free": (c_int32, [_ptr]),
    "ivf_host_register": (c_int32, [_ptr, c_size_t]),
    "ivf_host_unregister": (c_int32, [_ptr]),
}

_SONAMES = ("libivfgpu.so.1", "libivfgpu.so")


def _candidates() -> List[str]:
    """Where to look, in order: the environment, the prefix recorded at install time, the
    Python prefix, then the loader's own search path."""
    out: List[str] = []
    env_file = os.environ.get("IVFGPU_LIBRARY")
    if env_file:
        out.append(env_file)
    env_dir = os.environ.get("IVFGPU_LIB_DIR")
    if env_dir:
        out.extend(os.path.join(env_dir, s) for s in _SONAMES)
    try:
        from . import _install_config  # written by setup.py at install time

        recorded = getattr(_install_config, "LIB_DIR", "")
    except ImportError:
        recorded = ""
    if recorded:
        out.extend(os.path.join(recorded, s) for s in _SONAMES)
    for d in (os.path.join(sys.prefix, "lib"), os.path.join(sys.prefix, "lib64")):
        out.extend(os.path.join(d, s) for s in _SONAMES)
    found = ctypes.util.find_library("ivfgpu")
    if found:
        out.append(found)
    out.append("libivfgpu.so.1")  # the dynamic loader's path (LD_LIBRARY_PATH, ld.so.cache)
    return out


class LibraryNotFoundError(OSError):
    """libivfgpu.so could not be loaded from any of the places listed in the message."""


_lock = threading.Lock()
_lib: Optional[ctypes.CDLL] = None
_path: Optional[str] = None


def _declare(lib: ctypes.CDLL) -> None:
    for name, (restype, argtypes) in SIGNATURES.items():
        fn = getattr(lib, name)
        fn.restype = restype
        fn.argtypes = argtypes


def load() -> ctypes.CDLL:
    """The loaded library (loaded once per process, on first use)."""
    global _lib, _path
    if _lib is not None:
        return _lib
    with _lock:
        if _lib is not None:
            return _lib
        tried: List[str] = []
        explicit = bool(os.environ.get("IVFGPU_LIBRARY") or os.environ.get("IVFGPU_LIB_DIR"))
        for cand in _candidates():
            is_path = os.sep in cand
            if is_path and not os.path.exists(cand):
                tried.append(f"{cand} (no such file)")
                continue
            try:
                lib = ctypes.CDLL(cand)
            except OSError as e:
                tried.append(f"{cand} ({e})")
                continue
            try:
                _declare(lib)
            except AttributeError as e:
                tried.append(f"{cand} (not libivfgpu ABI {ABI_VERSION}: {e})")
                continue
            abi = lib.ivf_abi_version()
            if abi != ABI_VERSION:
                tried.append(f"{cand} (ABI version {abi}, this package needs {ABI_VERSION})")
                continue
            _lib, _path = lib, cand
            return lib
        hint = "" if explicit else (
            " Set IVFGPU_LIBRARY to the file libivfgpu.so or IVFGPU_LIB_DIR to its directory.")
        raise LibraryNotFoundError(
            "libivfgpu could not be loaded; tried, in order:\n  " + "\n  ".join(tried) + "\n" + hint)


def library_path() -> str:
    """The file name or path libivfgpu was loaded from (loads it if needed)."""
    load()
    assert _path is not None
    return _path
