"""The Python results equal the C library's: the same calls made directly through the raw
ctypes declarations, exact brute force at nprobe = nlist, and the C example program's output."""
from __future__ import annotations

import ctypes
import os
import pathlib
import subprocess

import numpy as np
import pytest

import ivfgpu
from ivfgpu import _lib

from conftest import REPO


def raw_search(data, queries, nlist, nprobe, k, metric):
    """Create, train, add and search with nothing but the C calls."""
    lib = _lib.load()
    p = ctypes.c_void_p()
    assert lib.ivf_params_create(ctypes.byref(p)) == 0
    for key, v in ((_lib.IVF_PARAM_NLIST, nlist), (_lib.IVF_PARAM_NPROBE, nprobe),
                   (_lib.IVF_PARAM_BACKEND, _lib.IVF_BACKEND_CPU), (_lib.IVF_PARAM_METRIC, metric)):
        assert lib.ivf_params_set_int(p, key, v) == 0
    h = ctypes.c_void_p()
    n, dim = data.shape
    assert lib.ivf_create(ctypes.byref(h), dim, p) == 0
    assert lib.ivf_train(h, data.ctypes.data, 0, n, dim) == 0
    assert lib.ivf_add(h, data.ctypes.data, 0, n, dim, None) == 0
    ids = np.empty((len(queries), k), np.int64)
    d = np.empty((len(queries), k), np.float32)
    assert lib.ivf_search(h, None, queries.ctypes.data, 0, len(queries), dim, k, ids.ctypes.data,
                          d.ctypes.data) == 0
    lib.ivf_free(h)
    lib.ivf_params_free(p)
    return d, ids


@pytest.mark.parametrize("metric", ["l2", "ip", "cosine"])
def test_same_as_raw_c_calls(rng, metric):
    data = rng.random((3000, 24), dtype=np.float32)
    q = rng.random((100, 24), dtype=np.float32)
    m = {"l2": 0, "ip": 1, "cosine": 2}[metric]
    rd, ri = raw_search(data, q, 32, 5, 10, m)
    ix = ivfgpu.Index(24, nlist=32, nprobe=5, metric=metric, backend="cpu")
    ix.train(data)
    ix.add(data)
    d, i = ix.search(q, 10)
    assert np.array_equal(i, ri) and np.array_equal(d, rd)


def test_full_probe_equals_brute_force(rng):
    data = rng.random((2000, 8), dtype=np.float32)
    q = rng.random((50, 8), dtype=np.float32)
    ix = ivfgpu.Index(8, nlist=16, backend="cpu")
    ix.train(data)
    ix.add(data)
    d, i = ix.search(q, 5, nprobe=16)
    exact = ((q[:, None, :].astype(np.float64) - data[None, :, :]) ** 2).sum(-1)
    order = np.argsort(exact, axis=1)[:, :5]
    assert np.allclose(d, np.take_along_axis(exact, order, 1), rtol=1e-4, atol=1e-5)
    assert (i == order).mean() > 0.99  # ties aside


def _example_c() -> pathlib.Path:
    env = os.environ.get("IVFGPU_EXAMPLE_C")
    return pathlib.Path(env) if env else REPO / "build" / "examples" / "c" / "example_c"


def test_same_output_as_the_c_example():
    exe = _example_c()
    if not exe.exists():
        pytest.skip(f"the C example is not built ({exe}; set IVFGPU_EXAMPLE_C)")
    libc = ctypes.CDLL(None)
    libc.srand.argtypes = [ctypes.c_uint]
    libc.rand.restype = ctypes.c_int
    libc.srand(1)  # examples/c/example.c: srand(1); data[i] = (float)rand() / (float)RAND_MAX
    r = np.array([libc.rand() for _ in range(2000 * 16)], dtype=np.float32)
    data = (r / np.float32(2147483647)).astype(np.float32).reshape(2000, 16)
    ix = ivfgpu.Index(16, nlist=32, nprobe=4)
    ix.train(data)
    ix.add(data)
    d, i = ix.search(data[:2], 3)
    lines = [f"libivfgpu {ivfgpu.version()}, backend {'CUDA' if ix.backend == 'cuda' else 'CPU'}"]
    for row in range(2):
        lines.append(f"query {row}:" + "".join(
            f"  id {i[row, j]} (d={d[row, j]:.4f})" for j in range(3)))
    env = dict(os.environ)
    env["LD_LIBRARY_PATH"] = os.path.dirname(os.path.abspath(ivfgpu.library_path()))
    out = subprocess.run([str(exe)], capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == lines
