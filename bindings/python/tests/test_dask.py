"""ivfgpu.dask.DistributedIndex on a LocalCluster of 3 worker processes (CPU).

Exactness: every result is compared with one ivfgpu.Index built from the same trained, empty
index (``DistributedIndex.trained_bytes``) holding all the vectors: distances equal bit for bit,
ids equal except among equal distances. Faults: a worker is SIGKILLed while its shard task waits
on a distributed.Event that the test sets only after the kill (deterministic).
The worker processes find the library and the package through the inherited environment
(IVFGPU_LIBRARY, PYTHONPATH).
"""
from __future__ import annotations

import concurrent.futures
import os
import signal
import time
import uuid

import numpy as np
import pytest

distributed = pytest.importorskip("distributed")
da = pytest.importorskip("dask.array")

import ivfgpu  # noqa: E402
from ivfgpu.dask import DistributedIndex, ShardLostError, merge_topk  # noqa: E402
from ivfgpu.dask import _w_count_ids, _w_get, _w_info  # noqa: E402  (per-replica probes)

DATA = os.environ.get("IVFGPU_DATA_DIR", "/work/shared/data")


def _vecs(path, dtype):
    raw = np.fromfile(path, dtype=np.uint8)
    dim = int(raw[:4].view(np.int32)[0])
    width = 4 + dim * np.dtype(dtype).itemsize
    rows = raw.reshape(-1, width)[:, 4:]
    return np.ascontiguousarray(rows.view(dtype).reshape(-1, dim).astype(np.float32))


def _dataset(name, ext, dtype):
    base = os.path.join(DATA, name, f"{name}_base.{ext}")
    query = os.path.join(DATA, name, f"{name}_query.{ext}")
    if not (os.path.exists(base) and os.path.exists(query)):
        pytest.skip(f"{name} not found under {DATA} (set IVFGPU_DATA_DIR)")
    return _vecs(base, dtype), _vecs(query, dtype)


def siftsmall():
    return _dataset("siftsmall", "fvecs", np.float32)


def bigann10k():
    return _dataset("bigann10k", "bvecs", np.uint8)


def assert_same(got, ref, metric="l2"):
    """Distances exactly equal; ids equal except inside groups of equal distances."""
    np.testing.assert_array_equal(got.distances, ref.distances)
    k = ref.ids.shape[1]
    for r in np.flatnonzero((got.ids != ref.ids).any(axis=1)):
        d = ref.distances[r]
        for v in np.unique(d[got.ids[r] != ref.ids[r]]):
            cols = np.flatnonzero(d == v)
            assert len(cols) > 1, f"row {r}: ids differ at a distance with no tie"
            if cols[-1] < k - 1:  # a tie group inside the top-k: same ids, other order
                assert set(got.ids[r, cols]) == set(ref.ids[r, cols]), f"row {r}"


def reference(di, x, ids=None):
    ref = ivfgpu.Index.deserialize(di.trained_bytes, backend="cpu")
    ref.add(x, ids)
    return ref


@pytest.fixture(scope="module")
def client():
    if not (os.environ.get("IVFGPU_LIBRARY") or os.environ.get("IVFGPU_LIB_DIR")):
        try:
            os.environ["IVFGPU_LIBRARY"] = ivfgpu.library_path()
        except Exception:
            pass
    cluster = distributed.LocalCluster(n_workers=3, threads_per_worker=1, processes=True,
                                       dashboard_address=None, silence_logs=40)
    c = distributed.Client(cluster)
    yield c
    c.close()
    cluster.close()


def _fresh(client, n=3):
    client.wait_for_workers(n, timeout=60)
    return client


# ------------------------------------------------------------------------------ merge

def test_merge_topk_orders_ties_by_id_and_pads():
    inf = np.inf
    a = (np.array([[1.0, 2.0, inf]], np.float32), np.array([[7, 5, -1]]))
    b = (np.array([[1.0, 3.0, inf]], np.float32), np.array([[3, 9, -1]]))
    r = merge_topk([a, b], 4, "l2")
    assert r.ids.tolist() == [[3, 7, 5, 9]]
    r = merge_topk([a, b], 6, "l2")
    assert r.ids.tolist() == [[3, 7, 5, 9, -1, -1]] and np.isinf(r.distances[0, 4:]).all()
    a = (np.array([[5.0, -inf]], np.float32), np.array([[4, -1]]))
    b = (np.array([[5.0, 1.0]], np.float32), np.array([[2, 8]]))
    r = merge_topk([a, b], 3, "ip")
    assert r.ids.tolist() == [[2, 4, 8]]


