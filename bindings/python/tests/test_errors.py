"""Every status has its exception class under IvfError, carrying the code and the library's
message; the ones a CPU build can provoke are provoked for real."""
from __future__ import annotations

import pickle

import numpy as np
import pytest

import ivfgpu
from ivfgpu import _errors, _lib

ALL = {
    -1: ivfgpu.InvalidArgumentError, -2: ivfgpu.OutOfDeviceMemoryError,
    -3: ivfgpu.OutOfHostMemoryError, -4: ivfgpu.CudaError, -5: ivfgpu.UnsupportedError,
    -6: ivfgpu.InvalidStateError, -7: ivfgpu.BufferTooSmallError, -8: ivfgpu.IvfIOError,
    -9: ivfgpu.CorruptDataError, -10: ivfgpu.VersionMismatchError, -11: ivfgpu.DeviceLostError,
    -12: ivfgpu.InternalError, -13: ivfgpu.CancelledError,
}


@pytest.mark.parametrize("status,cls", sorted(ALL.items()))
def test_every_status_has_a_class(status, cls):
    assert issubclass(cls, ivfgpu.IvfError) and cls.status == status
    e = _errors.error_for(status, "the message", "ivf_x")
    assert type(e) is cls and e.status == status and e.message == "the message"
    text = str(e)
    assert "ivf_x" in text and "the message" in text and str(status) in text
    assert _lib.load().ivf_status_string(status).decode() in text
    again = pickle.loads(pickle.dumps(e))
    assert type(again) is cls and again.status == status and again.message == "the message"


def test_unknown_status_is_the_base_class():
    e = _errors.error_for(-99, "m")
    assert type(e) is ivfgpu.IvfError and e.status == -99


def test_aliases_and_builtin_bases():
    assert ivfgpu.IOError_ is ivfgpu.IvfIOError
    assert issubclass(ivfgpu.IvfIOError, OSError)
    assert issubclass(ivfgpu.InvalidArgumentError, ValueError)
    assert issubclass(ivfgpu.OutOfHostMemoryError, MemoryError)


def _raises(cls, fn, match=None):
    with pytest.raises(cls, match=match) as info:
        fn()
    assert info.value.status == cls.status
    assert info.value.message  # the library's own text
    return info.value


def test_invalid_argument(data):
    e = _raises(ivfgpu.InvalidArgumentError, lambda: ivfgpu.Index(0))
    assert "dim" in e.message and e.function == "ivf_create"
    ix = ivfgpu.Index(16, nlist=4, backend="cpu")
    bad = data.copy()
    bad[3, 2] = np.nan
    _raises(ivfgpu.InvalidArgumentError, lambda: ix.train(bad))
    _raises(ivfgpu.InvalidArgumentError, lambda: ivfgpu.Index(4, nlist=0))
    ix.train(data)
    _raises(ivfgpu.InvalidArgumentError, lambda: ix.add(data[:2], [-1, 3]))
    _raises(ivfgpu.InvalidArgumentError, lambda: ix.search(data[:1], 0))
    assert ix.ntotal == 0


def test_invalid_state(data):
    ix = ivfgpu.Index(16, nlist=4, backend="cpu")
    _raises(ivfgpu.InvalidStateError, lambda: ix.search(data[:1], 1))
    _raises(ivfgpu.InvalidStateError, lambda: ix.add(data[:1]))
    ix.train(data)
    ix.add(data[:10])
    _raises(ivfgpu.InvalidStateError, lambda: ix.train(data))


def test_unsupported(index):
    _raises(ivfgpu.UnsupportedError, lambda: index.info(999))
    if ivfgpu.cuda_device_count() == 0:
        _raises(ivfgpu.UnsupportedError, lambda: ivfgpu.Index(4, nlist=1, backend="cuda"))


def test_buffer_too_small(index):
    lib = _lib.load()
    buf = bytearray(16)
    size = _lib.ctypes.c_size_t()
    raw = (_lib.ctypes.c_char * 16).from_buffer(buf)
    with index._h.use("ivf_serialize") as h:
        st = lib.ivf_serialize(h, _lib.ctypes.addressof(raw), 16, _lib.ctypes.byref(size))
        with pytest.raises(ivfgpu.BufferTooSmallError) as info:
            _errors.check(st, "ivf_serialize")
    assert size.value > 16 and info.value.message


def test_io_error(tmp_path, index):
    missing = tmp_path / "nope" / "x.ivf"
    e = _raises(ivfgpu.IvfIOError, lambda: ivfgpu.Index.load(missing))
    assert isinstance(e, OSError)
    _raises(ivfgpu.IvfIOError, lambda: index.save(missing))


def test_corrupt_data_and_version_mismatch(index):
    b = bytearray(index.serialize())
    flipped = bytearray(b)
    flipped[len(b) // 2] ^= 0xFF
    _raises(ivfgpu.CorruptDataError, lambda: ivfgpu.Index.deserialize(bytes(flipped)))
    _raises(ivfgpu.CorruptDataError, lambda: ivfgpu.Index.deserialize(bytes(b[:200])))
    newer = bytearray(b)
    newer[8:12] = (99).to_bytes(4, "little")
    _raises(ivfgpu.VersionMismatchError, lambda: ivfgpu.Index.deserialize(bytes(newer)))
