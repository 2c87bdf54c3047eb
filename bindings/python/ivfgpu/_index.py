"""Index and Filter: the Python face of ivf_index and ivf_filter."""
from __future__ import annotations

import ctypes
import os
import threading
from contextlib import contextmanager
from ctypes import byref, c_int32, c_int64, c_size_t, c_void_p
from enum import IntEnum
from typing import Any, Callable, Iterator, NamedTuple, Optional, Sequence, Tuple, Union

import numpy as np

from . import _arrays
from . import _lib
from ._errors import InvalidStateError, UnsupportedError, check
from ._progress import ProgressCall, ProgressCallable


class Metric(IntEnum):
    """ivf_metric. Compares equal to its int value and to its short name ("l2", "ip", "cosine")."""
    L2 = _lib.IVF_METRIC_L2
    INNER_PRODUCT = _lib.IVF_METRIC_INNER_PRODUCT
    COSINE = _lib.IVF_METRIC_COSINE

    @property
    def label(self) -> str:
        return ("l2", "ip", "cosine")[int(self)]

    def __eq__(self, other: object) -> bool:
        if isinstance(other, str):
            return _METRIC_NAMES.get(other.lower()) == int(self)
        return int(self) == other

    __hash__ = IntEnum.__hash__

    def __str__(self) -> str:
        return self.label


class Backend(IntEnum):
    """ivf_backend. Compares equal to its int value and to its name ("auto", "cpu", "cuda")."""
    AUTO = _lib.IVF_BACKEND_AUTO
    CPU = _lib.IVF_BACKEND_CPU
    CUDA = _lib.IVF_BACKEND_CUDA

    @property
    def label(self) -> str:
        return ("auto", "cpu", "cuda")[int(self)]

    def __eq__(self, other: object) -> bool:
        if isinstance(other, str):
            return _BACKEND_NAMES.get(other.lower()) == int(self)
        return int(self) == other

    __hash__ = IntEnum.__hash__

    def __str__(self) -> str:
        return self.label


class StorageType(IntEnum):
    """ivf_dtype: the element type an index stores its rows in (``Index(storage=...)``), and the
    type of data passed to it. Compares equal to its int value and to its names ("f32",
    "float32", "f16", "float16", "bf16", "bfloat16", "uint8", "int8")."""
    F32 = _lib.IVF_DTYPE_F32
    F16 = _lib.IVF_DTYPE_F16
    UINT8 = _lib.IVF_DTYPE_U8
    INT8 = _lib.IVF_DTYPE_I8
    BF16 = _lib.IVF_DTYPE_BF16

    @property
    def label(self) -> str:
        return ("f32", "f16", "uint8", "int8", "bf16")[int(self)]

    @property
    def numpy_dtype(self) -> np.dtype:
        """The numpy dtype of arrays of this type. bf16 has none in numpy: its arrays are uint16
        holding the bfloat16 bit patterns (the upper half of a float32)."""
        return np.dtype((np.float32, np.float16, np.uint8, np.int8, np.uint16)[int(self)])

    @classmethod
    def of(cls, value: Any) -> "StorageType":
        """A name ("f32", "float16", "bf16", "uint8", ...), a numpy dtype (float32, float16,
        uint8, int8; a dtype named "bfloat16", e.g. ml_dtypes') or an int."""
        return cls(_storage_value(value))

    def __eq__(self, other: object) -> bool:
        if isinstance(other, (str, np.dtype, type)):  # a name or a numpy dtype
            try:
                return _storage_value(other) == int(self)
            except (TypeError, ValueError):
                return False
        return int(self) == other

    __hash__ = IntEnum.__hash__

    def __str__(self) -> str:
        return self.label


_METRIC_NAMES = {"l2": 0, "inner_product": 1, "ip": 1, "cosine": 2}
_BACKEND_NAMES = {"auto": 0, "cpu": 1, "cuda": 2, "gpu": 2}
_SHARD_MODE_NAMES = {"split": _lib.IVF_SHARD_SPLIT, "replicate": _lib.IVF_SHARD_REPLICATE}
# Not numpy's one-letter codes: np.dtype("f16") is float128 and "u8" is uint64.
_STORAGE_NAMES = {"f32": 0, "float32": 0, "fp32": 0, "f16": 1, "float16": 1, "fp16": 1,
                  "half": 1, "uint8": 2, "int8": 3, "bf16": 4, "bfloat16": 4}
# numpy dtypes that are an ivf_dtype (bf16: ml_dtypes' bfloat16, matched by name)
_NUMPY_STORAGE = {np.dtype(np.float32): 0, np.dtype(np.float16): 1, np.dtype(np.uint8): 2,
                  np.dtype(np.int8): 3}

MetricLike = Union[str, int]
BackendLike = Union[str, int]
StorageLike = Union[str, int, Any]  # a name, a numpy dtype or an ivf_dtype value


def _enum_value(value: Any, names: dict, what: str) -> int:
    if isinstance(value, str):
        try:
            return names[value.lower()]
        except KeyError:
            raise ValueError(f"{what}: unknown name {value!r} (one of {sorted(names)})") from None
    return int(value)


def _numpy_storage(dt: np.dtype) -> Optional[int]:
    """The ivf_dtype of a numpy dtype, None when it is none."""
    if dt.name == "bfloat16" and dt.itemsize == 2:  # ml_dtypes / JAX
        return _lib.IVF_DTYPE_BF16
    return _NUMPY_STORAGE.get(dt)