@pytest.mark.parametrize("storage", ["f32", "uint8", "int8", "f16", "bf16"])
def test_client_row_check_agrees_with_the_library(storage):
    """DistributedIndex checks numpy rows on the client (so a bad row changes no shard): its
    verdict on values at each type's edges equals the library's."""
    from ivfgpu.dask import _check_rows

    ix = ivfgpu.Index(1, nlist=1, backend="cpu", storage=storage)
    ix.train(np.zeros((1, 1), np.float32))
    for v in (0, 1, -1, 0.5, -0.5, 127, 128, -128, -129, 255, 255.5, 256, 65504, 65519.99,
              65520, -65520, 3.3895314e38, 3.3961e38, -3.39e38, np.finfo(np.float32).max,
              np.inf, np.nan):
        row = np.array([[v]], np.float32)
        try:
            ix.add(row)
            lib_ok = True
        except ivfgpu.InvalidArgumentError:
            lib_ok = False
        try:
            _check_rows(row, storage, "l2", "add", "test")
            ok = True
        except ivfgpu.InvalidArgumentError:
            ok = False
        assert ok == lib_ok, f"{storage} {v!r}: client {ok}, library {lib_ok}"
    ix.close()


# ------------------------------------------------------------------------------ exactness

def test_siftsmall_equals_single_index(client):
    x, q = siftsmall()
    di = DistributedIndex(_fresh(client), x.shape[1], shards=3, nlist=64, backend="cpu",
                          kmeans_iters=8)
    with pytest.raises(ivfgpu.InvalidStateError):
        di.add(x[:10])
    di.train(x)
    di.add(x[:4000])
    di.add(x[4000:])  # two batches: ids continue, counts stay level
    assert di.ntotal == x.shape[0] and di.shard_counts.max() - di.shard_counts.min() <= 1
    ref = reference(di, x)
    for nprobe in (1, 8, 64):
        assert_same(di.search(q, 10, nprobe=nprobe), ref.search(q, 10, nprobe=nprobe))
    # k larger than some lists hold at nprobe=1: padding survives the merge
    assert_same(di.search(q[:5], 300, nprobe=1), ref.search(q[:5], 300, nprobe=1))
    # queries as a Dask array (2 blocks)
    assert_same(di.search(da.from_array(q, chunks=(50, -1)), 10), ref.search(q, 10))
    # filter and removal
    allow = np.arange(0, x.shape[0], 3)
    assert_same(di.search(q, 10, filter=allow), ref.search(q, 10, filter=ivfgpu.Filter(allow)))
    gone = np.arange(100, 200)
    assert di.remove(gone) == 100 and ref.remove(gone) == 100
    assert di.ntotal == ref.ntotal
    assert_same(di.search(q, 10, nprobe=16), ref.search(q, 10, nprobe=16))
    # a library error in the shards comes back as the package's exception; no shard is lost
    with pytest.raises(ivfgpu.IvfError) as err:
        di.search(q, 0)
    assert not isinstance(err.value, ShardLostError)
    assert all(di.live_replicas(s) == [0] for s in range(3))
    di.close()


def test_bigann10k_dask_array_by_chunks(client):
    x, q = bigann10k()
    q = q[:100]
    _fresh(client)
    # balanced routing; the chunks live on the workers before the add
    xd = client.persist(da.from_array(x, chunks=(2000, -1)))
    distributed.wait(xd)
    di = DistributedIndex(client, x.shape[1], shards=3, nlist=64, backend="cpu", kmeans_iters=8)
    di.train(xd)
    di.add(xd)
    assert di.ntotal == x.shape[0]
    _counts_are_the_shards(di)
    # whole chunks go to a shard on their own worker unless that breaks the balance by > 1 chunk
    assert di.shard_counts.max() - di.shard_counts.min() <= 2000
    assert di.last_add_moved_rows < x.shape[0]
    ref = reference(di, x)
    for nprobe in (1, 8):
        assert_same(di.search(q, 10, nprobe=nprobe), ref.search(q, 10, nprobe=nprobe))
    di.close()


