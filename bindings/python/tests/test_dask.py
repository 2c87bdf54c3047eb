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
    # whole chunks go to a shard on their own worker unless that breaks the balance by > 1 chunk
    assert di.shard_counts.max() - di.shard_counts.min() <= 2000
    assert di.last_add_moved_rows < x.shape[0]
    ref = reference(di, x)
    for nprobe in (1, 8):
        assert_same(di.search(q, 10, nprobe=nprobe), ref.search(q, 10, nprobe=nprobe))
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
    # each chunk is split where it lives: only rows owned by shards on other workers move
    assert 0 < di.last_add_moved_rows < x.shape[0]
    ref = reference(di, x, ids)
    assert_same(di.search(q, 10, nprobe=4), ref.search(q, 10, nprobe=4))
    assert di.count_ids(ids[:50]).tolist() == [1] * 50
    assert di.remove(ids[:50]) == 50 and ref.remove(ids[:50]) == 50
    assert_same(di.search(q, 10, nprobe=4), ref.search(q, 10, nprobe=4))
    di.close()


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