def _storage_value(value: Any, what: str = "storage") -> int:
    """An ivf_dtype from a name, a numpy dtype (or type) or an int."""
    if isinstance(value, str):
        return _enum_value(value, _STORAGE_NAMES, what)
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        return int(value)
    try:
        dt = np.dtype(value)
    except TypeError:
        raise TypeError(f"{what}: expected a name, a numpy dtype or an int, got {value!r}") from None
    code = _numpy_storage(dt)
    if code is None:
        raise ValueError(f"{what}: numpy dtype {dt.name} is no storage type (float32, float16, "
                         "uint8, int8; bf16 by name)")
    return code


class SearchResult(NamedTuple):
    """Result of Index.search, row-major (n, k), best first. Unpacks like FAISS:
    ``distances, ids = index.search(q, k)``. Padding: id -1, distance +inf (L2) or -inf."""
    distances: Any
    ids: Any


class _Handle:
    """An owned C handle with an idempotent, locked close: close waits for the calls in flight
    (ivf_free must not race with any other call on the handle) and later calls fail cleanly."""

    def __init__(self, ptr: int, free: Callable[[int], None], kind: str) -> None:
        self._ptr: Optional[int] = ptr
        self._free = free
        self._kind = kind
        self._cv = threading.Condition(threading.Lock())
        self._users = 0

    @contextmanager
    def use(self, function: str) -> Iterator[int]:
        with self._cv:
            if self._ptr is None:
                raise InvalidStateError(_lib.IVF_ERR_INVALID_STATE, f"the {self._kind} is closed",
                                        function)
            self._users += 1
            ptr = self._ptr
        try:
            yield ptr
        finally:
            with self._cv:
                self._users -= 1
                if self._users == 0:
                    self._cv.notify_all()

    @property
    def closed(self) -> bool:
        return self._ptr is None

    def close(self) -> None:
        with self._cv:
            while self._users:
                self._cv.wait()
            ptr, self._ptr = self._ptr, None
        if ptr is not None:
            self._free(ptr)

    def __del__(self) -> None:  # a safety net; close() is the way
        ptr = getattr(self, "_ptr", None)
        if ptr is not None:
            try:
                self._free(ptr)
            except Exception:
                pass


class _Params:
    """A short-lived ivf_params."""

    def __init__(self, lib: ctypes.CDLL) -> None:
        self._lib = lib
        p = c_void_p()
        check(lib.ivf_params_create(byref(p)), "ivf_params_create")
        self.ptr: int = p.value  # type: ignore[assignment]

    def set_int(self, key: int, value: int, name: str) -> None:
        check(self._lib.ivf_params_set_int(self.ptr, key, int(value)), f"ivf_params_set_int({name})")

    def set_ptr(self, key: int, value: Optional[int], name: str) -> None:
        check(self._lib.ivf_params_set_ptr(self.ptr, key, value), f"ivf_params_set_ptr({name})")

    def __enter__(self) -> "_Params":
        return self

    def __exit__(self, *exc: Any) -> None:
        self._lib.ivf_params_free(self.ptr)


@contextmanager
def _progress_params(lib: ctypes.CDLL, pc: ProgressCall) -> Iterator[Optional[int]]:
    """Parameters holding only the progress callback: NULL (None) when pc is inactive."""
    if not pc.active:
        yield None
        return
    with _Params(lib) as p:
        pc.attach(lib, p.ptr)
        yield p.ptr


def _set_device_budget(p: _Params, device_budget: int) -> None:
    # Set only when given: 0 is the library's default, and a library older than the key
    # (IVF_PARAM_DEVICE_BUDGET) then still works. A negative value reaches the library's check.
    if device_budget:
        p.set_int(_lib.IVF_PARAM_DEVICE_BUDGET, device_budget, "device_budget")


_MAX_SHARDS = 1024  # IVF_PARAM_SHARDS's bound (limits::kMaxShards)


def _set_parts(p: _Params, storage: Optional[StorageLike], shards: int, shard_mode: Any,
               dynamic_batching: bool, shard_devices: Optional[Sequence[int]] = None) -> None:
    # As the budget: set only when not the default, so that a library older than the keys
    # still takes an index that does not use them.
    if storage is not None:
        code = _storage_value(storage)
        if code != _lib.IVF_DTYPE_F32:
            p.set_int(_lib.IVF_PARAM_STORAGE_TYPE, code, "storage")
    if int(shards) != 1:
        p.set_int(_lib.IVF_PARAM_SHARDS, shards, "shards")
    mode = _enum_value(shard_mode, _SHARD_MODE_NAMES, "shard_mode")
    if mode != _lib.IVF_SHARD_SPLIT:
        p.set_int(_lib.IVF_PARAM_SHARD_MODE, mode, "shard_mode")
    if dynamic_batching:
        p.set_int(_lib.IVF_PARAM_DYNAMIC_BATCHING, 1, "dynamic_batching")
    if shard_devices is not None:
        devices = list(shard_devices)
        if len(devices) > _MAX_SHARDS:
            raise ValueError(f"shard_devices: {len(devices)} entries, at most {_MAX_SHARDS} parts")
        for part, dev in enumerate(devices):
            p.set_int(_lib.IVF_PARAM_SHARD_DEVICE_BASE + part, dev, f"shard_devices[{part}]")