def test_chunks_all_on_one_worker_stay_balanced(client):
    """Balanced routing where every chunk lives on one worker: after each chunk the shards are
    at most one chunk apart, so chunks leave their worker once its shard is a chunk ahead."""
    rng = np.random.default_rng(11)
    x = rng.random((10_000, 8), dtype=np.float32)
    q = rng.random((20, 8), dtype=np.float32)
    _fresh(client)
    one = sorted(client.scheduler_info()["workers"])[:1]
    xd = client.persist(da.from_array(x, chunks=(2000, -1)), workers=one)
    distributed.wait(xd)
    assert {w for ws in client.who_has(xd).values() for w in ws} == set(one)
    di = DistributedIndex(client, 8, shards=3, nlist=16, backend="cpu", kmeans_iters=4)
    di.train(x)
    di.add(xd)
    assert di.ntotal == x.shape[0]
    _counts_are_the_shards(di)
    assert di.shard_counts.max() - di.shard_counts.min() <= 2000, di.shard_counts
    assert 0 < di.last_add_moved_rows < x.shape[0]
    ref = reference(di, x)
    assert_same(di.search(q, 10, nprobe=16), ref.search(q, 10, nprobe=16))
    di.close()


def test_bigann10k_hash_routing_ip(client):
    x, q = bigann10k()
    q = q[:100]
    _fresh(client)
    rng = np.random.default_rng(5)
    ids = rng.choice(10**12, size=x.shape[0], replace=False).astype(np.int64)
    xd = client.persist(da.from_array(x, chunks=(2500, -1)))
    di = DistributedIndex(client, x.shape[1], shards=3, nlist=32, metric="ip", backend="cpu",
                          kmeans_iters=5, unique_ids=True)
    assert di.routing == "hash"
    di.train(x)
    di.add(xd, ids)
    assert di.ntotal == x.shape[0]
    _counts_are_the_shards(di)
    # each chunk is split where it lives: only rows owned by shards on other workers move
    assert 0 < di.last_add_moved_rows < x.shape[0]
    ref = reference(di, x, ids)
    assert_same(di.search(q, 10, nprobe=4), ref.search(q, 10, nprobe=4))
    assert di.count_ids(ids[:50]).tolist() == [1] * 50
    assert di.remove(ids[:50]) == 50 and ref.remove(ids[:50]) == 50
    assert_same(di.search(q, 10, nprobe=4), ref.search(q, 10, nprobe=4))
    di.close()


# ------------------------------------------------------------------------------ ids



def _small(n=1500, dim=16, seed=3):
    rng = np.random.default_rng(seed)
    return rng.random((n, dim), dtype=np.float32), rng.random((40, dim), dtype=np.float32)


def _every_replica(di, fn, *args):
    """fn(uid, *args) on every replica of every shard: [[result per replica] per shard]."""
    return [di.client.gather([di._submit(s, r, fn, *args) for r in range(di.replicas)])
            for s in range(di.shards)]


def _counts_are_the_shards(di):
    """The client's shard counts are what the shards hold (every replica)."""
    for s, infos in enumerate(_every_replica(di, _w_info)):
        assert [nt for nt, _ in infos] == [int(di.shard_counts[s])] * di.replicas, (s, infos)


def _replicas_agree(di, ids):
    """Every replica of a shard holds the same rows (mutations reached all of them), and the
    client's shard counts are theirs."""
    _counts_are_the_shards(di)
    for counts in _every_replica(di, _w_count_ids, ids):
        assert all(np.array_equal(c, counts[0]) for c in counts)
    for gets in _every_replica(di, _w_get, ids):
        assert all(np.array_equal(g[0], gets[0][0]) and np.array_equal(g[1], gets[0][1])
                   for g in gets)


def _same_error(calls):
    """Each (distributed call, single-index call) raises the same exception class."""
    for mine, single in calls:
        with pytest.raises(Exception) as ref_err:
            single()
        with pytest.raises(type(ref_err.value)):
            mine()


