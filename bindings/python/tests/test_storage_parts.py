"""Storage types (storage=, typed arrays, get(dtype=)), several parts (shards=, shard_mode=) and
dynamic batching (dynamic_batching=, batch_window_us=) from Python, on the CPU backend."""
from __future__ import annotations

import threading

import numpy as np
import pytest

import ivfgpu
from ivfgpu import _lib



def assert_same(a, b):
    """Distances exactly equal; ids equal except among equal distances."""
    np.testing.assert_array_equal(a.distances, b.distances)
    for r in np.flatnonzero((a.ids != b.ids).any(axis=1)):
        for c in np.flatnonzero(a.ids[r] != b.ids[r]):
            assert (a.distances[r] == a.distances[r, c]).sum() > 1, f"row {r}: ids differ, no tie"


def ints(rng, n, dim, lo, hi, dtype):
    return rng.integers(lo, hi, size=(n, dim)).astype(dtype)


# ------------------------------------------------------------------------------ storage


@pytest.mark.parametrize("storage", ["f32", "float32", np.float32, "f16", np.float16, "bf16",
                                     "bfloat16", "uint8", np.uint8, np.dtype("int8"), "INT8",
                                     ivfgpu.STORAGE_BF16, 2], ids=repr)
def test_storage_names_and_dtypes(storage):
    ix = ivfgpu.Index(8, nlist=4, backend="cpu", storage=storage)
    want = ivfgpu.StorageType.of(storage)
    assert ix.storage == want and ix.info(ivfgpu.INFO_STORAGE_TYPE) == int(want)
    assert ix.storage == want.label and str(ix.storage) == want.label
    assert ix.storage == want.numpy_dtype or want == ivfgpu.STORAGE_BF16
    assert ix.storage != "float64" and ix.storage != np.float64 and ix.storage != "nonsense"
    assert ix.backend == "cpu" and ix.shards == 1 and ix.live_shards == 1
    ix.close()


def test_bad_storage_is_refused():
    with pytest.raises(ValueError, match="storage"):
        ivfgpu.Index(8, storage="u8")  # numpy's "u8" is uint64: not a name here
    with pytest.raises(ValueError, match="float64"):
        ivfgpu.Index(8, storage=np.float64)
    with pytest.raises(ivfgpu.InvalidArgumentError):
        ivfgpu.Index(8, storage=7)
    with pytest.raises(ivfgpu.UnsupportedError, match="cosine"):
        ivfgpu.Index(8, storage="uint8", metric="cosine", backend="cpu")


def test_auto_backend_is_the_same_for_compact_types():
    # Every backend holds every type: AUTO picks as it does for f32.
    ix = ivfgpu.Index(8, nlist=4, storage="f16")  # backend "auto"
    plain = ivfgpu.Index(8, nlist=4)
    assert ix.backend == plain.backend
    ix.close()
    plain.close()


