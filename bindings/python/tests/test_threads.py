"""The GIL is released during C calls (ctypes CDLL functions), searches run from many threads
and give the serial results, a writer can mutate while readers search, and close() waits for
calls in flight."""
from __future__ import annotations

import ctypes
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np

import ivfgpu
from ivfgpu import _lib


def test_every_c_function_releases_the_gil():
    lib = _lib.load()
    assert isinstance(lib, ctypes.CDLL) and not isinstance(lib, ctypes.PyDLL)
    for name in _lib.SIGNATURES:
        fn = getattr(lib, name)
        assert not fn._flags_ & ctypes._FUNCFLAG_PYTHONAPI, name


def test_python_runs_while_a_search_is_in_c(rng):
    # One long search in a worker; the main thread keeps counting meanwhile. Were the GIL held
    # during the C call, the count could not advance between the call's start and end.
    x = rng.random((20000, 64), dtype=np.float32)
    ix = ivfgpu.Index(64, nlist=4, backend="cpu", num_threads=1)
    ix.train(x[:2000])
    ix.add(x)
    q = rng.random((400, 64), dtype=np.float32)
    in_c = threading.Event()
    done = threading.Event()
    real = _lib.load().ivf_search

    def search():
        in_c.set()
        ix.search(q, 10, nprobe=4)
        done.set()

    # iterations per second of the loop below with nothing else running
    rate_n, rate_t0 = 0, time.perf_counter()
    while time.perf_counter() - rate_t0 < 0.02:
        rate_n += 1
    rate = rate_n / (time.perf_counter() - rate_t0)
    t = threading.Thread(target=search)
    t0 = time.perf_counter()
    t.start()
    in_c.wait()
    count = 0
    while not done.is_set():
        count += 1
    t.join()
    elapsed = time.perf_counter() - t0
    assert real is _lib.load().ivf_search
    # A held GIL would leave the loop only the interpreter's switch interval (5 ms) around the
    # call: a few percent of a 50+ ms search. Released, the loop runs most of the time.
    share = count / (rate * elapsed)
    print(f"{count} iterations during a {elapsed:.3f} s search: {share:.0%} of the loop's speed")
    if elapsed > 0.05:
        assert share > 0.15, share


def test_concurrent_searches_equal_serial(index, data):
    queries = [data[i * 50:(i + 1) * 50] + 0.001 for i in range(16)]
    serial = [index.search(q, 8) for q in queries]
    with ThreadPoolExecutor(max_workers=8) as pool:
        parallel = list(pool.map(lambda q: index.search(q, 8), queries))
    for s, p in zip(serial, parallel):
        assert np.array_equal(s.ids, p.ids) and np.array_equal(s.distances, p.distances)


def test_writer_and_readers(data):
    ix = ivfgpu.Index(16, nlist=8, backend="cpu")
    ix.train(data)
    ix.add(data[:1000])
    stop = threading.Event()
    errors = []

    def reader():
        while not stop.is_set():
            try:
                d, i = ix.search(data[:20], 5)
                assert (i >= -1).all()
                n = ix.ntotal
                assert 1000 <= n <= 2000
            except Exception as e:  # surfaced below
                errors.append(e)
                return

    threads = [threading.Thread(target=reader) for _ in range(3)]
    for t in threads:
        t.start()
    for start in range(1000, 2000, 100):
        ix.add(data[start:start + 100])
        ix.remove(np.arange(start, start + 10))
    stop.set()
    for t in threads:
        t.join()
    assert not errors, errors
    assert ix.ntotal == 1000 + 1000 - 100


def test_close_waits_for_calls_in_flight(data):
    ix = ivfgpu.Index(16, nlist=8, backend="cpu")
    ix.train(data)
    ix.add(data)
    started = threading.Event()
    results = []

    def search():
        with ix._h.use("test") as h:  # as a call in flight would
            started.set()
            time.sleep(0.2)
            v = ctypes.c_int64()
            results.append(_lib.load().ivf_ntotal(h, ctypes.byref(v)) == 0 and v.value)

    t = threading.Thread(target=search)
    t.start()
    started.wait()
    ix.close()
    t.join()
    assert results == [2000] and ix.closed
