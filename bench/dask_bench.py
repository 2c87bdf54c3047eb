#!/usr/bin/env python3
"""The Dask layer's cost (issue 16): a DistributedIndex on a LocalCluster of W worker processes
against one in-process ivfgpu.Index with the same centroids, the same rows and as many threads
as the cluster has, searching the same queries. Reports QPS both ways, the layer's overhead,
and the share of the client-side merge (ivfgpu.dask.merge_topk timed on W parts of the shape a
search collects). Both return the same results (checked here on every run).

    IVFGPU_LIBRARY=build/capi/libivfgpu.so PYTHONPATH=bindings/python \\
        /usr/bin/python3 bench/dask_bench.py --n 1000000 --workers 1,2

The data is a clustered Gaussian mixture generated with numpy (not the C++ bench's generator).
"""
import argparse
import json
import statistics
import time

import numpy as np


def mixture(n, dim, centres, seed):
    rng = np.random.default_rng(seed)
    c = rng.standard_normal((centres, dim), dtype=np.float32) * 4.0
    out = np.empty((n, dim), dtype=np.float32)
    step = 1 << 16
    for a in range(0, n, step):
        b = min(n, a + step)
        pick = rng.integers(0, centres, b - a)
        out[a:b] = c[pick] + rng.standard_normal((b - a, dim), dtype=np.float32)
    return out


def median_time(fn, reps):
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=1_000_000)
    ap.add_argument("--dim", type=int, default=128)
    ap.add_argument("--nlist", type=int, default=1024)
    ap.add_argument("--nq", type=int, default=10_000)
    ap.add_argument("--nprobe", type=int, default=16)
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--workers", default="1,2", help="worker process counts, comma-separated")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--json", help="write the rows as JSON")
    a = ap.parse_args()

    import ivfgpu
    from distributed import Client, LocalCluster
    from ivfgpu.dask import DistributedIndex, merge_topk

    x = mixture(a.n, a.dim, 4 * a.nlist, 1)
    q = mixture(a.nq, a.dim, 4 * a.nlist, 2)
    rows = []
    for w in [int(v) for v in a.workers.split(",")]:
        with LocalCluster(n_workers=w, threads_per_worker=1, processes=True, dashboard_address=None) as cluster, \
                Client(cluster) as client:
            t0 = time.perf_counter()
            di = DistributedIndex(client, a.dim, shards=w, nlist=a.nlist, backend="cpu", num_threads=1)
            di.train(x)
            di.add(x)
            build_s = time.perf_counter() - t0
            # One in-process index with the same centroids and rows, as many threads as workers.
            one = ivfgpu.Index.deserialize(di.trained_bytes, backend="cpu", num_threads=w)
            one.add(x)
            d_ref, i_ref = one.search(q, a.k, nprobe=a.nprobe)
            d_dask, i_dask = di.search(q, a.k, nprobe=a.nprobe)
            if not np.allclose(d_ref, d_dask, rtol=1e-5, atol=1e-6):
                raise SystemExit(f"{w} workers: distances differ from the in-process index")
            same_ids = float(np.mean(i_ref == i_dask))
            t_one = median_time(lambda: one.search(q, a.k, nprobe=a.nprobe), a.reps)
            t_dask = median_time(lambda: di.search(q, a.k, nprobe=a.nprobe), a.reps)
            parts = [(d_ref.copy(), i_ref.copy()) for _ in range(w)]
            t_merge = median_time(lambda: merge_topk(parts, a.k, "l2"), a.reps)
            row = dict(workers=w, n=a.n, dim=a.dim, nlist=a.nlist, nq=a.nq, nprobe=a.nprobe, k=a.k,
                       build_s=round(build_s, 2), qps_in_process=round(a.nq / t_one),
                       qps_dask=round(a.nq / t_dask), overhead=round(t_dask / t_one - 1.0, 3),
                       merge_share=round(t_merge / t_dask, 4), same_ids=round(same_ids, 5))
            rows.append(row)
            print(f"{w} worker(s): in-process {row['qps_in_process']} QPS, Dask {row['qps_dask']} QPS "
                  f"(layer {100 * row['overhead']:+.1f}%), merge {100 * row['merge_share']:.2f}% of the Dask "
                  f"search, ids equal {100 * same_ids:.3f}% (the rest: ties), build {build_s:.1f} s", flush=True)
            di.close()
            one.close()
    if a.json:
        with open(a.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
