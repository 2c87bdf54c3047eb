"""Zero copy is really zero copy: the pointer handed to C is the caller's array's own, for
C-contiguous float32 data and int64 ids and out= arrays; other inputs are copied once."""
from __future__ import annotations

import numpy as np
import pytest

import ivfgpu


def test_train_add_search_pass_the_arrays_own_pointers(spy, data):
    # Host train and add go through the _ex forms (their parameters carry the progress callback).
    train, add, search = (spy(n) for n in ("ivf_train_ex", "ivf_add_ex", "ivf_search"))
    ix = ivfgpu.Index(16, nlist=8, backend="cpu")
    ix.train(data)
    ids = np.arange(100, 2100, dtype=np.int64)
    ix.add(data, ids)
    q = data[:7]  # a C-contiguous view: still zero copy
    d = np.empty((7, 3), dtype=np.float32)
    i = np.empty((7, 3), dtype=np.int64)
    ix.search(q, 3, out=(d, i))
    assert train.calls[0][2] == data.ctypes.data
    assert add.calls[0][2] == data.ctypes.data and add.calls[0][6] == ids.ctypes.data
    call = search.calls[0]
    assert call[2] == q.ctypes.data and call[7] == i.ctypes.data and call[8] == d.ctypes.data
    assert i[0, 0] == 100


def test_id_calls_pass_the_ids_own_pointer(spy, index, data):
    spies = {n: spy(n) for n in ("ivf_remove", "ivf_update", "ivf_get", "ivf_count_ids")}
    ids = np.array([1, 2, 3], dtype=np.int64)
    rows = np.ascontiguousarray(data[:3])
    index.count_ids(ids)
    index.get(ids)
    index.update(rows, ids)
    index.remove(ids)
    assert spies["ivf_count_ids"].calls[0][1] == ids.ctypes.data
    assert spies["ivf_get"].calls[0][2] == ids.ctypes.data
    assert spies["ivf_update"].calls[0][2] == rows.ctypes.data
    assert spies["ivf_update"].calls[0][6] == ids.ctypes.data
    assert spies["ivf_remove"].calls[0][2] == ids.ctypes.data


@pytest.mark.parametrize("make", [
    lambda x: x.astype(np.float64),
    lambda x: np.asfortranarray(x),
    lambda x: np.repeat(x, 2, axis=0)[::2],
])
def test_other_inputs_are_copied_once_to_float32(spy, index, data, make):
    search = spy("ivf_search")
    q = make(data[:5])
    res = index.search(q, 2)
    assert search.calls[0][2] != q.ctypes.data
    assert (res.ids[:, 0] == np.arange(5)).all()


def test_numpy_helper_is_identity_for_the_c_type():
    from ivfgpu import _arrays

    a = np.zeros((3, 4), dtype=np.float32)
    assert _arrays.host_array(a, np.float32, "x") is a
    b = _arrays.host_array(a.T, np.float32, "x")
    assert b is not a and b.flags.c_contiguous
    ids = np.arange(4, dtype=np.int64)
    assert _arrays.id_array(ids, 4) is ids