@pytest.mark.parametrize("replicas,unique_ids", [(1, False), (2, False), (2, True)])
def test_id_operations_equal_single_index(client, replicas, unique_ids):
    """remove / update / get / count_ids / filtered search against one Index with the same
    centroids holding the same vectors; with replicas=2 every replica took each mutation."""
    x, q = _small()
    n = x.shape[0]
    ids = (np.arange(n, dtype=np.int64) * 7 + 11) if unique_ids else np.arange(n, dtype=np.int64)
    di = DistributedIndex(_fresh(client), x.shape[1], shards=3, replicas=replicas, nlist=16,
                          backend="cpu", kmeans_iters=4, unique_ids=unique_ids)
    di.train(x)
    di.add(x, ids)
    ref = reference(di, x, ids)
    absent = np.array([-5, 10**12, int(ids.max()) + 1], dtype=np.int64)
    probe = np.concatenate([ids[::50], absent, ids[:3]])  # repeats and absent ids
    # get and count_ids
    np.testing.assert_array_equal(di.count_ids(probe), ref.count_ids(probe))
    gv, gf = di.get(probe)
    rv, rf = ref.get(probe)
    np.testing.assert_array_equal(gf, rf)
    np.testing.assert_array_equal(gv, rv)
    assert gv.dtype == np.float32 and gv.shape == (probe.size, x.shape[1])
    assert di.get([])[0].shape == (0, x.shape[1]) and di.count_ids([]).shape == (0,)
    # update: ids spread over every shard, plus two ids held nowhere
    rng = np.random.default_rng(11)
    up = np.concatenate([ids[::37], [int(ids.max()) + 5, 10**9 + 7]]).astype(np.int64)
    rng.shuffle(up)
    vals = rng.random((up.size, x.shape[1]), dtype=np.float32) + 2.0
    before = di.shard_counts
    di.update(vals, up)
    ref.update(vals, up)
    assert di.ntotal == ref.ntotal == n + 2
    if not unique_ids:  # replaced in place; the two new ids go where the rows are fewest
        assert (di.shard_counts - before).sum() == 2 and (di.shard_counts - before).max() == 1
    np.testing.assert_array_equal(di.count_ids(up), np.ones(up.size, np.int64))
    np.testing.assert_array_equal(di.get(up)[0], vals)
    np.testing.assert_array_equal(di.get(probe)[0], ref.get(probe)[0])
    assert_same(di.search(q, 10, nprobe=16), ref.search(q, 10, nprobe=16))
    assert_same(di.search(vals[:5], 3, nprobe=16), ref.search(vals[:5], 3, nprobe=16))
    # remove (ids repeated and absent): the count summed over shards
    gone = np.concatenate([ids[5:400:3], up[:4], up[:2], absent])
    assert di.remove(gone) == ref.remove(gone) > 0
    assert di.ntotal == ref.ntotal
    np.testing.assert_array_equal(di.count_ids(gone), np.zeros(gone.size, np.int64))
    assert_same(di.search(q, 10, nprobe=16), ref.search(q, 10, nprobe=16))
    # filtered search, both modes: the same ids on every shard = one filtered index
    allow = ids[::4]
    for mode in ("allow", "deny"):
        with ivfgpu.Filter(allow, mode=mode) as f:
            for nprobe in (2, 16):
                assert_same(di.search(q, 10, nprobe=nprobe, filter=(allow, mode)),
                            ref.search(q, 10, nprobe=nprobe, filter=f))
    assert_same(di.search(q, 10, filter=allow), ref.search(q, 10, filter=ivfgpu.Filter(allow)))
    if replicas > 1:
        _replicas_agree(di, np.concatenate([probe, up, gone]))
    # bad input: the single Index's exception classes, and nothing changes
    state = (di.ntotal, di.shard_counts.tolist(), di.search(q, 10, nprobe=16))
    # one held id per shard, so that a bad update that got past the client's checks would
    # change the shards that take their part without complaint
    held = [c[0] for c in _every_replica(di, _w_count_ids, ids)]
    one = np.array([ids[np.flatnonzero(h)[0]] for h in held], dtype=np.int64)
    kept = di.get(one)[0]
    v1 = rng.random((4, x.shape[1]), dtype=np.float32) + 3.0  # not the stored vectors
    nan = v1.copy()
    nan[3, 3] = np.nan
    _same_error([
        (lambda: di.update(v1[:, :5], up[:4]), lambda: ref.update(v1[:, :5], up[:4])),  # dim
        (lambda: di.update(v1, up[:3]), lambda: ref.update(v1, up[:3])),  # ids for rows
        (lambda: di.update(v1, [*one, one[0]]), lambda: ref.update(v1, [*one, one[0]])),  # repeat
        (lambda: di.update(v1, [*one, -1]), lambda: ref.update(v1, [*one, -1])),  # padding id
        (lambda: di.update(nan, [*one, 10**9]), lambda: ref.update(nan, [*one, 10**9])),  # NaN
        (lambda: di.update(v1[:0], up[:0]), lambda: ref.update(v1[:0], up[:0])),  # no rows
        (lambda: di.update([["a"] * 16], up[:1]), lambda: ref.update([["a"] * 16], up[:1])),
        (lambda: di.get([[1, 2]]), lambda: ref.get([[1, 2]])),  # 2-D ids
        (lambda: di.count_ids([[1, 2]]), lambda: ref.count_ids([[1, 2]])),
        (lambda: di.remove([[1, 2]]), lambda: ref.remove([[1, 2]])),
        (lambda: di.search(q[:, :5], 10), lambda: ref.search(q[:, :5], 10)),
        (lambda: di.search(q, 10, filter=(allow, "maybe")),
         lambda: ref.search(q, 10, filter=ivfgpu.Filter(allow, mode="maybe"))),
    ])
    with pytest.raises(ivfgpu.InvalidArgumentError, match="repeats"):
        di.update(v1, [*one, one[0]])
    assert (di.ntotal, di.shard_counts.tolist()) == state[:2]
    np.testing.assert_array_equal(di.get(one)[0], kept)
    np.testing.assert_array_equal(kept, ref.get(one)[0])
    assert_same(di.search(q, 10, nprobe=16), state[2])
    if replicas > 1:
        _replicas_agree(di, np.concatenate([probe, up]))
    di.close()
    ref.close()