class Filter:
    """A reusable, immutable set of ids restricting searches (``Index.search(filter=...)``).

    ``mode="allow"``: only vectors whose id is in the set may be returned; ``"deny"``: they never
    are. Shareable between threads and indexes; ``close()`` (idempotent) waits for searches using it.
    ids: any int64 values (one copy unless a C-contiguous int64 array).
    """

    def __init__(self, ids: Any, mode: Union[str, int] = "allow") -> None:
        lib = _lib.load()
        m = _enum_value(mode, {"allow": _lib.IVF_FILTER_ALLOW, "deny": _lib.IVF_FILTER_DENY},
                        "mode")
        a = _arrays.id_array(ids, None)
        out = c_void_p()
        check(lib.ivf_filter_create(byref(out), a.ctypes.data if a.size else None, a.shape[0], m),
              "ivf_filter_create")
        self.mode = "allow" if m == _lib.IVF_FILTER_ALLOW else "deny"
        self.size = int(a.shape[0])
        self._h = _Handle(out.value, lib.ivf_filter_free, "filter")  # type: ignore[arg-type]

    def _bytes(self) -> Tuple[int, int]:
        h, d = c_int64(), c_int64()
        with self._h.use("ivf_filter_bytes") as p:
            check(_lib.load().ivf_filter_bytes(p, byref(h), byref(d)), "ivf_filter_bytes")
        return h.value, d.value

    @property
    def host_bytes(self) -> int:
        """Bytes the filter holds on the host."""
        return self._bytes()[0]

    @property
    def device_bytes(self) -> int:
        """Bytes held on devices it was uploaded to (summed)."""
        return self._bytes()[1]

    def close(self) -> None:
        """Free the filter (idempotent); waits for searches using it."""
        self._h.close()

    def __enter__(self) -> "Filter":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._h.closed else f"{self.size} ids"
        return f"Filter({self.mode}, {state})"


