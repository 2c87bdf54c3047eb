"""Page-locked host arrays (host_empty, host_registered): searches from and into them give the
same results as ordinary arrays, with the arrays' own pointers handed to C; the memory is freed
with the last view; a second registration of the same memory is refused."""
from __future__ import annotations

import gc

import numpy as np
import pytest

import ivfgpu


def test_host_empty_arrays_search_like_ordinary_ones(spy, index, data):
    search = spy("ivf_search")
    q = ivfgpu.host_empty((20, data.shape[1]), np.float32)
    assert q.flags.c_contiguous and q.ctypes.data % 64 == 0 and not q.any()
    q[:] = data[:20]
    want_d, want_i = index.search(data[:20], 5, nprobe=4)
    d = ivfgpu.host_empty((20, 5), np.float32)
    i = ivfgpu.host_empty((20, 5), np.int64)
    index.search(q, 5, nprobe=4, out=(d, i))
    np.testing.assert_array_equal(i, want_i)
    np.testing.assert_array_equal(d, want_d)
    call = search.calls[-1]
    assert call[2] == q.ctypes.data and call[7] == i.ctypes.data and call[8] == d.ctypes.data


def test_host_registered_passes_the_same_array_and_ends(index, data):
    q = np.ascontiguousarray(data[:10])
    want_d, want_i = index.search(q, 3, nprobe=4)
    with ivfgpu.host_registered(q) as pinned:
        assert pinned is q
        d, i = index.search(pinned, 3, nprobe=4)
        with pytest.raises(ivfgpu.InvalidArgumentError, match="ivf_host_register"):
            with ivfgpu.host_registered(q):
                pass
    np.testing.assert_array_equal(i, want_i)
    np.testing.assert_array_equal(d, want_d)
    with ivfgpu.host_registered(q):  # ended above: registers again
        pass
    with pytest.raises(ValueError):
        with ivfgpu.host_registered(data[:, :3]):  # not C-contiguous
            pass


def test_host_empty_memory_is_freed_with_its_last_view(spy):
    free = spy("ivf_host_free")
    a = ivfgpu.host_empty(1000, np.int64)
    view = a[10:20]
    del a
    gc.collect()
    assert not free.calls, "freed while a view still holds it"
    view[:] = 7
    del view
    gc.collect()
    assert len(free.calls) == 1
    assert ivfgpu.host_empty((0, 4)).shape == (0, 4)
    with pytest.raises(ValueError):
        ivfgpu.host_empty((-1, 4))