def test_uint8_arrays_equal_the_same_values_as_float32(spy, rng):
    """A uint8 index fed uint8 arrays (train, add, update, search) equals one fed the same
    values as float32: same centroids, same stored rows, same results (distances are exact
    integers here, below 2**24)."""
    dim = 16
    x8 = ints(rng, 3000, dim, 0, 256, np.uint8)
    q8 = ints(rng, 50, dim, 0, 256, np.uint8)
    u8 = ivfgpu.Index(dim, nlist=16, nprobe=4, backend="cpu", storage="uint8")
    f32 = ivfgpu.Index(dim, nlist=16, nprobe=4, backend="cpu", storage="uint8")
    train, add, search, update = (spy(n) for n in ("ivf_train_ex", "ivf_add_ex",
                                                                 "ivf_search", "ivf_update"))
    with u8, f32:
        u8.train(x8)
        u8.add(x8)
        f32.train(x8.astype(np.float32))
        f32.add(x8.astype(np.float32))
        assert [c[3] for c in train.calls] == [_lib.IVF_DTYPE_U8, _lib.IVF_DTYPE_F32]
        assert [c[3] for c in add.calls] == [_lib.IVF_DTYPE_U8, _lib.IVF_DTYPE_F32]
        assert train.calls[0][2] == x8.ctypes.data and add.calls[0][2] == x8.ctypes.data
        assert u8.serialize() == f32.serialize()
        for nprobe in (1, 4, 16):
            a = u8.search(q8, 10, nprobe=nprobe)
            b = f32.search(q8.astype(np.float32), 10, nprobe=nprobe)
            assert_same(a, b)
            assert_same(u8.search(q8.astype(np.float32), 10, nprobe=nprobe), b)
        assert search.calls[0][3] == _lib.IVF_DTYPE_U8 and search.calls[0][2] == q8.ctypes.data
        new = ints(rng, 3, dim, 0, 256, np.uint8)
        u8.update(new, [5, 6, 7])
        f32.update(new.astype(np.float32), [5, 6, 7])
        assert update.calls[0][3] == _lib.IVF_DTYPE_U8
        ids = np.array([5, 6, 7, 100, -9], dtype=np.int64)
        rows, found = u8.get(ids, dtype="uint8")
        assert rows.dtype == np.uint8 and found.tolist() == [True] * 4 + [False]
        np.testing.assert_array_equal(rows[:3], new)
        np.testing.assert_array_equal(rows[3], x8[100])
        assert (rows[4] == 0).all()
        np.testing.assert_array_equal(u8.get(ids, dtype="storage")[0], rows)
        as_f32, _ = f32.get(ids)
        assert as_f32.dtype == np.float32
        np.testing.assert_array_equal(as_f32, rows.astype(np.float32))
        with pytest.raises(ivfgpu.InvalidArgumentError, match="storage type"):
            u8.get(ids, dtype="int8")
        # Strided views of the storage type are copied once, keeping their type.
        strided = np.repeat(q8, 2, axis=0)[::2]
        assert_same(u8.search(strided, 5), u8.search(q8, 5))
        assert search.calls[-2][2] != strided.ctypes.data
        assert search.calls[-2][3] == _lib.IVF_DTYPE_U8
        # Non-integers are refused naming the row; nothing changes.
        before = u8.ntotal
        bad = x8[:4].astype(np.float32)
        bad[2, 3] = 1.5
        with pytest.raises(ivfgpu.InvalidArgumentError, match="row"):
            u8.add(bad)
        assert u8.ntotal == before


def test_float16_arrays_go_zero_copy(spy, rng):
    train, add, search = (spy(n) for n in ("ivf_train_ex", "ivf_add_ex", "ivf_search"))
    x = rng.random((2000, 16), dtype=np.float32).astype(np.float16)
    ix = ivfgpu.Index(16, nlist=8, backend="cpu", storage="f16")
    ix.train(x)
    ix.add(x)
    q = x[:7]  # a C-contiguous view
    d, i = np.empty((7, 3), np.float32), np.empty((7, 3), np.int64)
    ix.search(q, 3, out=(d, i))
    assert train.calls[0][2] == x.ctypes.data and train.calls[0][3] == _lib.IVF_DTYPE_F16
    assert add.calls[0][2] == x.ctypes.data and add.calls[0][3] == _lib.IVF_DTYPE_F16
    assert search.calls[0][2] == q.ctypes.data and search.calls[0][3] == _lib.IVF_DTYPE_F16
    assert (i[:, 0] == np.arange(7)).all() and (d[:, 0] == 0).all()
    rows, found = ix.get(np.arange(5), dtype=np.float16)
    assert rows.dtype == np.float16 and found.all()
    np.testing.assert_array_equal(rows, x[:5])
    # float32 queries are taken too (not converted in Python) and give the same neighbours
    np.testing.assert_array_equal(ix.search(q.astype(np.float32), 3).ids, i)
    assert search.calls[-1][3] == _lib.IVF_DTYPE_F32
    ix.close()


