"""Recall on siftsmall through the Python API (CPU backend), against the bars of the C tests
(tests/capi/recall_test.cpp): nlist 64, k 10, recall@10 >= 0.50 / 0.85 / 0.95 / 0.99 at nprobe
1 / 4 / 8 / 16, and nprobe = nlist finding the ground truth's nearest neighbour."""
from __future__ import annotations

import numpy as np
import pytest

import ivfgpu

from conftest import data_dir


def read_vecs(path, dtype):
    raw = np.fromfile(path, dtype=np.int32)
    dim = int(raw[0])
    return raw.reshape(-1, dim + 1)[:, 1:].copy().view(dtype)


@pytest.fixture(scope="module")
def sift():
    d = data_dir() / "siftsmall"
    if not (d / "siftsmall_base.fvecs").exists():
        pytest.skip(f"SKIPPED LOUDLY: siftsmall not found under {d} "
                    "(set IVFGPU_DATA_DIR to the shared data directory)")
    base = read_vecs(d / "siftsmall_base.fvecs", np.float32)
    queries = read_vecs(d / "siftsmall_query.fvecs", np.float32)
    gt = read_vecs(d / "siftsmall_groundtruth.ivecs", np.int32)
    assert base.shape == (10000, 128) and queries.shape == (100, 128) and gt.shape == (100, 100)
    return base, queries, gt


def recall_at_10(ids, gt):
    return np.mean([len(set(ids[q, :10]) & set(gt[q, :10])) / 10 for q in range(len(ids))])


def test_siftsmall_recall_meets_the_bars(sift):
    base, queries, gt = sift
    with ivfgpu.Index(128, nlist=64, backend="cpu") as ix:
        ix.train(base)
        ix.add(base)
        for nprobe, bar in ((1, 0.50), (4, 0.85), (8, 0.95), (16, 0.99)):
            _, ids = ix.search(queries, 10, nprobe=nprobe)
            r = recall_at_10(ids, gt)
            print(f"siftsmall nlist 64 k 10 nprobe {nprobe:3d} recall@10 {r:.3f} (bar {bar:.2f})")
            assert r >= bar, (nprobe, r)
        d, ids = ix.search(queries, 10, nprobe=64)
        exact = ((queries[:, None, :].astype(np.float64) - base[gt[:, 0]][:, None, :]) ** 2).sum(-1)
        assert np.allclose(d[:, 0], exact[:, 0], rtol=1e-5)  # ties aside, the same nearest