def test_ids_before_train_as_single_index(client):
    x, _ = _small(n=100)
    di = DistributedIndex(_fresh(client), x.shape[1], shards=3, nlist=16, backend="cpu")
    single = ivfgpu.Index(x.shape[1], nlist=16, backend="cpu")
    ids = [0, 7]
    np.testing.assert_array_equal(di.count_ids(ids), single.count_ids(ids))  # zeros
    for got, ref in zip(di.get(ids), single.get(ids)):  # zeros, not found
        np.testing.assert_array_equal(got, ref)
    for call in (lambda ix: ix.remove(ids), lambda ix: ix.update(x[:2], ids),
                 lambda ix: ix.search(x[:2], 3)):
        with pytest.raises(ivfgpu.InvalidStateError):
            call(single)
        with pytest.raises(ivfgpu.InvalidStateError):
            call(di)
    single.close()


def test_duplicate_ids_on_several_shards(client):
    """Balanced routing, an id added twice lands on two shards: count_ids and remove sum over
    the shards, get returns the lowest-numbered shard's vector (the documented rule), update
    leaves exactly one vector, on the lowest-numbered shard that held the id."""
    x, q = _small(n=300)
    di = DistributedIndex(_fresh(client), x.shape[1], shards=3, replicas=2, nlist=16,
                          backend="cpu", kmeans_iters=4)
    di.train(x)
    di.add(x)  # level counts: shard s holds ids 100 s .. 100 s + 99
    twin = np.array([250, 50], dtype=np.int64)
    extra = np.full((2, x.shape[1]), 5.0, np.float32)
    extra[1] = 7.0
    di.add(extra, twin)  # one row each to the two least-loaded shards: 0 (id 250), 1 (id 50)
    ref = reference(di, np.concatenate([x, extra]), np.concatenate([np.arange(300), twin]))

    def where(i):
        return [int(c[0][0]) for c in _every_replica(di, _w_count_ids, [i])]

    assert where(250) == [1, 0, 1] and where(50) == [1, 1, 0]
    _replicas_agree(di, twin)
    np.testing.assert_array_equal(di.count_ids(twin), [2, 2])
    np.testing.assert_array_equal(di.count_ids(twin), ref.count_ids(twin))
    v, f = di.get(twin)
    assert f.tolist() == [True, True]
    np.testing.assert_array_equal(v[0], extra[0])  # shard 0's copy of 250 wins over shard 2's
    np.testing.assert_array_equal(v[1], x[50])  # shard 0's copy of 50 wins over shard 1's
    assert_same(di.search(q, 10, nprobe=16), ref.search(q, 10, nprobe=16))
    # update: one vector left, on the lowest shard that held the id; the same as one index
    new = np.full((1, x.shape[1]), 9.0, np.float32)
    di.update(new, [250])
    ref.update(new, [250])
    assert where(250) == [1, 0, 0] and di.ntotal == ref.ntotal == 301
    np.testing.assert_array_equal(di.get([250])[0], new)
    np.testing.assert_array_equal(di.shard_counts, [101, 101, 99])  # shard 2 dropped its copy
    _replicas_agree(di, twin)
    assert_same(di.search(q, 10, nprobe=16), ref.search(q, 10, nprobe=16))
    assert di.remove([50]) == ref.remove([50]) == 2
    assert di.count_ids([50]).tolist() == [0] and di.shard_counts.tolist() == [100, 100, 99]
    assert_same(di.search(q, 10, nprobe=16), ref.search(q, 10, nprobe=16))
    di.close()
    ref.close()