def test_arrays_of_another_type_are_float32_as_before(spy, index, data):
    """An f32 index takes uint8, float16, float64 arrays as before: one copy to float32."""
    search = spy("ivf_search")
    for dt in (np.float16, np.uint8, np.int8, np.float64):
        q = (data[:5] * 100).astype(dt)
        index.search(q, 2)
        assert search.calls[-1][3] == _lib.IVF_DTYPE_F32 and search.calls[-1][2] != q.ctypes.data
    # and an int8 index takes a uint8 array as float32 (the library checks the range)
    ix = ivfgpu.Index(4, nlist=2, backend="cpu", storage="int8")
    ix.train(np.arange(-8, 8, dtype=np.int8).reshape(4, 4))
    with pytest.raises(ivfgpu.InvalidArgumentError, match="row"):
        ix.add(np.full((1, 4), 200, dtype=np.uint8))
    ix.add(np.full((1, 4), 100, dtype=np.uint8))
    assert ix.get([0], dtype="int8")[0].tolist() == [[100] * 4]
    ix.close()


def _bf16_bits(x: np.ndarray) -> np.ndarray:
    """bfloat16 bit patterns of float32 values that bf16 holds exactly."""
    bits = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)
    assert (bits & 0xFFFF == 0).all()
    return (bits >> 16).astype(np.uint16)


def test_bf16_takes_uint16_bit_patterns_with_dtype(spy, rng):
    dim = 8
    x = (rng.integers(-64, 64, size=(800, dim)) / 8).astype(np.float32)  # exact in bf16
    b = _bf16_bits(x)
    q = x[:20]
    add, search = spy("ivf_add_ex"), spy("ivf_search")
    typed = ivfgpu.Index(dim, nlist=8, backend="cpu", storage="bf16")
    plain = ivfgpu.Index(dim, nlist=8, backend="cpu", storage="bf16")
    typed.train(b, dtype="bf16")
    plain.train(x)
    typed.add(b, dtype="bf16")
    plain.add(x)
    assert add.calls[0][2] == b.ctypes.data and add.calls[0][3] == _lib.IVF_DTYPE_BF16
    assert typed.serialize() == plain.serialize()
    assert_same(typed.search(_bf16_bits(q), 5, dtype="bf16", nprobe=8), plain.search(q, 5, nprobe=8))
    assert search.calls[0][3] == _lib.IVF_DTYPE_BF16
    rows, found = typed.get(np.arange(10), dtype="bf16")
    assert rows.dtype == np.uint16 and found.all()
    np.testing.assert_array_equal(rows, b[:10])
    np.testing.assert_array_equal(typed.get(np.arange(10))[0], x[:10])
    # without dtype= a uint16 array is numbers, converted to float32 (as before)
    typed.search(b[:2].astype(np.uint16), 1)
    assert search.calls[-1][3] == _lib.IVF_DTYPE_F32
    with pytest.raises(TypeError, match="uint16"):
        typed.add(x, dtype="bf16")
    with pytest.raises(TypeError, match="uint8"):
        typed.add([[1] * dim], dtype="uint8")
    with pytest.raises(ivfgpu.InvalidArgumentError):  # int8 data for a bf16 index
        typed.add(np.zeros((1, dim), np.int8), dtype="int8")
    typed.close()
    plain.close()


def test_load_and_deserialize_convert_an_f32_index(tmp_path, rng):
    dim = 16
    x = ints(rng, 1000, dim, -128, 128, np.float32)
    ix = ivfgpu.Index(dim, nlist=8, backend="cpu")
    ix.train(x)
    ix.add(x)
    ix.save(tmp_path / "f32.ivf")
    for opened in (ivfgpu.Index.load(tmp_path / "f32.ivf", storage="int8", backend="cpu"),
                   ivfgpu.Index.deserialize(ix.serialize(), storage=np.int8)):
        assert opened.storage == "int8" and opened.ntotal == ix.ntotal
        np.testing.assert_array_equal(opened.get(np.arange(20), dtype="int8")[0],
                                      x[:20].astype(np.int8))
        assert_same(opened.search(x[:30].astype(np.int8), 5, nprobe=8),
                    ix.search(x[:30], 5, nprobe=8))
        # a compact file keeps its type; "f32" and None do not convert back
        blob = opened.serialize()
        assert ivfgpu.Index.deserialize(blob).storage == "int8"
        assert ivfgpu.Index.deserialize(blob, storage="f32").storage == "int8"
        opened.close()
    ix.close()