class Index:
    """An IVF-Flat index (ivf_index).

    Every method may be called from any number of threads at once (the library publishes each
    mutation as a new immutable state; searches never wait for mutations), and the GIL is
    released during every C call. ``close()`` (idempotent; also the context manager's exit)
    waits for calls in flight, then frees the index.

    Host data: a C-contiguous float32 numpy array goes to C by its own pointer; any other dtype,
    layout or sequence is converted with one copy to float32 (ids: to int64), except arrays of
    the index's storage type (below). Device data
    (``__cuda_array_interface__`` or DLPack: CuPy, PyTorch) goes as device memory on its stream
    and needs a CUDA index; it must be C-contiguous float32 (ids int64).

    ``device_budget``: bytes of device memory a CUDA index may hold (0, the default: unlimited,
    every list on the device). With a budget every list lives in pinned host memory and the
    device holds the centroids, a staging ring, search scratch and a cache of the most-probed
    lists; a search streams the probed lists the cache does not hold. ``load`` and
    ``deserialize`` take it too, to open a saved index into host memory. A budget too small for
    the centroids plus the ring and scratch raises InvalidArgumentError (naming the minimum).
    The CPU backend accepts it and has nothing to limit. ``info(ivfgpu.INFO_RESIDENT_LISTS)``,
    ``INFO_RESIDENT_BYTES``, ``INFO_HOST_TIER_BYTES``, ``INFO_CACHE_HITS``,
    ``INFO_CACHE_MISSES`` and ``INFO_STREAMED_BYTES`` report the host tier (0 without a budget).

    ``progress=``: train, add, search, load and deserialize take a callable
    ``progress(stage, fraction)``, called on the calling thread while the call runs: at the
    start (0.0), about every 50 ms, and at the end (1.0; for a mutation, before it is
    published). ``stage`` is an ``ivfgpu.Stage`` (== "train", "add", "load" or "search").
    Return ``None`` or ``True`` to continue, ``False`` to cancel: the call then raises
    ``CancelledError`` and nothing changed (a cancelled load returns no index; a cancelled
    search's ``out=`` arrays hold unspecified values). An exception raised by the callable
    cancels the call the same way and is raised again once the call has returned. The
    callable may read the index but must not mutate or close it.

    Ctrl-C: a KeyboardInterrupt (SIGINT with Python's default handler, on the main thread)
    arriving while one of those calls runs cancels it within about 50 ms, leaving the index
    unchanged, and the call raises KeyboardInterrupt.

    ``storage``: the element type rows are stored in: "f32" (default), "f16", "bf16", "uint8",
    "int8" (or numpy float32, float16, uint8, int8; see ``StorageType``). Every backend holds
    every type; uint8 and int8 take only
    integers in range (no scaling), f16 and bf16 round to nearest even; cosine needs a floating
    type. train, add, update and search take float32 data (converted by the library) or data of
    the storage type: a numpy array whose dtype is the storage type (float16, uint8, int8) goes
    to C as that type, by its own pointer when C-contiguous (else one copy, same dtype). Arrays
    of any other dtype are converted to float32 as before (a uint8 array for an f16 index, a
    float64 array for any index). bf16 has no numpy dtype: pass ``dtype="bf16"`` with a uint16
    array of bfloat16 bit patterns (an array whose dtype is named "bfloat16", such as
    ml_dtypes', is recognised without it), or float32 data. ``get(ids, dtype=...)`` returns the
    stored type instead of float32. ``load`` and ``deserialize`` take ``storage=`` too: a file
    of f32 rows is converted on opening (a file already compact keeps its type).

    ``shards`` (>= 1) and ``shard_mode`` ("split" or "replicate"): one index over several parts
    (CUDA devices ``device``, +1, ... wrapping round the usable ones, or those ``shard_devices``
    lists, part by part, a device may repeat; or CPU parts) behind the same calls. "split"
    deals rows to the parts and merges their top-k into exactly the one-part result (on the
    first part's device); "replicate" gives every part every row and splits queries among
    them. Device memory lives on the first part's device. ``load`` and ``deserialize`` take
    them all (a file opens on any number of parts). ``shards``, ``live_shards``,
    ``part_device(p)``, ``part_device_memory_bytes(p)``, ``merge_nanoseconds`` and
    ``peer_merge`` report them.

    ``dynamic_batching=True``: concurrent searches (from threads) of at most 64 host queries
    with the same k, nprobe and filter arriving within ``batch_window_us`` (a search keyword;
    default 100 µs, 0 keeps a call alone) run as one search; each caller gets the rows it would
    get alone. ``merged_searches`` counts the calls answered in a merged batch. ``load`` and
    ``deserialize`` take it too (it is not saved in files).
    """

    def __init__(self, dim: int, *, nlist: int = 1024, metric: MetricLike = "l2",
                 backend: BackendLike = "auto", device: int = 0, nprobe: int = 8,
                 kmeans_iters: int = 10, max_points_per_centroid: int = 256, seed: int = 1234,
                 num_threads: int = 0, unique_ids: bool = False, device_budget: int = 0,
                 storage: StorageLike = "f32", shards: int = 1,
                 shard_mode: Union[str, int] = "split", dynamic_batching: bool = False,
                 shard_devices: Optional[Sequence[int]] = None) -> None:
        lib = _lib.load()
        with _Params(lib) as p:
            p.set_int(_lib.IVF_PARAM_NLIST, nlist, "nlist")
            p.set_int(_lib.IVF_PARAM_METRIC, _enum_value(metric, _METRIC_NAMES, "metric"), "metric")
            p.set_int(_lib.IVF_PARAM_BACKEND, _enum_value(backend, _BACKEND_NAMES, "backend"),
                      "backend")
            p.set_int(_lib.IVF_PARAM_DEVICE, device, "device")
            p.set_int(_lib.IVF_PARAM_NPROBE, nprobe, "nprobe")
            p.set_int(_lib.IVF_PARAM_KMEANS_ITERS, kmeans_iters, "kmeans_iters")
            p.set_int(_lib.IVF_PARAM_MAX_POINTS_PER_CENTROID, max_points_per_centroid,
                      "max_points_per_centroid")
            p.set_int(_lib.IVF_PARAM_SEED, seed, "seed")
            p.set_int(_lib.IVF_PARAM_NUM_THREADS, num_threads, "num_threads")
            p.set_int(_lib.IVF_PARAM_UNIQUE_IDS, 1 if unique_ids else 0, "unique_ids")
            _set_device_budget(p, device_budget)
            _set_parts(p, storage, shards, shard_mode, dynamic_batching, shard_devices)
            out = c_void_p()
            check(lib.ivf_create(byref(out), int(dim), p.ptr), "ivf_create")
        self._adopt(out.value, num_threads)  # type: ignore[arg-type]

    def _adopt(self, ptr: int, num_threads: int) -> None:
        self._h = _Handle(ptr, _lib.load().ivf_free, "index")
        self._num_threads = num_threads
        # Fixed for the handle's life: read once (a library older than the key stores f32).
        try:
            code = self.info(_lib.IVF_INFO_STORAGE_TYPE)
        except UnsupportedError:
            code = _lib.IVF_DTYPE_F32
        try:
            self._storage = StorageType(code)
        except ValueError:  # a type newer than this package: its rows go as float32 only
            self._storage = code  # type: ignore[assignment]

    @classmethod
    def _from_handle(cls, ptr: int, num_threads: int) -> "Index":
        self = cls.__new__(cls)
        self._adopt(ptr, num_threads)
        return self

    # --- properties -----------------------------------------------------------------------

    def info(self, key: int) -> int:
        """ivf_index_info: one property by its IVF_INFO_* key (see ``ivfgpu.INFO_*``)."""
        v = c_int64()
        with self._h.use("ivf_index_info") as h:
            check(_lib.load().ivf_index_info(h, int(key), byref(v)), "ivf_index_info")
        return v.value

    @property
    def dim(self) -> int:
        return self.info(_lib.IVF_INFO_DIM)

    @property
    def nlist(self) -> int:
        return self.info(_lib.IVF_INFO_NLIST)

    @property
    def ntotal(self) -> int:
        """Number of vectors held."""
        return self.info(_lib.IVF_INFO_NTOTAL)

    def __len__(self) -> int:
        return self.ntotal

    @property
    def metric(self) -> Metric:
        return Metric(self.info(_lib.IVF_INFO_METRIC))

    @property
    def backend(self) -> Backend:
        """The resolved backend: Backend.CPU or Backend.CUDA (== "cpu" / "cuda")."""
        return Backend(self.info(_lib.IVF_INFO_BACKEND))

    @property
    def device(self) -> int:
        """CUDA ordinal, -1 on the CPU backend."""
        return self.info(_lib.IVF_INFO_DEVICE)

    @property
    def is_trained(self) -> bool:
        return bool(self.info(_lib.IVF_INFO_IS_TRAINED))

    @property
    def nprobe(self) -> int:
        """The default nprobe of searches."""
        return self.info(_lib.IVF_INFO_NPROBE)

    @property
    def state_version(self) -> int:
        """Number of the published state (+1 per successful mutation)."""
        return self.info(_lib.IVF_INFO_STATE_VERSION)

    @property
    def unique_ids(self) -> bool:
        return bool(self.info(_lib.IVF_INFO_UNIQUE_IDS))

    @property
    def device_budget(self) -> int:
        """The device budget in bytes (``device_budget=``); 0 = unlimited, and on the CPU."""
        return self.info(_lib.IVF_INFO_DEVICE_BUDGET)

    @property
    def storage(self) -> StorageType:
        """The element type rows are stored in (``storage=``), e.g. StorageType.UINT8 (== "uint8")."""
        return self._storage

    @property
    def shards(self) -> int:
        """Parts of the index (``shards=``); 1 for a plain index."""
        return self.info(_lib.IVF_INFO_SHARDS)

    @property
    def live_shards(self) -> int:
        """Parts still serving (a replica whose device was lost no longer does)."""
        return self.info(_lib.IVF_INFO_LIVE_SHARDS)

    @property
    def merged_searches(self) -> int:
        """Searches answered inside a merged batch of two or more (``dynamic_batching=True``)."""
        return self.info(_lib.IVF_INFO_MERGED_SEARCHES)

    @property
    def graph_searches(self) -> int:
        """Searches of at most 64 queries answered by replaying a captured CUDA graph (the
        opt-in latency path, ``IVFGPU_SEARCH_GRAPH=1``); 0 on the CPU."""
        return self.info(_lib.IVF_INFO_GRAPH_SEARCHES)

    @property
    def fused_searches(self) -> int:
        """Searches of a few queries answered by the fused small-batch kernels (the default
        latency path) since creation; 0 on the CPU."""
        return self.info(_lib.IVF_INFO_FUSED_SEARCHES)

    @property
    def merge_nanoseconds(self) -> int:
        """Time split searches of an index of several parts spent after their parts returned
        (moving the parts' top-k to one device and merging them), in ns since creation; 0 for
        one part. Its share of the search time is the merge's cost."""
        return self.info(_lib.IVF_INFO_MERGE_NANOSECONDS)

    @property
    def peer_merge(self) -> bool:
        """Whether the parts' results cross devices by peer copies (NVLink or PCIe peer-to-peer);
        False through host memory, or when every part shares one device or the CPU."""
        return self.info(_lib.IVF_INFO_PEER_MERGE) != 0

    def part_device(self, part: int) -> int:
        """The CUDA device of part ``part`` (-1 on the CPU)."""
        return self.info(_lib.IVF_INFO_PART_DEVICE_BASE + _part(part))

    def part_device_memory_bytes(self, part: int) -> int:
        """Device memory of part ``part`` in bytes (as ``device_memory_bytes``)."""
        return self.info(_lib.IVF_INFO_PART_DEVICE_MEMORY_BYTES_BASE + _part(part))

    @property
    def closed(self) -> bool:
        return self._h.closed

    # --- mutations ------------------------------------------------------------------------

    def _device_params(self, lib: ctypes.CDLL, stream: Optional[int]) -> _Params:
        p = _Params(lib)
        try:
            p.set_int(_lib.IVF_PARAM_MEMORY_KIND, _lib.IVF_MEMORY_DEVICE, "memory_kind")
            if stream:
                p.set_ptr(_lib.IVF_PARAM_CUDA_STREAM, stream, "cuda_stream")
        except BaseException:
            lib.ivf_params_free(p.ptr)
            raise
        return p

    def _dev_rows(self, x: Any, what: str, stream: Optional[int]) -> _arrays.DeviceArray:
        v = _arrays.device_view(x, stream)
        if v.typestr != "<f4":
            raise TypeError(f"{what}: device arrays must be float32 ('<f4'), got {v.typestr}")
        dim = self.dim
        if len(v.shape) != 2 or v.shape[1] != dim:
            raise ValueError(f"{what}: expected shape (n, {dim}), got {v.shape}")
        return v

    def _dev_ids(self, ids: Any, n: int, stream: Optional[int]) -> _arrays.DeviceArray:
        v = _arrays.device_view(ids, stream)
        if v.typestr != "<i8" or v.shape != (n,):
            raise TypeError(f"ids: device ids must be int64 of shape ({n},), got {v.typestr} {v.shape}")
        return v

    def _host_rows(self, x: Any, what: str, dtype: Optional[StorageLike]) -> Tuple[np.ndarray, int]:
        """Host data as (C-contiguous (n, dim) array, ivf_dtype). dtype None: an array of the
        index's storage type goes as that type (no copy when C-contiguous); anything else is
        float32 (one converting copy unless already C-contiguous float32). dtype given: the
        array must already hold that type (bf16: uint16 bit patterns); only f32 converts."""
        if dtype is None:
            code = _lib.IVF_DTYPE_F32
            if isinstance(x, np.ndarray) and self._storage != StorageType.F32 \
                    and _numpy_storage(x.dtype) == int(self._storage):
                code = int(self._storage)
        else:
            code = _storage_value(dtype, "dtype")
            if code not in _STORAGE_NAMES.values():
                raise ValueError(f"{what}: unknown dtype {dtype!r}")
        if code == _lib.IVF_DTYPE_F32:
            return _arrays.rows(_arrays.host_array(x, np.float32, what), self.dim, what), code
        want = StorageType(code).numpy_dtype
        if not isinstance(x, np.ndarray) or not (x.dtype == want or _numpy_storage(x.dtype) == code):
            got = type(x).__name__ if not isinstance(x, np.ndarray) else x.dtype.name
            raise TypeError(f"{what}: dtype={StorageType(code).label!r} needs a numpy array of "
                            f"{want.name}{' bit patterns' if code == _lib.IVF_DTYPE_BF16 else ''}, "
                            f"got {got}")
        return _arrays.rows(_arrays.host_array(x, x.dtype, what), self.dim, what), code

    def train(self, x: Any, *, stream: Optional[int] = None,
              progress: Optional[ProgressCallable] = None,
              dtype: Optional[StorageLike] = None) -> None:
        """Train the coarse quantizer on x (n, dim), n >= nlist. Device arrays go through
        ivf_train_ex on their stream (``stream=`` overrides it, a cudaStream_t address).
        ``progress``, ``dtype`` (host data of the storage type): see the class documentation."""
        lib = _lib.load()
        if _arrays.is_device_array(x):
            v = self._dev_rows(x, "train", stream)
            s = stream if stream is not None else v.stream
            with self._device_params(lib, s) as p, self._h.use("ivf_train_ex") as h, \
                    ProgressCall(progress) as pc:
                pc.attach(lib, p.ptr)
                pc.check(lib.ivf_train_ex(h, p.ptr, v.ptr, _lib.IVF_DTYPE_F32, v.shape[0],
                                          v.shape[1]), "ivf_train_ex")
            return
        a, code = self._host_rows(x, "train", dtype)
        with self._h.use("ivf_train") as h, ProgressCall(progress) as pc, \
                _progress_params(lib, pc) as p:
            pc.check(lib.ivf_train_ex(h, p, a.ctypes.data, code, a.shape[0], a.shape[1]),
                     "ivf_train")

    def add(self, x: Any, ids: Any = None, *, stream: Optional[int] = None,
            progress: Optional[ProgressCallable] = None,
            dtype: Optional[StorageLike] = None) -> None:
        """Add vectors x (n, dim), with ids (n int64 values, -1 excepted) or sequential ids.
        All or nothing. Device x (and ids) go through ivf_add_ex. ``progress``, ``dtype``:
        see the class documentation."""
        lib = _lib.load()
        if _arrays.is_device_array(x):
            v = self._dev_rows(x, "add", stream)
            s = stream if stream is not None else v.stream
            iv = None if ids is None else self._dev_ids(ids, v.shape[0], s)
            with self._device_params(lib, s) as p, self._h.use("ivf_add_ex") as h, \
                    ProgressCall(progress) as pc:
                pc.attach(lib, p.ptr)
                pc.check(lib.ivf_add_ex(h, p.ptr, v.ptr, _lib.IVF_DTYPE_F32, v.shape[0],
                                        v.shape[1], None if iv is None else iv.ptr), "ivf_add_ex")
            return
        a, code = self._host_rows(x, "add", dtype)
        i = None if ids is None else _arrays.id_array(ids, a.shape[0])
        with self._h.use("ivf_add") as h, ProgressCall(progress) as pc, \
                _progress_params(lib, pc) as p:
            pc.check(lib.ivf_add_ex(h, p, a.ctypes.data, code, a.shape[0],
                                    a.shape[1], None if i is None else i.ctypes.data), "ivf_add")

    def reset(self) -> None:
        """Remove every vector, keeping the centroids."""
        with self._h.use("ivf_reset") as h:
            check(_lib.load().ivf_reset(h), "ivf_reset")

    def remove(self, ids: Any) -> int:
        """Remove every vector whose id is in ids; returns how many were removed."""
        i = _arrays.id_array(ids, None)
        removed = c_int64()
        with self._h.use("ivf_remove") as h:
            check(_lib.load().ivf_remove(h, None, i.ctypes.data if i.size else None, i.shape[0],
                                         byref(removed)), "ivf_remove")
        return removed.value

    def update(self, x: Any, ids: Any, *, stream: Optional[int] = None,
               dtype: Optional[StorageLike] = None) -> None:
        """Upsert: each id then names exactly its row of x. ids must not repeat; all or nothing.
        ``dtype``: see the class documentation (host data of the storage type)."""
        lib = _lib.load()
        if _arrays.is_device_array(x):
            v = self._dev_rows(x, "update", stream)
            s = stream if stream is not None else v.stream
            iv = self._dev_ids(ids, v.shape[0], s)
            with self._device_params(lib, s) as p, self._h.use("ivf_update") as h:
                check(lib.ivf_update(h, p.ptr, v.ptr, _lib.IVF_DTYPE_F32, v.shape[0], v.shape[1],
                                     iv.ptr), "ivf_update")
            return
        a, code = self._host_rows(x, "update", dtype)
        i = _arrays.id_array(ids, a.shape[0])
        with self._h.use("ivf_update") as h:
            check(lib.ivf_update(h, None, a.ctypes.data, code, a.shape[0], a.shape[1],
                                 i.ctypes.data), "ivf_update")

    # --- reads ----------------------------------------------------------------------------

    def get(self, ids: Any, dtype: Optional[StorageLike] = None) -> Tuple[np.ndarray, np.ndarray]:
        """The stored vector of each id: ``(vectors (n, dim), found (n,) bool)``; rows of absent
        ids are zeros. Cosine indexes store unit vectors. ``dtype``: None or "f32" (float32,
        the default), or the index's storage type ("storage" names it): float16, uint8 or int8
        arrays, and for bf16 uint16 arrays of bfloat16 bit patterns (exactly the stored rows);
        any other type raises InvalidArgumentError."""
        i = _arrays.id_array(ids, None)
        dim = self.dim
        if dtype is None:
            code = _lib.IVF_DTYPE_F32
        elif isinstance(dtype, str) and dtype.lower() == "storage":
            code = int(self._storage)
        else:
            code = _storage_value(dtype, "dtype")
        try:
            np_dtype = StorageType(code).numpy_dtype
        except ValueError:
            raise ValueError(f"get: unknown dtype {dtype!r}") from None
        out = np.zeros((i.shape[0], dim), dtype=np_dtype)
        found = np.zeros(i.shape[0], dtype=np.uint8)
        with self._h.use("ivf_get") as h:
            check(_lib.load().ivf_get(h, None, i.ctypes.data, i.shape[0], out.ctypes.data,
                                      code, dim, found.ctypes.data), "ivf_get")
        return out, found.astype(bool)

    def count_ids(self, ids: Any) -> np.ndarray:
        """Number of vectors held under each id (int64 array)."""
        i = _arrays.id_array(ids, None)
        counts = np.zeros(i.shape[0], dtype=np.int64)
        with self._h.use("ivf_count_ids") as h:
            check(_lib.load().ivf_count_ids(h, i.ctypes.data, i.shape[0], counts.ctypes.data),
                  "ivf_count_ids")
        return counts

    def search(self, q: Any, k: int, *, nprobe: Optional[int] = None,
               filter: Optional[Filter] = None, out: Optional[Tuple[Any, Any]] = None,
               stream: Optional[int] = None,
               progress: Optional[ProgressCallable] = None,
               batch_window_us: Optional[int] = None,
               dtype: Optional[StorageLike] = None) -> SearchResult:
        """The k nearest neighbours of each query row: ``SearchResult(distances, ids)``, both
        (n, k), best first; ``distances, ids = index.search(q, k)`` as with FAISS.

        nprobe: lists probed (default: the index's). filter: a Filter. out: (distances, ids)
        arrays to write into (float32 and int64, C-contiguous, shape (n, k)); host results are
        new numpy arrays otherwise. Device queries (CUDA index): results are device arrays of the
        queries' library (CuPy or PyTorch) unless out= is given; the call runs on the queries'
        stream (or ``stream=``, a cudaStream_t address) and may return before the results are
        ready on that stream; with no stream known it returns with results ready.
        progress: see the class documentation.
        batch_window_us: with ``dynamic_batching=True``, how long (microseconds) the first call
        of a batch waits for others (default 100; 0 never merges this call); ignored otherwise.
        dtype: host queries of the storage type (see the class documentation); results are
        float32 distances whatever the query type.
        """
        lib = _lib.load()
        k = int(k)
        code = _lib.IVF_DTYPE_F32
        device = _arrays.is_device_array(q)
        s: Optional[int] = None
        if device:
            v = self._dev_rows(q, "search", stream)
            n, dim, qptr = v.shape[0], v.shape[1], v.ptr
            s = stream if stream is not None else (v.stream or _arrays.current_stream(q))
            if out is None:
                out = (_arrays.device_empty_like(q, (n, k), "<f4"),
                       _arrays.device_empty_like(q, (n, k), "<i8"))
            dv = _arrays.device_view(out[0], s)
            iv = _arrays.device_view(out[1], s)
            if dv.typestr != "<f4" or iv.typestr != "<i8" or dv.shape != (n, k) or iv.shape != (n, k):
                raise ValueError(f"out: expected float32 and int64 device arrays of shape ({n}, {k})")
            dptr, iptr = dv.ptr, iv.ptr
            keep: Any = (v, dv, iv)
        else:
            a, code = self._host_rows(q, "search", dtype)
            n, dim, qptr = a.shape[0], a.shape[1], a.ctypes.data
            if out is None:
                out = (np.empty((n, k), dtype=np.float32), np.empty((n, k), dtype=np.int64))
            d, i = out
            for arr, dt, name in ((d, np.float32, "distances"), (i, np.int64, "ids")):
                if not (isinstance(arr, np.ndarray) and arr.dtype == dt and arr.flags.c_contiguous
                        and arr.flags.writeable and arr.shape == (n, k)):
                    raise ValueError(f"out {name}: expected a writeable C-contiguous "
                                     f"{np.dtype(dt).name} array of shape ({n}, {k})")
            dptr, iptr = d.ctypes.data, i.ctypes.data
            keep = a
        params = None
        pc = ProgressCall(progress)
        with pc:
            if nprobe is not None or filter is not None or device or pc.active \
                    or batch_window_us is not None:
                params = _Params(lib)
            try:
                if params is not None:
                    if nprobe is not None:
                        params.set_int(_lib.IVF_PARAM_NPROBE, nprobe, "nprobe")
                    if batch_window_us is not None:
                        params.set_int(_lib.IVF_PARAM_BATCH_WINDOW_US, batch_window_us,
                                       "batch_window_us")
                    if device:
                        params.set_int(_lib.IVF_PARAM_MEMORY_KIND, _lib.IVF_MEMORY_DEVICE,
                                       "memory_kind")
                        if s:
                            params.set_ptr(_lib.IVF_PARAM_CUDA_STREAM, s, "cuda_stream")
                    pc.attach(lib, params.ptr)
                with self._h.use("ivf_search") as h:
                    if filter is not None:
                        with filter._h.use("ivf_search") as fp:
                            assert params is not None
                            params.set_ptr(_lib.IVF_PARAM_FILTER, fp, "filter")
                            st = lib.ivf_search(h, params.ptr, qptr, code, n, dim, k, iptr,
                                                dptr)
                            pc.check(st, "ivf_search")
                    else:
                        st = lib.ivf_search(h, None if params is None else params.ptr, qptr,
                                            code, n, dim, k, iptr, dptr)
                        pc.check(st, "ivf_search")
            finally:
                if params is not None:
                    lib.ivf_params_free(params.ptr)
        del keep
        return SearchResult(out[0], out[1])

    # --- persistence ----------------------------------------------------------------------

    def save(self, path: Union[str, "os.PathLike[str]"]) -> None:
        """Write the index to path atomically (ivf_save)."""
        with self._h.use("ivf_save") as h:
            check(_lib.load().ivf_save(h, os.fsencode(path)), "ivf_save")

    def save_faiss(self, path: Union[str, "os.PathLike[str]"]) -> None:
        """Write a FAISS IndexIVFFlat file (L2 and inner product)."""
        with self._h.use("ivf_save_faiss") as h:
            check(_lib.load().ivf_save_faiss(h, os.fsencode(path)), "ivf_save_faiss")

    @staticmethod
    def _load_params(lib: ctypes.CDLL, backend: BackendLike, device: int, num_threads: int,
                     device_budget: int = 0, storage: Optional[StorageLike] = None,
                     shards: int = 1, shard_mode: Union[str, int] = "split",
                     dynamic_batching: bool = False,
                     shard_devices: Optional[Sequence[int]] = None) -> _Params:
        p = _Params(lib)
        try:
            p.set_int(_lib.IVF_PARAM_BACKEND, _enum_value(backend, _BACKEND_NAMES, "backend"),
                      "backend")
            p.set_int(_lib.IVF_PARAM_DEVICE, device, "device")
            p.set_int(_lib.IVF_PARAM_NUM_THREADS, num_threads, "num_threads")
            _set_device_budget(p, device_budget)
            _set_parts(p, storage, shards, shard_mode, dynamic_batching, shard_devices)
        except BaseException:
            lib.ivf_params_free(p.ptr)
            raise
        return p

    @classmethod
    def load(cls, path: Union[str, "os.PathLike[str]"], *, backend: BackendLike = "auto",
             device: int = 0, num_threads: int = 0, device_budget: int = 0,
             progress: Optional[ProgressCallable] = None, storage: Optional[StorageLike] = None,
             shards: int = 1, shard_mode: Union[str, int] = "split",
             dynamic_batching: bool = False,
             shard_devices: Optional[Sequence[int]] = None) -> "Index":
        """Read a file written by save() or a FAISS IndexIVFFlat file. With
        ``device_budget`` (bytes) a CUDA index is opened into pinned host memory, the device
        caching the most-probed lists within the budget. ``progress``: see the class
        documentation (stage "load"). ``storage``: convert a file of f32 rows to that type
        (None, the default, and "f32" keep the file's type; a compact file keeps its own).
        ``shards``, ``shard_mode``, ``shard_devices``, ``dynamic_batching``: as for Index() (not
        in the file)."""
        lib = _lib.load()
        out = c_void_p()
        with cls._load_params(lib, backend, device, num_threads, device_budget, storage, shards,
                              shard_mode, dynamic_batching, shard_devices) as p, \
                ProgressCall(progress) as pc:
            pc.attach(lib, p.ptr)
            pc.check(lib.ivf_load(os.fsencode(path), p.ptr, byref(out)), "ivf_load")
        return cls._from_handle(out.value, num_threads)  # type: ignore[arg-type]

    def serialize(self) -> bytes:
        """The index as bytes (ivf_serialize), readable by deserialize() and by load()."""
        lib = _lib.load()
        size = c_size_t()
        with self._h.use("ivf_serialize") as h:
            check(lib.ivf_serialize(h, None, 0, byref(size)), "ivf_serialize")
            while True:  # a concurrent mutation may grow it between the two calls
                buf = ctypes.create_string_buffer(size.value)
                st = lib.ivf_serialize(h, ctypes.addressof(buf), size.value, byref(size))
                if st == _lib.IVF_ERR_BUFFER_TOO_SMALL:
                    continue
                check(st, "ivf_serialize")
                return buf.raw[: size.value]

    @classmethod
    def deserialize(cls, data: Union[bytes, bytearray, memoryview], *, backend: BackendLike = "auto",
                    device: int = 0, num_threads: int = 0, device_budget: int = 0,
                    progress: Optional[ProgressCallable] = None,
                    storage: Optional[StorageLike] = None, shards: int = 1,
                    shard_mode: Union[str, int] = "split",
                    dynamic_batching: bool = False,
                    shard_devices: Optional[Sequence[int]] = None) -> "Index":
        """Build an index from serialize()'s bytes (or a FAISS IndexIVFFlat file image);
        ``device_budget``, ``progress``, ``storage``, ``shards``, ``shard_mode``,
        ``shard_devices`` and ``dynamic_batching`` as for load()."""
        lib = _lib.load()
        buf = np.frombuffer(data, dtype=np.uint8)  # no copy
        out = c_void_p()
        with cls._load_params(lib, backend, device, num_threads, device_budget, storage, shards,
                              shard_mode, dynamic_batching, shard_devices) as p, \
                ProgressCall(progress) as pc:
            pc.attach(lib, p.ptr)
            pc.check(lib.ivf_deserialize(buf.ctypes.data if buf.size else None, buf.size, p.ptr,
                                         byref(out)), "ivf_deserialize")
        return cls._from_handle(out.value, num_threads)  # type: ignore[arg-type]

    def __getstate__(self) -> dict:
        return {"data": self.serialize(), "num_threads": self._num_threads}

    def __setstate__(self, state: dict) -> None:
        # The receiving process picks its own backend ("auto": its first GPU, else the CPU).
        other = Index.deserialize(state["data"], num_threads=state.get("num_threads", 0))
        h, other._h = other._h, None  # type: ignore[assignment]
        self._h = h
        self._num_threads = state.get("num_threads", 0)
        self._storage = other._storage

    # --- lifetime -------------------------------------------------------------------------

    def close(self) -> None:
        """Free the index (idempotent). Waits for calls in flight; later calls raise
        InvalidStateError."""
        h = getattr(self, "_h", None)
        if h is not None:
            h.close()

    def __enter__(self) -> "Index":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        if self._h.closed:
            return "<ivfgpu.Index closed>"
        try:
            return (f"<ivfgpu.Index dim={self.dim} nlist={self.nlist} ntotal={self.ntotal} "
                    f"metric={self.metric.label} backend={self.backend.label}"
                    f"{'' if self.backend != Backend.CUDA else f' device={self.device}'}"
                    f"{'' if self._storage == StorageType.F32 else f' storage={self._storage.label}'}"
                    f"{'' if self.shards == 1 else f' shards={self.shards}'}"
                    f" trained={self.is_trained}>")
        except Exception as e:  # never fail in repr
            return f"<ivfgpu.Index ({e})>"


def _part(part: int) -> int:
    p = int(part)
    if not 0 <= p < 4096:
        raise ValueError(f"part {p} is outside [0, 4096)")
    return p
