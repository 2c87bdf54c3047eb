"""progress= and cancellation: reports from 0 to 1, False cancels (CancelledError, nothing
changed), an exception of the callable propagates, and Ctrl-C (SIGINT) cancels a call in
flight with KeyboardInterrupt."""
from __future__ import annotations

import os
import signal
import threading
import time

import numpy as np
import pytest

import ivfgpu


def recorder(reports):
    def progress(stage, fraction):
        reports.append((stage, fraction))
    return progress


def check_reports(reports, stage):
    assert len(reports) >= 2, reports
    assert all(s == stage and s == ivfgpu.Stage[stage.upper()] for s, _ in reports), reports
    assert all(isinstance(s, ivfgpu.Stage) for s, _ in reports)
    fractions = [f for _, f in reports]
    assert fractions[0] == 0.0 and fractions[-1] == 1.0, fractions
    assert fractions == sorted(fractions), fractions


def test_every_call_reports_from_zero_to_one(data, tmp_path):
    ix = ivfgpu.Index(16, nlist=16, backend="cpu")
    r = []
    ix.train(data, progress=recorder(r))
    check_reports(r, "train")
    r.clear()
    ix.add(data, progress=recorder(r))
    check_reports(r, "add")
    r.clear()
    ix.add(data, np.arange(5000, 7000), progress=recorder(r))
    check_reports(r, "add")
    assert ix.ntotal == 4000

    r.clear()
    got = ix.search(data[:5], 4, nprobe=16, progress=recorder(r))
    check_reports(r, "search")
    want = ix.search(data[:5], 4, nprobe=16)
    np.testing.assert_array_equal(got.ids, want.ids)
    r.clear()
    ix.search(data[:5], 4, progress=recorder(r))  # no other parameters
    check_reports(r, "search")

    r.clear()
    copy = ivfgpu.Index.deserialize(ix.serialize(), backend="cpu", progress=recorder(r))
    check_reports(r, "load")
    assert copy.ntotal == 4000
    path = tmp_path / "ix.ivf"
    ix.save(path)
    r.clear()
    loaded = ivfgpu.Index.load(path, backend="cpu", progress=recorder(r))
    check_reports(r, "load")
    assert loaded.ntotal == 4000
    assert str(ivfgpu.Stage.LOAD) == "load" and ivfgpu.Stage.SEARCH == 4


def test_false_cancels_and_changes_nothing(data, tmp_path):
    ix = ivfgpu.Index(16, nlist=16, backend="cpu")
    for at in (0.0, 1.0):  # the first report, and the last one (before publishing)
        stop = lambda s, f, at=at: f < at  # noqa: E731
        with pytest.raises(ivfgpu.CancelledError) as info:
            ix.train(data, progress=stop)
        assert info.value.status == -13 and "cancelled" in str(info.value)
        assert not ix.is_trained and ix.state_version == 0
    ix.train(data, progress=lambda s, f: True)  # True and None continue
    version = ix.state_version
    for at in (0.0, 1.0):
        with pytest.raises(ivfgpu.CancelledError):
            ix.add(data, progress=lambda s, f, at=at: f < at)
        with pytest.raises(ivfgpu.CancelledError):
            ix.add(data, np.arange(2000), progress=lambda s, f, at=at: f < at)
    assert ix.ntotal == 0 and ix.state_version == version
    ix.add(data)
    with pytest.raises(ivfgpu.CancelledError):
        ix.search(data[:3], 2, progress=lambda s, f: False)
    with pytest.raises(ivfgpu.CancelledError):
        ix.search(data[:3], 2, filter=ivfgpu.Filter([1, 2]), progress=lambda s, f: 0)
    with pytest.raises(ivfgpu.CancelledError):
        ivfgpu.Index.deserialize(ix.serialize(), backend="cpu", progress=lambda s, f: f < 1)
    ix.save(tmp_path / "ix.ivf")
    with pytest.raises(ivfgpu.CancelledError):
        ivfgpu.Index.load(tmp_path / "ix.ivf", backend="cpu", progress=lambda s, f: False)
    assert ix.ntotal == 2000 and ix.search(data[:1], 1).ids[0, 0] == 0
    with pytest.raises(TypeError):
        ix.search(data[:1], 1, progress=42)


