"""The Index surface on the CPU backend: every call, its shapes, dtypes and properties."""
from __future__ import annotations

import pickle

import numpy as np
import pytest

import ivfgpu


def test_module_surface():
    assert ivfgpu.version().count(".") == 2
    assert ivfgpu.abi_version() == 1
    assert ivfgpu.library_path()
    assert ivfgpu.cuda_device_count() >= 0
    assert ivfgpu.METRIC_L2 == 0 and ivfgpu.METRIC_INNER_PRODUCT == 1 and ivfgpu.METRIC_COSINE == 2
    assert ivfgpu.BACKEND_AUTO == 0 and ivfgpu.BACKEND_CPU == 1 and ivfgpu.BACKEND_CUDA == 2


def test_create_properties_and_repr():
    with ivfgpu.Index(8, nlist=4, metric="ip", backend="cpu", nprobe=3, unique_ids=True) as ix:
        assert (ix.dim, ix.nlist, ix.ntotal, ix.nprobe) == (8, 4, 0, 3)
        assert ix.metric == "ip" and ix.metric == ivfgpu.METRIC_INNER_PRODUCT
        assert ix.backend == "cpu" and ix.device == -1
        assert not ix.is_trained and ix.unique_ids and ix.state_version == 0
        assert ix.info(ivfgpu.INFO_DIM) == 8
        r = repr(ix)
        for part in ("dim=8", "nlist=4", "ntotal=0", "backend=cpu"):
            assert part in r
    assert "closed" in repr(ix)


def test_metric_by_int_and_cosine(data):
    ix = ivfgpu.Index(16, nlist=4, metric=ivfgpu.METRIC_COSINE, backend=ivfgpu.BACKEND_CPU)
    assert ix.metric == "cosine"
    ix.train(data)
    ix.add(data)
    d, i = ix.search(data[:5], 1, nprobe=4)
    assert (i[:, 0] == np.arange(5)).all()
    assert np.allclose(d[:, 0], 1.0, atol=1e-5)  # similarity with itself
    v, found = ix.get([0])
    assert found[0] and np.isclose(np.linalg.norm(v[0]), 1.0, atol=1e-5)


def test_train_add_search(index, data):
    assert index.is_trained and index.ntotal == 2000 and len(index) == 2000
    res = index.search(data[:10], 5)
    assert isinstance(res, ivfgpu.SearchResult) and isinstance(res, tuple)
    d, i = res
    assert d.dtype == np.float32 and i.dtype == np.int64 and d.shape == i.shape == (10, 5)
    assert (i[:, 0] == np.arange(10)).all() and (d[:, 0] == 0).all()
    assert (np.diff(d, axis=1) >= 0).all()
    assert res.distances is d and res.ids is i


def test_one_query_as_1d(index, data):
    d, i = index.search(data[3], 2)
    assert i.shape == (1, 2) and i[0, 0] == 3


def test_padding_when_fewer_than_k(data):
    ix = ivfgpu.Index(16, nlist=2, backend="cpu")
    ix.train(data)
    ix.add(data[:3])
    d, i = ix.search(data[:1], 5, nprobe=2)
    assert (i[0, 3:] == -1).all() and np.isinf(d[0, 3:]).all()


def test_add_with_ids_and_id_calls(data):
    ix = ivfgpu.Index(16, nlist=8, backend="cpu")
    ix.train(data)
    ids = np.arange(1000, 1100, dtype=np.int64)
    ix.add(data[:100], ids)
    assert ix.search(data[5:6], 1, nprobe=8).ids[0, 0] == 1005
    assert list(ix.count_ids([1000, 1, 1099])) == [1, 0, 1]
    v, found = ix.get([1007, 5])
    assert found.tolist() == [True, False]
    assert np.array_equal(v[0], data[7]) and not v[1].any()
    ix.update(data[200:202], [1007, 5000])
    v, found = ix.get([1007, 5000])
    assert found.all() and np.array_equal(v, data[200:202])
    assert ix.ntotal == 101
    assert ix.remove([1007, 1008, 424242]) == 2
    assert ix.ntotal == 99 and ix.count_ids([1007])[0] == 0
    assert ix.remove([]) == 0
    v0 = ix.state_version
    ix.reset()
    assert ix.ntotal == 0 and ix.is_trained and ix.state_version == v0 + 1


def test_duplicate_ids_and_unique_ids(data):
    dup = ivfgpu.Index(16, nlist=4, backend="cpu")
    dup.train(data)
    dup.add(data[:4], [7, 7, 8, 8])
    assert list(dup.count_ids([7, 8])) == [2, 2]
    uniq = ivfgpu.Index(16, nlist=4, backend="cpu", unique_ids=True)
    uniq.train(data)
    uniq.add(data[:2], [1, 2])
    with pytest.raises(ivfgpu.InvalidArgumentError):
        uniq.add(data[:1], [1])
    assert uniq.ntotal == 2


def test_filters(index, data):
    allow = ivfgpu.Filter([10, 11, 12])
    d, i = index.search(data[:4], 5, filter=allow, nprobe=16)
    assert set(i[:, :3].ravel()) <= {10, 11, 12} and (i[:, 3:] == -1).all()
    deny = ivfgpu.Filter(np.arange(0, 4), mode="deny")
    _, i = index.search(data[:4], 3, filter=deny)
    assert not np.isin(i, np.arange(4)).any()
    assert allow.host_bytes > 0 and allow.device_bytes == 0
    assert "allow" in repr(allow)
    allow.close()
    allow.close()  # idempotent
    with pytest.raises(ivfgpu.InvalidStateError):
        index.search(data[:1], 1, filter=allow)
    with pytest.raises(ValueError):
        ivfgpu.Filter([1], mode="maybe")
    empty = ivfgpu.Filter([], mode="allow")
    assert (index.search(data[:1], 2, filter=empty).ids == -1).all()


