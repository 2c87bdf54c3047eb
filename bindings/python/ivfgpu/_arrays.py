"""Turning caller arrays into (pointer, shape) for the C calls.

Host arrays: a numpy array of the C element type (float32 data, int64 ids) that is C-contiguous
goes to C by its own pointer. Anything else (other dtypes, strides, lists) is converted with one
copy (``numpy.ascontiguousarray``), documented on each method.

Device arrays: objects with ``__cuda_array_interface__`` (v2/v3: CuPy, PyTorch, Numba) or
``__dlpack__`` on a CUDA device go by their device pointer; they must already be C-contiguous
and of the C element type (no device copies are made here).
"""
from __future__ import annotations

import ctypes
from typing import Any, NamedTuple, Optional, Tuple

import numpy as np

_KDL_CUDA = 2
_KDL_CUDA_MANAGED = 13


class DeviceArray(NamedTuple):
    """A view of a device array: its address, shape, typestr ('<f4', '<i8'), the stream its
    producer used (a cudaStream_t address; None when unknown) and the object kept alive."""
    ptr: int
    shape: Tuple[int, ...]
    typestr: str
    stream: Optional[int]
    owner: Any


def is_device_array(x: Any) -> bool:
    if hasattr(x, "__cuda_array_interface__"):
        return True
    dev = getattr(x, "__dlpack_device__", None)
    if dev is not None and not isinstance(x, np.ndarray):
        try:
            return dev()[0] in (_KDL_CUDA, _KDL_CUDA_MANAGED)
        except Exception:
            return False
    return False


def _c_strides(shape: Tuple[int, ...], itemsize: int) -> Tuple[int, ...]:
    out = []
    acc = itemsize
    for s in reversed(shape):
        out.append(acc)
        acc *= s
    return tuple(reversed(out))


def _contiguous(shape, strides, itemsize) -> bool:
    if strides is None:
        return True
    # dimensions of extent 1 may carry any stride
    return all(a == b or s == 1 for a, b, s in zip(strides, _c_strides(shape, itemsize), shape))


class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", _DLDevice), ("ndim", ctypes.c_int32),
                ("dtype", _DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


_capsule_get = ctypes.pythonapi.PyCapsule_GetPointer
_capsule_get.restype = ctypes.c_void_p
_capsule_get.argtypes = [ctypes.py_object, ctypes.c_char_p]


def device_view(x: Any, stream: Optional[int] = None) -> DeviceArray:
    """Read a device array's interface. ``stream``: the consumer stream (for DLPack)."""
    cai = getattr(x, "__cuda_array_interface__", None)
    if cai is not None:
        shape = tuple(int(s) for s in cai["shape"])
        typestr = cai["typestr"]
        itemsize = int(typestr[2:])
        if not _contiguous(shape, cai.get("strides"), itemsize):
            raise ValueError("device arrays must be C-contiguous (no device copy is made)")
        ptr = int(cai["data"][0] or 0)
        s = cai.get("stream")  # v3: None, 1 (legacy default), 2 (per-thread default) or a handle
        return DeviceArray(ptr, shape, typestr, None if s is None else int(s), x)
    # DLPack: the capsule stays alive (and owns the tensor) as long as the view does.
    capsule = x.__dlpack__() if stream is None else x.__dlpack__(stream=stream)
    managed = _capsule_get(capsule, b"dltensor")
    t = _DLTensor.from_address(managed)
    if t.device.device_type not in (_KDL_CUDA, _KDL_CUDA_MANAGED):
        raise ValueError("a DLPack tensor on the host: pass it as a numpy array")
    shape = tuple(t.shape[i] for i in range(t.ndim))
    code = {0: "i", 1: "u", 2: "f"}.get(t.dtype.code, "?")
    typestr = f"<{code}{t.dtype.bits // 8}"
    strides = None if not t.strides else tuple(t.strides[i] * (t.dtype.bits // 8) for i in range(t.ndim))
    if not _contiguous(shape, strides, t.dtype.bits // 8):
        raise ValueError("device arrays must be C-contiguous (no device copy is made)")
    return DeviceArray(int(t.data or 0) + int(t.byte_offset), shape, typestr, stream, (x, capsule))


def host_array(x: Any, dtype: Any, what: str) -> np.ndarray:
    """``x`` as a C-contiguous numpy array of ``dtype``: the array itself when it already is one
    (zero copy), else one converting copy."""
    if isinstance(x, np.ndarray) and x.dtype == dtype and x.flags.c_contiguous:
        return x
    try:
        return np.ascontiguousarray(x, dtype=dtype)
    except (TypeError, ValueError) as e:
        raise TypeError(f"{what}: cannot be read as {np.dtype(dtype).name}: {e}") from None


def rows(x: np.ndarray, dim: int, what: str) -> np.ndarray:
    """A (n, dim) view: 1-D input of length dim is one row."""
    if x.ndim == 1 and x.shape[0] == dim:
        return x.reshape(1, dim)
    if x.ndim != 2 or x.shape[1] != dim:
        raise ValueError(f"{what}: expected shape (n, {dim}), got {x.shape}")
    return x


def id_array(ids: Any, n: Optional[int], what: str = "ids") -> np.ndarray:
    a = host_array(ids, np.int64, what)
    if a.ndim == 0:
        a = a.reshape(1)
    if a.ndim != 1:
        raise ValueError(f"{what}: expected a 1-D array, got shape {a.shape}")
    if n is not None and a.shape[0] != n:
        raise ValueError(f"{what}: {a.shape[0]} ids for {n} vectors")
    return a


def device_empty_like(template: Any, shape: Tuple[int, int], typestr: str) -> Any:
    """A new device array of the same library as ``template`` (CuPy or PyTorch)."""
    mod = type(template).__module__.split(".")[0]
    if mod == "cupy":
        import cupy

        return cupy.empty(shape, dtype=np.dtype(typestr))
    if mod == "torch":
        import torch

        dt = {"<f4": torch.float32, "<i8": torch.int64}[typestr]
        return torch.empty(shape, dtype=dt, device=template.device)
    raise TypeError(
        "device queries of a library other than CuPy or PyTorch: pass out=(distances, ids) "
        "device arrays (float32 and int64, shape (n, k))")


def current_stream(template: Any) -> Optional[int]:
    """The current stream of CuPy or PyTorch for arrays of that library, else None."""
    mod = type(template).__module__.split(".")[0]
    try:
        if mod == "cupy":
            import cupy

            return int(cupy.cuda.get_current_stream().ptr) or None
        if mod == "torch":
            import torch

            return int(torch.cuda.current_stream(template.device).cuda_stream) or None
    except Exception:
        return None
    return None
