//! The smallest useful libivfgpu program, in Rust: build an index on generated data, search
//! it, print the neighbours. The same program as examples/go (identical output) and
//! examples/c. Built with `-D warnings` in CI.

use std::process::ExitCode;

use ivfgpu::{Backend, Index, IndexParams};

const DIM: usize = 16;
const N: usize = 2000;
const K: usize = 3;

/// `n * dim` values in [0, 1) from a 64-bit linear congruential generator (the same in every
/// language's example, so that their outputs can be compared).
fn generate(n: usize, dim: usize, seed: u64) -> Vec<f32> {
    let mut state = seed;
    (0..n * dim)
        .map(|_| {
            state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            (state >> 40) as f32 / (1u64 << 24) as f32
        })
        .collect()
}

fn run() -> Result<bool, ivfgpu::Error> {
    let data = generate(N, DIM, 1);
    let index = Index::new(DIM, &IndexParams::new().nlist(32).nprobe(4))?;
    index.train(&data)?;
    index.add(&data)?;

    // Query with the first two stored vectors: each finds itself first, at distance 0.
    let result = index.search(&data[..2 * DIM], K)?;
    let backend = if index.backend()? == Backend::CUDA { "CUDA" } else { "CPU" };
    println!("libivfgpu {}, backend {backend}", ivfgpu::version());
    for (i, (ids, dists)) in result.rows().enumerate() {
        print!("query {i}:");
        for (id, d) in ids.iter().zip(dists) {
            print!("  id {id} (d={d:.4})");
        }
        println!();
    }

    Ok(result.row(0).0[0] == 0 && result.row(1).0[0] == 1)
}

fn main() -> ExitCode {
    match run() {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => {
            eprintln!("a stored vector did not find itself");
            ExitCode::from(2)
        }
        Err(e) => {
            // Display gives the status, its code and the library's message.
            eprintln!("{e}");
            ExitCode::FAILURE
        }
    }
}