def test_an_exception_of_the_callable_propagates(data):
    ix = ivfgpu.Index(16, nlist=16, backend="cpu")
    ix.train(data)
    boom = ValueError("boom")
    calls = []

    def progress(stage, fraction):
        calls.append(fraction)
        if fraction >= 1.0:
            raise boom

    with pytest.raises(ValueError) as info:
        ix.add(data, progress=progress)
    assert info.value is boom
    assert calls[-1] == 1.0 and calls.count(1.0) == 1  # not called again once it raised
    assert ix.ntotal == 0
    with pytest.raises(ZeroDivisionError):
        ix.train(data, progress=lambda s, f: 1 / 0)
    ix.add(data)
    assert ix.ntotal == 2000


def test_the_callable_may_read_the_index(index, data):
    seen = []

    def progress(stage, fraction):
        seen.append(index.ntotal)
        index.search(data[:1], 1, progress=lambda s, f: None)  # a nested call

    index.add(data[:10], progress=progress)
    assert seen and all(n == 2000 for n in seen)  # not published while it runs
    assert index.ntotal == 2010


def default_sigint():
    if signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
        pytest.skip("SIGINT does not have Python's default handler here")
    if threading.current_thread() is not threading.main_thread():
        pytest.skip("not on the main thread")


def test_keyboard_interrupt_from_the_callable_cancels(data):
    ix = ivfgpu.Index(16, nlist=16, backend="cpu")
    ix.train(data)

    def progress(stage, fraction):
        if fraction >= 1.0:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        ix.add(data, progress=progress)
    assert ix.ntotal == 0


def test_sigint_inside_the_callable_cancels(data):
    default_sigint()
    ix = ivfgpu.Index(16, nlist=16, backend="cpu")
    ix.train(data)
    reports = []

    def progress(stage, fraction):
        reports.append(fraction)
        if fraction == 0.0:
            os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C

    with pytest.raises(KeyboardInterrupt):
        ix.add(data, progress=progress)
    assert ix.ntotal == 0 and reports == [0.0]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # put back
    ix.add(data)
    assert ix.ntotal == 2000


def slow_training():
    """An index and data whose training runs for seconds on one CPU thread."""
    x = np.random.default_rng(3).random((60000, 32), dtype=np.float32)
    return ivfgpu.Index(32, nlist=256, backend="cpu", kmeans_iters=500, num_threads=1), x


@pytest.mark.parametrize("with_progress", [False, True])
def test_ctrl_c_while_the_library_runs_cancels(with_progress):
    """SIGINT from another thread while the main thread is inside the C call (the GIL
    released): without care Python would raise KeyboardInterrupt at the first bytecode of the
    ctypes callback, where ctypes drops it; the call must instead be cancelled and raise."""
    default_sigint()
    ix, x = slow_training()
    started = threading.Event()
    reports = []

    def progress(stage, fraction):
        reports.append(fraction)
        started.set()

    def ctrl_c():
        if with_progress:
            started.wait(60)
        else:
            time.sleep(0.2)
        os.kill(os.getpid(), signal.SIGINT)

    killer = threading.Thread(target=ctrl_c)
    killer.start()
    t0 = time.monotonic()
    try:
        with pytest.raises(KeyboardInterrupt):
            ix.train(x, progress=progress if with_progress else None)
    finally:
        killer.join()
    assert time.monotonic() - t0 < 30
    assert not ix.is_trained and ix.state_version == 0
    if with_progress:
        assert reports[0] == 0.0 and reports[-1] < 1.0
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_other_threads_and_custom_handlers_are_left_alone(data):
    default_sigint()
    ix = ivfgpu.Index(16, nlist=16, backend="cpu")
    handlers = []

    def in_thread():
        ix.train(data, progress=lambda s, f: handlers.append(signal.getsignal(signal.SIGINT)))

    t = threading.Thread(target=in_thread)
    t.start()
    t.join()
    assert ix.is_trained and handlers
    assert all(h is signal.default_int_handler for h in handlers)

    def custom(signum, frame):
        pass

    old = signal.signal(signal.SIGINT, custom)
    try:
        ix.add(data, progress=lambda s, f: handlers.append(signal.getsignal(signal.SIGINT)))
        assert handlers[-1] is custom and signal.getsignal(signal.SIGINT) is custom
    finally:
        signal.signal(signal.SIGINT, old)
    assert ix.ntotal == 2000