def test_device_budget_and_index_keywords_reach_the_shards(client, tmp_path):
    """device_budget (and backend, num_threads) go to the training index, to every shard
    replica at creation and at load; the library checks the value there (a negative budget:
    InvalidArgumentError from the workers). On the CPU a budget has nothing to limit."""
    x, q = _small(n=600)
    di = DistributedIndex(_fresh(client), x.shape[1], shards=3, replicas=2, nlist=16,
                          backend="cpu", kmeans_iters=4, num_threads=1, device_budget=1 << 30)
    di.train(x)
    di.add(x)
    ref = reference(di, x)
    assert_same(di.search(q, 10, nprobe=16), ref.search(q, 10, nprobe=16))
    di.save(str(tmp_path / "idx"))
    lo = DistributedIndex.load(client, str(tmp_path / "idx"))
    assert lo.index_params["device_budget"] == 1 << 30 and lo.ntotal == x.shape[0]
    assert_same(lo.search(q, 10, nprobe=16), ref.search(q, 10, nprobe=16))
    lo.close()
    with pytest.raises(ivfgpu.InvalidArgumentError, match="DEVICE_BUDGET"):  # load override
        DistributedIndex.load(client, str(tmp_path / "idx"), device_budget=-1)
    bad = DistributedIndex(client, x.shape[1], shards=3, nlist=16, backend="cpu",
                           device_budget=-1)
    with pytest.raises(ivfgpu.InvalidArgumentError, match="DEVICE_BUDGET"):  # training index
        bad.train(x)
    with pytest.raises(ivfgpu.InvalidArgumentError, match="DEVICE_BUDGET"):  # shard creation
        bad._create_shards(di.trained_bytes)
    di.close()


def _storages(di):
    """The storage type of every shard replica, read on the workers: [[label per replica]]."""
    def probe():
        from ivfgpu import dask as d

        return {u: str(i.storage) for u, i in d._SHARDS.items()}

    held = {}
    for v in di.client.run(probe).values():
        held.update(v)
    return [[held[u] for u in uids] for uids in di._uids]


def test_storage_reaches_the_shards(client, tmp_path):
    """storage= (an Index keyword) reaches the training index and every shard replica, at
    creation and at load; the manifest keeps it by name (a numpy dtype is not JSON). Rows
    travel as float32 and the shards' library stores them as uint8: the results equal one
    uint8 Index's."""
    rng = np.random.default_rng(5)
    x = rng.integers(0, 256, size=(900, 16)).astype(np.uint8)
    q = rng.integers(0, 256, size=(30, 16)).astype(np.uint8)
    di = DistributedIndex(_fresh(client), 16, shards=3, replicas=2, nlist=16, backend="cpu",
                          kmeans_iters=4, storage=np.uint8)
    assert di.index_params["storage"] == "uint8"
    di.train(x)
    di.add(x)
    assert _storages(di) == [["uint8", "uint8"]] * 3
    ref = reference(di, x)
    assert ref.storage == "uint8"
    assert_same(di.search(q, 10, nprobe=16), ref.search(q, 10, nprobe=16))
    vecs, found = di.get([0, 5, 10**9])
    assert found.tolist() == [True, True, False]
    np.testing.assert_array_equal(vecs[:2], x[[0, 5]].astype(np.float32))
    # a row uint8 cannot hold: refused on the client before any shard changed
    bad = x[:3].astype(np.float32)
    bad[1, 1] = 0.5
    counts = di.shard_counts.tolist()
    with pytest.raises(ivfgpu.InvalidArgumentError, match="row 1 .*uint8"):
        di.add(bad)
    with pytest.raises(ivfgpu.InvalidArgumentError, match="row 1 .*uint8"):
        di.update(bad, [1, 2, 3])
    assert di.shard_counts.tolist() == counts
    # a Dask array's chunks are checked by the shards' library where they land: the failing
    # chunk raises, and the rows of the other chunks (ids assigned here) are removed again
    chunks = da.from_array(np.concatenate([x[:6].astype(np.float32), bad]), chunks=(3, 16))
    with pytest.raises(ivfgpu.InvalidArgumentError):
        di.add(chunks)
    assert di.shard_counts.tolist() == counts
    assert [i[0][0] for i in _every_replica(di, _w_info)] == counts
    assert_same(di.search(q, 10, nprobe=16), ref.search(q, 10, nprobe=16))
    di.save(str(tmp_path / "u8"))
    lo = DistributedIndex.load(client, str(tmp_path / "u8"))
    assert lo.index_params["storage"] == "uint8" and lo.ntotal == x.shape[0]
    assert _storages(lo) == [["uint8", "uint8"]] * 3
    assert_same(lo.search(q, 10, nprobe=16), ref.search(q, 10, nprobe=16))
    lo.close()
    with pytest.raises(ValueError, match="storage"):
        DistributedIndex(client, 16, shards=3, storage="uint9")
    di.close()
    ref.close()


