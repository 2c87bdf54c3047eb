"""Exceptions: one class per ivf_status, all under IvfError."""
from __future__ import annotations

from typing import Dict, Type

from . import _lib


class IvfError(Exception):
    """A libivfgpu call failed.

    Attributes:
        status: the C status code (a negative ``IVF_ERR_*`` value).
        message: the library's message (``ivf_last_error_message``), captured on the calling
            thread right after the failing call.
        function: the C function that failed.
    """

    status: int = 0

    def __init__(self, status: int, message: str, function: str = "") -> None:
        self.status = status
        self.message = message
        self.function = function
        text = f"{function}: " if function else ""
        text += f"{_status_string(status)} ({status})"
        if message:
            text += f": {message}"
        super().__init__(text)

    def __reduce__(self):  # picklable, e.g. across Dask workers
        return (_rebuild, (self.status, self.message, self.function))


def _rebuild(status: int, message: str, function: str) -> "IvfError":
    return error_for(status, message, function)


class InvalidArgumentError(IvfError, ValueError):
    """IVF_ERR_INVALID_ARGUMENT: NULL pointer, bad size, NaN/Inf in data, ..."""
    status = _lib.IVF_ERR_INVALID_ARGUMENT


class OutOfDeviceMemoryError(IvfError, MemoryError):
    """IVF_ERR_OUT_OF_DEVICE_MEMORY: a GPU allocation failed; nothing changed."""
    status = _lib.IVF_ERR_OUT_OF_DEVICE_MEMORY


class OutOfHostMemoryError(IvfError, MemoryError):
    """IVF_ERR_OUT_OF_HOST_MEMORY: a host allocation failed; nothing changed."""
    status = _lib.IVF_ERR_OUT_OF_HOST_MEMORY


class CudaError(IvfError):
    """IVF_ERR_CUDA: a non-sticky CUDA or cuBLAS error."""
    status = _lib.IVF_ERR_CUDA


class UnsupportedError(IvfError):
    """IVF_ERR_UNSUPPORTED: unknown key, dtype, or a feature not built in."""
    status = _lib.IVF_ERR_UNSUPPORTED


class InvalidStateError(IvfError):
    """IVF_ERR_INVALID_STATE: e.g. add or search before train."""
    status = _lib.IVF_ERR_INVALID_STATE


class BufferTooSmallError(IvfError):
    """IVF_ERR_BUFFER_TOO_SMALL: a caller buffer is shorter than required."""
    status = _lib.IVF_ERR_BUFFER_TOO_SMALL


class IvfIOError(IvfError, OSError):
    """IVF_ERR_IO: open/read/write/rename failed."""
    status = _lib.IVF_ERR_IO

    def __init__(self, status: int, message: str, function: str = "") -> None:
        IvfError.__init__(self, status, message, function)


IOError_ = IvfIOError


class CorruptDataError(IvfError):
    """IVF_ERR_CORRUPT_DATA: a file or buffer failed validation."""
    status = _lib.IVF_ERR_CORRUPT_DATA


class VersionMismatchError(IvfError):
    """IVF_ERR_VERSION_MISMATCH: file format or ABI version not understood."""
    status = _lib.IVF_ERR_VERSION_MISMATCH


class DeviceLostError(IvfError):
    """IVF_ERR_DEVICE_LOST: sticky CUDA error; this index's GPU is unusable."""
    status = _lib.IVF_ERR_DEVICE_LOST


class InternalError(IvfError):
    """IVF_ERR_INTERNAL: a bug in libivfgpu; please report it with the message."""
    status = _lib.IVF_ERR_INTERNAL


class CancelledError(IvfError):
    """IVF_ERR_CANCELLED: a ``progress=`` callable returned False; nothing changed."""
    status = _lib.IVF_ERR_CANCELLED


ERRORS: Dict[int, Type[IvfError]] = {
    cls.status: cls
    for cls in (InvalidArgumentError, OutOfDeviceMemoryError, OutOfHostMemoryError, CudaError,
                UnsupportedError, InvalidStateError, BufferTooSmallError, IvfIOError,
                CorruptDataError, VersionMismatchError, DeviceLostError, InternalError,
                CancelledError)
}


def _status_string(status: int) -> str:
    try:
        return _lib.load().ivf_status_string(status).decode("utf-8", "replace")
    except OSError:
        return "status"


def error_for(status: int, message: str, function: str = "") -> IvfError:
    """The exception for a status (IvfError itself for a code this package does not know)."""
    return ERRORS.get(status, IvfError)(status, message, function)


def check(status: int, function: str) -> None:
    """Raise for a failing status. Call it right after the C call, on the same thread: the
    message is the calling thread's ivf_last_error_message, valid until its next ivf_ call."""
    if status != _lib.IVF_OK:
        msg = _lib.load().ivf_last_error_message().decode("utf-8", "replace")
        raise error_for(status, msg, function)
