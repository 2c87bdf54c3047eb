"""Device arrays (CuPy, through __cuda_array_interface__) on a CUDA index: queries, results,
train and add data go as device memory, and results equal the host path's. Skipped where CuPy
or a CUDA device is missing: CuPy is not a Debian package, and the development machine has no
GPU, so these run only on a GPU machine with CuPy installed."""
from __future__ import annotations

import numpy as np
import pytest

import ivfgpu

cp = pytest.importorskip("cupy", reason="CuPy is not installed (not a Debian package; "
                         "these device-array tests need it and a CUDA GPU)")

if ivfgpu.cuda_device_count() == 0:
    pytest.skip("no usable CUDA device (or the library was built without CUDA)",
                allow_module_level=True)


@pytest.fixture
def gpu_index(data):
    ix = ivfgpu.Index(16, nlist=16, nprobe=4, backend="cuda")
    ix.train(cp.asarray(data))
    ix.add(cp.asarray(data))
    yield ix
    ix.close()


def test_device_train_add_search_equal_host(gpu_index, data):
    assert gpu_index.backend == "cuda" and gpu_index.ntotal == 2000
    d, i = gpu_index.search(cp.asarray(data[:10]), 5)
    assert isinstance(d, cp.ndarray) and isinstance(i, cp.ndarray)
    hd, hi = gpu_index.search(data[:10], 5)
    assert np.array_equal(cp.asnumpy(i), hi) and np.allclose(cp.asnumpy(d), hd)


def test_device_out_arrays_and_stream(gpu_index, data):
    q = cp.asarray(data[:4])
    d = cp.empty((4, 3), dtype=cp.float32)
    i = cp.empty((4, 3), dtype=cp.int64)
    stream = cp.cuda.Stream(non_blocking=True)
    with stream:
        res = gpu_index.search(q, 3, out=(d, i), stream=stream.ptr)
    stream.synchronize()
    assert res.ids is i and (cp.asnumpy(i)[:, 0] == np.arange(4)).all()


def test_device_ids_and_update(data):
    ix = ivfgpu.Index(16, nlist=8, backend="cuda")
    ix.train(cp.asarray(data))
    ix.add(cp.asarray(data[:100]), cp.arange(500, 600, dtype=cp.int64))
    assert ix.count_ids([500, 599])[0] == 1
    ix.update(cp.asarray(data[200:201]), cp.asarray([500], dtype=cp.int64))
    v, found = ix.get([500])
    assert found[0] and np.array_equal(v[0], data[200])


def test_device_arrays_must_be_float32_and_contiguous(gpu_index, data):
    with pytest.raises(TypeError):
        gpu_index.search(cp.asarray(data[:2], dtype=cp.float64), 1)
    with pytest.raises(ValueError):
        gpu_index.search(cp.asfortranarray(cp.asarray(data[:4])), 1)


def test_dlpack_only_object(gpu_index, data):
    class OnlyDLPack:
        def __init__(self, a):
            self._a = a

        def __dlpack__(self, stream=None):
            return self._a.__dlpack__()

        def __dlpack_device__(self):
            return self._a.__dlpack_device__()

    q = cp.asarray(data[:3])
    out = (cp.empty((3, 2), cp.float32), cp.empty((3, 2), cp.int64))
    gpu_index.search(OnlyDLPack(q), 2, out=out)
    assert (cp.asnumpy(out[1])[:, 0] == np.arange(3)).all()