# ------------------------------------------------------------------------------ faults

def _built(client, replicas):
    x, q = siftsmall()
    x = x[:3000]
    _fresh(client)
    di = DistributedIndex(client, x.shape[1], shards=3, replicas=replicas, nlist=16,
                          backend="cpu", kmeans_iters=4, poll_s=0.1)
    di.train(x)
    di.add(x)
    return di, x, q


def _kill_during(client, di, call):
    """Run call(hold) in a thread; SIGKILL shard 0's first worker once its task waits on the
    event; set the event after the scheduler saw the worker go. Returns the thread's future."""
    victim = di.placement[0][0]
    tag = uuid.uuid4().hex
    event, queue = distributed.Event(f"go-{tag}"), distributed.Queue(f"in-{tag}")
    pool = concurrent.futures.ThreadPoolExecutor(1)
    fut = pool.submit(call, (f"go-{tag}", f"in-{tag}"))
    entered = set()
    while victim not in entered:  # the victim's shard task is running and waiting
        entered.add(queue.get(timeout=30))
    pid = client.run(os.getpid, workers=[victim])[victim]
    os.kill(pid, signal.SIGKILL)
    deadline = time.time() + 30
    while victim in client.scheduler_info()["workers"] and time.time() < deadline:
        time.sleep(0.05)
    event.set()
    pool.shutdown(wait=False)
    return fut


def _kill_mid_search(client, replicas):
    di, x, q = _built(client, replicas)
    return di, x, q, _kill_during(client, di, lambda hold: di.search(q, 10, _hold=hold))


def test_kill_worker_mid_search_without_replica_raises(client):
    di, x, q, fut = _kill_mid_search(client, replicas=1)
    with pytest.raises(ShardLostError, match="shard 0"):
        fut.result(timeout=60)
    assert di.live_replicas(0) == []
    with pytest.raises(ShardLostError):  # still no partial answer
        di.search(q, 10)
    before = di.shard_counts
    with pytest.raises(ShardLostError, match="removed"):  # an add that routes to shard 0
        di.add(x[:30])
    assert di.shard_counts[1:].tolist() == before[1:].tolist()  # the other shards rolled back
    di.close()


def test_kill_worker_mid_search_with_replicas_answers(client):
    di, x, q, fut = _kill_mid_search(client, replicas=2)
    ref = reference(di, x)
    assert_same(fut.result(timeout=60), ref.search(q, 10))
    assert di.live_replicas(0) == [1]
    extra = x[:30] + 1.0
    di.add(extra)  # the survivors take the add
    ref.add(extra, np.arange(x.shape[0], x.shape[0] + 30))
    assert_same(di.search(q, 10, nprobe=16), ref.search(q, 10, nprobe=16))
    di.close()


def test_kill_worker_mid_add_without_replica_fails_cleanly(client):
    di, x, q = _built(client, replicas=1)
    before = di.shard_counts
    fut = _kill_during(client, di, lambda hold: di.add(x[:30] + 1.0, _hold=hold))
    with pytest.raises(ShardLostError, match="removed"):
        fut.result(timeout=60)
    # shards 1 and 2 took their rows, then gave them back; shard 0 is gone
    assert di.shard_counts[1:].tolist() == before[1:].tolist()
    with pytest.raises(ShardLostError):
        di.search(q, 10)
    di.close()