def test_pickle_keeps_the_storage_type(rng):
    import pickle

    ix = ivfgpu.Index(8, nlist=4, backend="cpu", storage="uint8")
    x = ints(rng, 100, 8, 0, 256, np.uint8)
    ix.train(x)
    ix.add(x)
    again = pickle.loads(pickle.dumps(ix))
    assert again.storage == "uint8"
    assert_same(again.search(x[:5], 3), ix.search(x[:5], 3))


# ------------------------------------------------------------------------------ several parts


@pytest.mark.parametrize("mode", ["split", "replicate", ivfgpu.SHARD_REPLICATE])
def test_shards_equal_one_part(rng, mode):
    """As tests/capi/shards_test.cpp: one trained index, opened on 2 and 3 parts from its bytes
    (the same centroids), the same adds: the results equal the one-part index's."""
    dim = 20
    base = rng.random((6000, dim), dtype=np.float32)
    more = rng.random((3000, dim), dtype=np.float32)
    q = rng.random((200, dim), dtype=np.float32)
    one = ivfgpu.Index(dim, nlist=32, backend="cpu")
    one.train(base)
    trained = one.serialize()
    many = [ivfgpu.Index.deserialize(trained, backend="cpu", shards=g, shard_mode=mode)
            for g in (2, 3)]
    for ix in [one] + many:
        ix.add(base)
        ix.add(more)
    for g, ix in zip((2, 3), many):
        assert ix.shards == g and ix.live_shards == g and ix.ntotal == 9000
        assert ix.info(ivfgpu.INFO_SHARDS) == g and f"shards={g}" in repr(ix)
        for nprobe in (1, 7, 32):
            for k in (1, 10, 100):
                assert_same(ix.search(q, k, nprobe=nprobe), one.search(q, k, nprobe=nprobe))
    # ids work the same
    gone = np.arange(0, 9000, 3)
    removed = one.remove(gone)
    assert removed == 3000
    for ix in many:
        assert ix.remove(gone) == removed and ix.ntotal == one.ntotal
        assert_same(ix.search(q, 10, nprobe=8), one.search(q, 10, nprobe=8))
        vecs, found = ix.get(np.arange(10))
        want, want_found = one.get(np.arange(10))
        np.testing.assert_array_equal(vecs, want)
        np.testing.assert_array_equal(found, want_found)
    # a file of several parts opens on one (and the other way round) with the same results
    back = ivfgpu.Index.deserialize(many[1].serialize(), backend="cpu")
    assert back.shards == 1
    assert_same(back.search(q, 10, nprobe=5), one.search(q, 10, nprobe=5))
    for ix in [one, back] + many:
        ix.close()


def test_shards_at_creation_and_their_limits(rng, tmp_path):
    ix = ivfgpu.Index(8, nlist=4, backend="cpu", shards=2, shard_mode="replicate")
    assert ix.shards == 2 and ix.live_shards == 2
    x = rng.random((400, 8), dtype=np.float32)
    ix.train(x)
    ix.add(x)
    assert ix.ntotal == 400
    ix.save(tmp_path / "two.ivf")
    assert ivfgpu.Index.load(tmp_path / "two.ivf", backend="cpu", shards=3).shards == 3
    with pytest.raises(ivfgpu.InvalidArgumentError, match="SHARDS"):
        ivfgpu.Index(8, shards=0)
    with pytest.raises(ValueError, match="shard_mode"):
        ivfgpu.Index(8, shards=2, shard_mode="mirror")
    with pytest.raises(ivfgpu.InvalidArgumentError, match="SHARD_MODE"):
        ivfgpu.Index(8, shards=2, shard_mode=5)
    ix.close()
    # Compact storage on several parts: the same results as one part holding the same rows.
    xi = rng.integers(0, 256, (400, 8)).astype(np.uint8)
    one = ivfgpu.Index(8, nlist=4, backend="cpu", storage="uint8")
    parts = ivfgpu.Index(8, nlist=4, backend="cpu", shards=2, storage="uint8")
    for index in (one, parts):
        index.train(xi)
        index.add(xi)
    assert parts.storage == "uint8" and parts.ntotal == 400
    assert_same(parts.search(xi[:20], 7, nprobe=4), one.search(xi[:20], 7, nprobe=4))
    one.close()
    parts.close()


