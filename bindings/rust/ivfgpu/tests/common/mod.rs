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

pub fn cpu_params() -> IndexParams {
    IndexParams::new()
        .nlist(NLIST)
        .backend(Backend::CPU)
        .seed(7)
}

/// A trained CPU index holding `generate(N, DIM, 1)` with sequential ids.
pub fn filled_index() -> (Index, Vec<f32>) {
    let data = generate(N, DIM, 1);
    let mut index = Index::new(DIM, &cpu_params()).expect("create");
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
