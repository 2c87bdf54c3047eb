"""Device-array plumbing without a GPU: objects exposing __cuda_array_interface__ reach the C
calls as device pointers with IVF_PARAM_MEMORY_KIND = device and their stream, and a CPU index
refuses them (IVF_ERR_INVALID_ARGUMENT) before touching the memory. The real device tests are
test_cuda.py (CuPy and a GPU)."""
from __future__ import annotations

import ctypes

import numpy as np
import pytest

import ivfgpu
from ivfgpu import _arrays, _lib


class FakeDeviceArray:
    """Claims device memory at a bogus address; never dereferenced by a CPU index."""

    def __init__(self, shape, typestr="<f4", stream=None, strides=None, ptr=0x7F0000001000):
        self.__cuda_array_interface__ = {"data": (ptr, False), "shape": shape, "typestr": typestr,
                                         "strides": strides, "version": 3, "stream": stream}


def _spy(monkeypatch, name):
    calls = []
    lib = _lib.load()
    real = getattr(lib, name)

    def spy(*args):
        calls.append(args)
        return real(*args)

    monkeypatch.setattr(lib, name, spy)
    return calls


def _param(p, key):
    v = ctypes.c_int64()
    assert _lib.load().ivf_params_get_int(p, key, ctypes.byref(v)) == 0
    return v.value


def test_device_search_passes_pointers_memory_kind_and_stream(monkeypatch, index):
    seen = []
    lib = _lib.load()
    real = lib.ivf_search

    def spy(h, p, q, dtype, n, dim, k, ids, dists):
        seen.append((q, ids, dists, n, dim, k, _param(p, _lib.IVF_PARAM_MEMORY_KIND)))
        return real(h, p, q, dtype, n, dim, k, ids, dists)

    monkeypatch.setattr(lib, "ivf_search", spy)
    q = FakeDeviceArray((3, 16), stream=1)
    d = FakeDeviceArray((3, 2), ptr=0x7F0000002000)
    i = FakeDeviceArray((3, 2), "<i8", ptr=0x7F0000003000)
    with pytest.raises(ivfgpu.InvalidArgumentError):
        index.search(q, 2, out=(d, i))
    assert seen == [(0x7F0000001000, 0x7F0000003000, 0x7F0000002000, 3, 16, 2,
                     _lib.IVF_MEMORY_DEVICE)]


def test_device_add_and_train_go_through_the_ex_calls(monkeypatch, index, data):
    add = _spy(monkeypatch, "ivf_add_ex")
    train = _spy(monkeypatch, "ivf_train_ex")
    x = FakeDeviceArray((5, 16))
    ids = FakeDeviceArray((5,), "<i8", ptr=0x7F0000004000)
    with pytest.raises(ivfgpu.InvalidArgumentError):
        index.add(x, ids)
    with pytest.raises(ivfgpu.IvfError):
        index.train(x)
    assert add[0][2] == 0x7F0000001000 and add[0][6] == 0x7F0000004000
    assert train[0][2] == 0x7F0000001000
    assert index.ntotal == 2000


def test_device_array_checks(index):
    with pytest.raises(TypeError, match="float32"):
        index.search(FakeDeviceArray((2, 16), "<f8"), 1)
    with pytest.raises(ValueError, match="C-contiguous"):
        index.search(FakeDeviceArray((2, 16), strides=(4, 64)), 1)
    with pytest.raises(TypeError, match="out="):  # not CuPy or torch: results need out=
        index.search(FakeDeviceArray((2, 16)), 1)
    assert _arrays.is_device_array(FakeDeviceArray((1, 1)))
    assert not _arrays.is_device_array(np.zeros(3))