# ------------------------------------------------------------------------------ dynamic batching


def test_dynamic_batching_threads_get_their_solo_answers(rng):
    dim = 24
    base = rng.random((8000, dim), dtype=np.float32)
    queries = rng.random((600, dim), dtype=np.float32)
    ix = ivfgpu.Index(dim, nlist=32, backend="cpu", dynamic_batching=True)
    ix.train(base)
    ix.add(base)
    threads, rounds = 16, 6
    # per thread: (first query row, n queries, k, nprobe); few shapes, so that calls meet
    calls = [[(7 * (t * rounds + r) % 590, 1 + (t + r) % 3, (1, 10, 37)[t % 3], 1 + 3 * (r % 2))
              for r in range(rounds)] for t in range(threads)]

    def run(c, window):
        first, n, k, nprobe = c
        return ix.search(queries[first:first + n], k, nprobe=nprobe, batch_window_us=window)

    solo = [[run(c, 0) for c in cs] for cs in calls]
    assert ix.merged_searches == 0
    barrier = threading.Barrier(threads)
    differ, errors = [], []

    def client(t):
        try:
            for r, c in enumerate(calls[t]):
                barrier.wait()
                got = run(c, 20000)  # 20 ms: the threads released together meet
                if not (np.array_equal(got.ids, solo[t][r].ids)
                        and np.array_equal(got.distances, solo[t][r].distances)):
                    differ.append((t, r))
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)
            barrier.abort()

    ts = [threading.Thread(target=client, args=(t,)) for t in range(threads)]
    for th in ts:
        th.start()
    for th in ts:
        th.join()
    assert not errors and not differ
    assert ix.merged_searches > 0 and ix.info(ivfgpu.INFO_MERGED_SEARCHES) == ix.merged_searches
    # the default window and the option off: still the solo answers
    np.testing.assert_array_equal(run(calls[0][0], None).ids, solo[0][0].ids)
    off = ivfgpu.Index.deserialize(ix.serialize(), backend="cpu")
    np.testing.assert_array_equal(off.search(queries[:3], 10, batch_window_us=1000).ids,
                                  ix.search(queries[:3], 10, batch_window_us=0).ids)
    assert off.merged_searches == 0
    with pytest.raises(ivfgpu.InvalidArgumentError, match="BATCH_WINDOW"):
        ix.search(queries[:1], 1, batch_window_us=-1)
    ix.close()
    off.close()


def test_shard_placement_and_merge_are_reported(rng, tmp_path):
    """shard_devices= places parts (ignored on the CPU backend), part_device(p) and
    part_device_memory_bytes(p) report each part, merge_nanoseconds grows with split searches
    and peer_merge is False on the CPU."""
    x = rng.random((2000, 8), dtype=np.float32)
    split = ivfgpu.Index(8, nlist=8, backend="cpu", shards=2, shard_devices=[0, 0])
    split.train(x)
    split.add(x)
    assert split.merge_nanoseconds == 0
    split.search(x[:100], 5)
    assert split.merge_nanoseconds > 0 and split.peer_merge is False
    assert split.fused_searches == 0 and split.graph_searches == 0  # GPU paths only
    assert [split.part_device(p) for p in range(2)] == [-1, -1]
    assert split.part_device_memory_bytes(1) == 0
    with pytest.raises(ivfgpu.InvalidArgumentError):
        split.part_device(2)
    with pytest.raises(ValueError, match="part"):
        split.part_device(4096)
    split.save(tmp_path / "split.ivf")
    back = ivfgpu.Index.load(tmp_path / "split.ivf", backend="cpu", shards=3, shard_devices=[1, 0, 1])
    assert back.shards == 3 and back.ntotal == 2000
    with pytest.raises(ivfgpu.InvalidArgumentError, match="SHARD_DEVICE"):
        ivfgpu.Index(8, shards=2, shard_devices=[-2])
    with pytest.raises(ValueError, match="shard_devices"):
        ivfgpu.Index(8, shards=2, shard_devices=[0] * 1025)
    split.close()
    back.close()
