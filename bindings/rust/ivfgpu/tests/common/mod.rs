//! Shared test data: the same generator as the examples (a 64-bit LCG), and brute force.
#![allow(dead_code)]

use ivfgpu::{Backend, Index, IndexParams};

pub const DIM: usize = 16;
pub const N: usize = 2000;
pub const NLIST: usize = 32;

/// `n * dim` values in [0, 1) from a 64-bit linear congruential generator.
pub fn generate(n: usize, dim: usize, seed: u64) -> Vec<f32> {
    let mut state = seed;
    (0..n * dim)
        .map(|_| {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (state >> 40) as f32 / (1u64 << 24) as f32
        })
        .collect()
}

/// The backend the tests run on: `IVFGPU_TEST_BACKEND` = `cpu` (default), `cuda` or `auto`,
/// so that the same suite checks a GPU-backed index on a machine with a GPU.
pub fn test_backend() -> Backend {
    match std::env::var("IVFGPU_TEST_BACKEND").as_deref() {
        Ok("cuda") => Backend::CUDA,
        Ok("auto") => Backend::AUTO,
        Ok("cpu") | Err(_) => Backend::CPU,
        Ok(other) => panic!("IVFGPU_TEST_BACKEND={other}: expected cpu, cuda or auto"),
    }
}

/// The backend an index on the test backend resolves to.
pub fn resolved_backend() -> Backend {
    let gpus = ivfgpu::cuda_device_count().expect("cuda_device_count");
    match test_backend() {
        Backend::CPU => Backend::CPU,
        Backend::AUTO if gpus == 0 => Backend::CPU,
        _ => Backend::CUDA,
    }
}

/// Build parameters of the test indexes, on the test backend.
pub fn test_params() -> IndexParams {
    IndexParams::new()
        .nlist(NLIST)
        .backend(test_backend())
        .seed(7)
}

/// A trained index (on the test backend) holding `generate(N, DIM, 1)` with sequential ids.
pub fn filled_index() -> (Index, Vec<f32>) {
    let data = generate(N, DIM, 1);
    let index = Index::new(DIM, &test_params()).expect("create");
    index.train(&data).expect("train");
    index.add(&data).expect("add");
    (index, data)
}

pub fn l2(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| (x - y) * (x - y)).sum()
}

/// Exact k nearest neighbours (L2) of `query` among the rows of `data`: (id, distance).
pub fn brute_force(data: &[f32], dim: usize, query: &[f32], k: usize) -> Vec<(i64, f32)> {
    let mut all: Vec<(i64, f32)> = data
        .chunks_exact(dim)
        .enumerate()
        .map(|(i, row)| (i as i64, l2(row, query)))
        .collect();
    all.sort_by(|a, b| a.1.total_cmp(&b.1).then(a.0.cmp(&b.0)));
    all.truncate(k);
    all
}

/// Exact k nearest neighbours (L2) of `query` among the rows of `data` whose id (row `i` has
/// id `ids[i]`) passes `keep`: (id, distance), padded with (NO_ID, +inf) to `k`.
pub fn brute_force_where(
    data: &[f32],
    ids: &[i64],
    dim: usize,
    query: &[f32],
    k: usize,
    keep: impl Fn(i64) -> bool,
) -> Vec<(i64, f32)> {
    let mut all: Vec<(i64, f32)> = data
        .chunks_exact(dim)
        .zip(ids)
        .filter(|(_, &id)| keep(id))
        .map(|(row, &id)| (id, l2(row, query)))
        .collect();
    all.sort_by(|a, b| a.1.total_cmp(&b.1).then(a.0.cmp(&b.0)));
    all.resize(k, (ivfgpu::NO_ID, f32::INFINITY));
    all
}

/// Checks a search result against expected (id, distance) rows.
pub fn assert_rows(result: &ivfgpu::SearchResult, expected: &[Vec<(i64, f32)>]) {
    assert_eq!(result.len(), expected.len());
    for (q, ((ids, dists), want)) in result.rows().zip(expected).enumerate() {
        let want_ids: Vec<i64> = want.iter().map(|e| e.0).collect();
        assert_eq!(ids, &want_ids[..], "query {q}");
        for (d, e) in dists.iter().zip(want) {
            assert!(
                d == &e.1 || (d - e.1).abs() <= 1e-4 * (1.0 + e.1.abs()),
                "query {q}: distance {d} vs {}",
                e.1
            );
        }
    }
}