def test_nprobe_changes_result(index, data):
    assert index.nprobe == 4
    full = index.search(data[:50] + 0.01, 10, nprobe=16)
    brute = np.argsort(((data[None, :, :] - (data[:50, None, :] + 0.01)) ** 2).sum(-1), axis=1)[:, :10]
    assert (full.ids == brute).mean() > 0.99


def test_out_arrays_are_written_in_place(index, data):
    d = np.empty((3, 4), dtype=np.float32)
    i = np.empty((3, 4), dtype=np.int64)
    res = index.search(data[:3], 4, out=(d, i))
    assert res.distances is d and res.ids is i and i[0, 0] == 0
    with pytest.raises(ValueError):
        index.search(data[:3], 4, out=(d, np.empty((3, 4), dtype=np.int32)))
    with pytest.raises(ValueError):
        index.search(data[:3], 4, out=(np.empty((4, 3), np.float32), i))


def test_other_dtypes_and_layouts_are_converted(index, data):
    ref = index.search(data[:6], 3)
    for q in (data[:6].astype(np.float64), np.asfortranarray(data[:6]), data[:6].tolist()):
        r = index.search(q, 3)
        assert np.array_equal(r.ids, ref.ids)
    strided = index.search(data[:12:2], 3)
    assert np.array_equal(strided.ids[:, 0], np.arange(0, 12, 2))
    ix = ivfgpu.Index(16, nlist=4, backend="cpu")
    ix.train(data.astype(np.float16))
    ix.add(data[:5].astype(np.float64), ids=np.array([1, 2, 3, 4, 5], dtype=np.int32))
    assert list(ix.count_ids(np.array([1, 5], dtype=np.uint8))) == [1, 1]


def test_save_load_serialize(tmp_path, index, data):
    path = tmp_path / "x.ivf"
    index.save(path)
    ref = index.search(data[:20], 5)
    loaded = ivfgpu.Index.load(path, backend="cpu")
    assert loaded.ntotal == index.ntotal and loaded.nlist == 16 and loaded.nprobe == index.nprobe
    assert np.array_equal(loaded.search(data[:20], 5).ids, ref.ids)
    b = index.serialize()
    assert isinstance(b, bytes) and b[:4] == b"\x89IVF"
    assert path.read_bytes() == b
    for src in (b, bytearray(b), memoryview(b)):
        again = ivfgpu.Index.deserialize(src, backend="cpu")
        assert np.array_equal(again.search(data[:20], 5).ids, ref.ids)
    faiss = tmp_path / "x.faiss"
    index.save_faiss(str(faiss))
    assert ivfgpu.Index.load(str(faiss)).ntotal == index.ntotal


_TIER_KEYS = ("INFO_DEVICE_BUDGET", "INFO_RESIDENT_LISTS", "INFO_RESIDENT_BYTES",
              "INFO_HOST_TIER_BYTES", "INFO_CACHE_HITS", "INFO_CACHE_MISSES", "INFO_STREAMED_BYTES")


def test_device_budget_on_the_cpu(tmp_path, data):
    """device_budget= is accepted by Index, load and deserialize; on the CPU backend it has
    nothing to limit: the host-tier info keys read 0 and the results are unchanged."""
    assert [getattr(ivfgpu, k) for k in _TIER_KEYS] == list(range(16, 23))
    budget = 1 << 30
    ix = ivfgpu.Index(16, nlist=16, nprobe=4, backend="cpu", device_budget=budget)
    ix.train(data)
    ix.add(data)
    ref = ix.search(data[:20], 5)
    assert list(ref.ids[:, 0]) == list(range(20))
    path = tmp_path / "x.ivf"
    ix.save(path)
    opened = [ix, ivfgpu.Index.load(path, backend="cpu", device_budget=budget),
              ivfgpu.Index.deserialize(ix.serialize(), backend="cpu", device_budget=budget)]
    for other in opened:
        assert other.device_budget == 0
        assert [other.info(getattr(ivfgpu, k)) for k in _TIER_KEYS] == [0] * 7
        assert np.array_equal(other.search(data[:20], 5).ids, ref.ids)
        other.close()
    with pytest.raises(ivfgpu.InvalidArgumentError):
        ivfgpu.Index(16, nlist=16, backend="cpu", device_budget=-1)


def test_pickle_round_trip(index, data):
    again = pickle.loads(pickle.dumps(index))
    assert isinstance(again, ivfgpu.Index)
    assert (again.dim, again.nlist, again.ntotal, again.nprobe) == (16, 16, 2000, 4)
    assert np.array_equal(again.search(data[:20], 5).ids, index.search(data[:20], 5).ids)
    again.close()
    index.close()
    with pytest.raises(ivfgpu.InvalidStateError):
        pickle.dumps(index)


def test_close_is_idempotent_and_later_calls_fail(data):
    ix = ivfgpu.Index(16, nlist=4, backend="cpu")
    ix.close()
    ix.close()
    assert ix.closed
    for call in (lambda: ix.train(data), lambda: ix.ntotal, lambda: ix.search(data[:1], 1),
                 lambda: ix.serialize(), lambda: ix.remove([1])):
        with pytest.raises(ivfgpu.InvalidStateError, match="closed"):
            call()