def test_kill_worker_mid_add_with_replicas_survives(client):
    di, x, q = _built(client, replicas=2)
    extra = x[:30] + 1.0
    fut = _kill_during(client, di, lambda hold: di.add(extra, _hold=hold))
    fut.result(timeout=60)
    assert di.live_replicas(0) == [1] and di.ntotal == x.shape[0] + 30
    ref = reference(di, np.concatenate([x, extra]))
    assert_same(di.search(q, 10, nprobe=16), ref.search(q, 10, nprobe=16))
    di.close()


@pytest.mark.parametrize("replicas", [1, 2])
def test_kill_worker_mid_update(client, replicas):
    """replicas=1: ShardLostError naming the update; the live shards applied their part (new
    vectors), nothing else changed there. replicas=2: the twin takes it; same as one index."""
    di, x, q = _built(client, replicas)
    ids = np.array([0, 1000, 2000, 10**6], dtype=np.int64)  # shard s holds 1000 s .. 1000 s + 999
    new = x[:4] + 1.0
    fut = _kill_during(client, di, lambda hold: di.update(new, ids, _hold=hold))
    if replicas == 1:
        with pytest.raises(ShardLostError, match="update"):
            fut.result(timeout=60)
        assert di.live_replicas(0) == []
        for s in (1, 2):  # the live shards replaced their id's vector, in place
            v, f = di.client.gather(di._submit(s, 0, _w_get, ids))
            assert f.tolist() == [i == s for i in range(4)]
            np.testing.assert_array_equal(v[s], new[s])
        assert di.shard_counts[1:].tolist() == [1000, 1000]  # 10**6 was for shard 0 (lost)
        with pytest.raises(ShardLostError):  # balanced: a lost shard may hold any id
            di.get(ids)
    else:
        fut.result(timeout=60)
        assert di.live_replicas(0) == [1]
        ref = reference(di, x)
        ref.update(new, ids)
        np.testing.assert_array_equal(di.get(ids)[0], new)
        assert di.ntotal == ref.ntotal == x.shape[0] + 1
        assert_same(di.search(q, 10, nprobe=16), ref.search(q, 10, nprobe=16))
    di.close()


# ------------------------------------------------------------------------------ save / load

def test_save_on_3_load_on_2(client, tmp_path):  # last: it retires one of the 3 workers
    x, q = siftsmall()
    _fresh(client)
    di = DistributedIndex(client, x.shape[1], shards=3, nlist=32, backend="cpu", kmeans_iters=5)
    di.train(x)
    di.add(x)
    before = di.search(q, 10, nprobe=8)
    di.save(str(tmp_path / "idx"))
    assert sorted(os.listdir(tmp_path / "idx")) == [
        "manifest.json", "shard-00000.ivf", "shard-00001.ivf", "shard-00002.ivf"]
    di.close()
    gone = sorted(client.scheduler_info()["workers"])[0]
    client.retire_workers([gone], close_workers=True)
    deadline = time.time() + 30
    while len(client.scheduler_info()["workers"]) != 2 and time.time() < deadline:
        time.sleep(0.05)
    assert len(client.scheduler_info()["workers"]) == 2
    lo = DistributedIndex.load(client, str(tmp_path / "idx"))
    assert lo.shards == 3 and lo.ntotal == x.shape[0]
    assert len({w for p in lo.placement for w in p}) == 2
    after = lo.search(q, 10, nprobe=8)
    np.testing.assert_array_equal(after.distances, before.distances)
    np.testing.assert_array_equal(after.ids, before.ids)
    lo.add(x[:10])  # ids continue after the saved ones
    assert lo.count_ids([x.shape[0]]).tolist() == [1]
    lo.close()


def test_dask_bench_runs_and_checks_equality(tmp_path):
    """bench/dask_bench.py (the layer's cost, bench/RESULTS.md) on a tiny problem: it runs, it
    checks the distributed results against the in-process index, and it writes its rows."""
    import json
    import pathlib
    import subprocess
    import sys

    bench = pathlib.Path(__file__).resolve().parents[3] / "bench" / "dask_bench.py"
    out = tmp_path / "rows.json"
    run = subprocess.run([sys.executable, str(bench), "--n", "4000", "--nlist", "16", "--nq", "200",
                          "--nprobe", "4", "--workers", "1", "--reps", "1", "--json", str(out)],
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    rows = json.loads(out.read_text())
    assert len(rows) == 1 and rows[0]["workers"] == 1 and rows[0]["qps_dask"] > 0
    assert rows[0]["same_ids"] > 0.99
