//! Results against known neighbours (exact brute force), padding, ids, parameters.

mod common;

use common::*;
use ivfgpu::{Backend, Index, IndexParams, Metric, SearchParams, NO_ID};

#[test]
fn exact_search_matches_brute_force() {
    let (index, data) = filled_index();
    assert_eq!(index.ntotal().unwrap(), N);
    assert_eq!(index.nlist().unwrap(), NLIST);
    assert_eq!(index.backend().unwrap(), resolved_backend());
    assert_eq!(index.metric().unwrap(), Metric::L2);
    let on_cpu = resolved_backend() == Backend::CPU;
    assert_eq!(index.device().unwrap(), if on_cpu { None } else { Some(0) });
    assert!(index.is_trained().unwrap());

    let queries = generate(20, DIM, 99);
    let k = 10;
    // Probing every list makes IVF search exact.
    let result = index
        .search_with(&queries, k, &SearchParams::new().nprobe(NLIST))
        .unwrap();
    assert_eq!((result.len(), result.k()), (20, k));
    for (q, (ids, dists)) in queries.chunks_exact(DIM).zip(result.rows()) {
        let expected = brute_force(&data, DIM, q, k);
        let expected_ids: Vec<i64> = expected.iter().map(|e| e.0).collect();
        assert_eq!(ids, &expected_ids[..]);
        for (d, e) in dists.iter().zip(&expected) {
            assert!((d - e.1).abs() <= 1e-4 * (1.0 + e.1), "{d} vs {}", e.1);
        }
    }
}

#[test]
fn stored_vectors_find_themselves() {
    let (index, data) = filled_index();
    let result = index.search(&data[..5 * DIM], 3).unwrap();
    for (i, (ids, dists)) in result.rows().enumerate() {
        assert_eq!(ids[0], i as i64);
        assert!(dists[0].abs() <= 1e-5, "distance to itself {}", dists[0]);
        assert!(
            dists[0] <= dists[1] && dists[1] <= dists[2],
            "sorted, best first"
        );
    }
}

#[test]
fn search_into_fills_caller_slices_like_search() {
    let (index, _) = filled_index();
    let queries = generate(7, DIM, 5);
    let k = 4;
    let mut ids = vec![0i64; 7 * k];
    let mut dists = vec![0f32; 7 * k];
    index
        .search_into(&queries, k, &mut ids, &mut dists)
        .unwrap();
    let result = index.search(&queries, k).unwrap();
    assert_eq!(result.ids(), &ids[..]);
    assert_eq!(result.distances(), &dists[..]);
    let (ids2, dists2) = result.into_parts();
    assert_eq!((ids2, dists2), (ids, dists));
}

#[test]
fn caller_ids_come_back() {
    let data = generate(N, DIM, 1);
    let ids: Vec<i64> = (0..N as i64).map(|i| 1_000_000 + 3 * i).collect();
    let index = Index::new(DIM, &test_params()).unwrap();
    index.train(&data).unwrap();
    index.add_with_ids(&data, &ids).unwrap();
    let result = index.search(&data[10 * DIM..11 * DIM], 1).unwrap();
    assert_eq!(result.ids(), &[1_000_030]);
}

#[test]
fn short_rows_are_padded() {
    let data = generate(64, 4, 3);
    let index = Index::new(
        4,
        &IndexParams::new()
            .nlist(2)
            .backend(test_backend())
            .nprobe(2),
    )
    .unwrap();
    index.train(&data).unwrap();
    index.add(&data[..3 * 4]).unwrap(); // three vectors only
    let result = index.search(&data[..4], 5).unwrap();
    let (ids, dists) = result.row(0);
    assert_eq!(ids[0], 0);
    assert_eq!(&ids[3..], &[NO_ID, NO_ID]);
    assert!(dists[3..].iter().all(|d| *d == f32::INFINITY));
}

#[test]
fn inner_product_ranks_largest_first() {
    let data = generate(500, 8, 11);
    let params = IndexParams::new()
        .nlist(8)
        .metric(Metric::INNER_PRODUCT)
        .backend(test_backend());
    let index = Index::new(8, &params).unwrap();
    index.train(&data).unwrap();
    index.add(&data).unwrap();
    assert_eq!(index.metric().unwrap(), Metric::INNER_PRODUCT);
    let q = [1.0f32; 8];
    let result = index
        .search_with(&q, 5, &SearchParams::new().nprobe(8))
        .unwrap();
    let best = data
        .chunks_exact(8)
        .enumerate()
        .max_by(|a, b| a.1.iter().sum::<f32>().total_cmp(&b.1.iter().sum::<f32>()))
        .unwrap()
        .0;
    assert_eq!(result.ids()[0], best as i64);
    assert!(result.distances().windows(2).all(|w| w[0] >= w[1]));
}

#[test]
fn reset_empties_and_keeps_training() {
    let (index, data) = filled_index();
    index.reset().unwrap();
    assert_eq!(index.ntotal().unwrap(), 0);
    assert!(index.is_trained().unwrap());
    let result = index.search(&data[..DIM], 2).unwrap();
    assert_eq!(result.ids(), &[NO_ID, NO_ID]);
    index.add(&data).unwrap();
    assert_eq!(index.ntotal().unwrap(), N);
}

#[test]
fn default_nprobe_comes_from_build_params() {
    let index = Index::new(DIM, &test_params().nprobe(5)).unwrap();
    assert_eq!(index.nprobe().unwrap(), 5);
    assert_eq!(index.dim(), DIM);
}

/// IVF_PARAM_DEVICE_BUDGET is accepted by create, deserialize and load. On the CPU backend
/// (forced here, whatever the test backend) the budget has nothing to limit: the host-tier
/// properties read 0 and results are those of an index without a budget.
#[test]
fn device_budget_is_accepted_on_the_cpu() {
    let budget = 1u64 << 30;
    let params = test_params().backend(Backend::CPU).device_budget(budget);
    let data = generate(N, DIM, 1);
    let index = Index::new(DIM, &params).unwrap();
    index.train(&data).unwrap();
    index.add(&data).unwrap();
    let queries = &data[..3 * DIM];
    let result = index.search(queries, 5).unwrap();
    for (i, (ids, _)) in result.rows().enumerate() {
        assert_eq!(ids[0], i as i64);
    }
    let tier = |ix: &Index| {
        [
            ix.device_budget().unwrap(),
            ix.resident_lists().unwrap() as u64,
            ix.resident_bytes().unwrap(),
            ix.host_tier_bytes().unwrap(),
            ix.cache_hits().unwrap(),
            ix.cache_misses().unwrap(),
            ix.streamed_bytes().unwrap(),
        ]
    };
    assert_eq!(tier(&index), [0; 7]);

    let bytes = index.serialize().unwrap();
    let open_params = IndexParams::new()
        .backend(Backend::CPU)
        .device_budget(budget);
    let opened = Index::deserialize(&bytes, &open_params).unwrap();
    assert_eq!(opened.ntotal().unwrap(), N);
    assert_eq!(opened.search(queries, 5).unwrap(), result);
    assert_eq!(tier(&opened), [0; 7]);

    let path = std::env::temp_dir().join(format!("ivfgpu-rs-budget-{}.ivf", std::process::id()));
    index.save(&path).unwrap();
    let loaded = Index::load(&path, &open_params);
    std::fs::remove_file(&path).unwrap();
    let loaded = loaded.unwrap();
    assert_eq!(loaded.search(queries, 5).unwrap(), result);
    assert_eq!(tier(&loaded), [0; 7]);
}

/// Save/load, serialize/deserialize and the FAISS format give back an index with the same
/// results; damaged bytes and missing files give typed errors.
#[test]
fn persistence_round_trips() {
    let (index, data) = filled_index();
    let queries = &data[..3 * DIM];
    let before = index.search(queries, 5).unwrap();

    let bytes = index.serialize().unwrap();
    let copy = Index::deserialize(&bytes, &test_params()).unwrap();
    assert_eq!(copy.dim(), DIM);
    assert_eq!(copy.search(queries, 5).unwrap(), before);

    let dir = std::env::temp_dir().join(format!("ivfgpu-rs-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for faiss in [false, true] {
        let path = dir.join(if faiss { "index.faiss" } else { "index.ivf" });
        if faiss {
            index.save_faiss(&path).unwrap();
        } else {
            index.save(&path).unwrap();
        }
        let loaded = Index::load(&path, &IndexParams::new().backend(test_backend())).unwrap();
        assert_eq!(loaded.ntotal().unwrap(), N);
        assert_eq!(loaded.nlist().unwrap(), NLIST);
        assert_eq!(
            loaded.search(queries, 5).unwrap(),
            before,
            "faiss = {faiss}"
        );
    }

    let err = Index::load(dir.join("missing"), &IndexParams::new()).unwrap_err();
    assert_eq!(err.kind(), ivfgpu::ErrorKind::Io, "{err}");
    std::fs::remove_dir_all(&dir).unwrap();

    let mut damaged = bytes.clone();
    let middle = damaged.len() / 2;
    damaged[middle] ^= 0x40;
    let err = Index::deserialize(&damaged, &IndexParams::new()).unwrap_err();
    assert_eq!(err.kind(), ivfgpu::ErrorKind::CorruptData, "{err}");
    let err = Index::deserialize(&bytes[..bytes.len() / 3], &IndexParams::new()).unwrap_err();
    assert_eq!(err.kind(), ivfgpu::ErrorKind::CorruptData, "{err}");
    let err = Index::deserialize(&[], &IndexParams::new()).unwrap_err();
    assert!(
        matches!(
            err.kind(),
            ivfgpu::ErrorKind::CorruptData | ivfgpu::ErrorKind::InvalidArgument
        ),
        "{err}"
    );
}

#[test]
fn faiss_has_no_cosine_index() {
    let data = generate(256, 4, 2);
    let params = IndexParams::new()
        .nlist(4)
        .metric(Metric::COSINE)
        .backend(test_backend());
    let index = Index::new(4, &params).unwrap();
    index.train(&data).unwrap();
    let path = std::env::temp_dir().join(format!("ivfgpu-rs-cos-{}.faiss", std::process::id()));
    let err = index.save_faiss(&path).unwrap_err();
    assert_eq!(err.kind(), ivfgpu::ErrorKind::Unsupported, "{err}");
    assert!(!path.exists(), "a refused save leaves no file");
}

#[test]
fn library_versions() {
    assert_eq!(ivfgpu::abi_version(), ivfgpu::ABI_VERSION);
    assert_eq!(ivfgpu::version().split('.').count(), 3);
    let _ = ivfgpu::cuda_device_count().unwrap();
}

/// On a machine with a GPU (and a CUDA build): the CUDA backend gives the CPU's exact results.
#[test]
fn cuda_backend_matches_cpu_when_a_gpu_exists() {
    if ivfgpu::cuda_device_count().unwrap() == 0 {
        eprintln!("no CUDA device: skipped");
        return;
    }
    let data = generate(N, DIM, 1);
    let mut cpu = Index::new(DIM, &test_params().backend(Backend::CPU)).unwrap();
    let mut gpu = Index::new(DIM, &test_params().backend(Backend::CUDA)).unwrap();
    assert_eq!(gpu.backend().unwrap(), Backend::CUDA);
    assert_eq!(gpu.device().unwrap(), Some(0));
    for index in [&mut cpu, &mut gpu] {
        index.train(&data).unwrap();
        index.add(&data).unwrap();
    }
    let queries = generate(30, DIM, 4);
    let exact = SearchParams::new().nprobe(NLIST);
    let (c, g) = (
        cpu.search_with(&queries, 10, &exact).unwrap(),
        gpu.search_with(&queries, 10, &exact).unwrap(),
    );
    for ((ci, cd), (gi, gd)) in c.rows().zip(g.rows()) {
        // Exact search on both: the same neighbours (ties aside) at the same distances.
        let same = ci.iter().zip(gi).filter(|(a, b)| a == b).count();
        assert!(same >= 9, "{ci:?} vs {gi:?}");
        for (x, y) in cd.iter().zip(gd) {
            assert!((x - y).abs() <= 1e-3 * (1.0 + x.abs()), "{x} vs {y}");
        }
    }
}

/// Each successful mutation publishes one new state; a refused one publishes nothing. The
/// CPU backend keeps no device pool.
#[test]
fn state_version_counts_successful_mutations() {
    let data = generate(N, DIM, 1);
    let index = Index::new(DIM, &test_params()).unwrap();
    assert_eq!(index.state_version().unwrap(), 0);
    index.train(&data).unwrap();
    assert_eq!(index.state_version().unwrap(), 1);
    index.add(&data[..10 * DIM]).unwrap();
    assert_eq!(index.state_version().unwrap(), 2);
    let mut bad = data[..DIM].to_vec();
    bad[0] = f32::NAN;
    index.add(&bad).unwrap_err();
    index.train(&data).unwrap_err(); // holds vectors
    assert_eq!(
        index.state_version().unwrap(),
        2,
        "failed mutations publish nothing"
    );
    index.search(&data[..DIM], 1).unwrap();
    assert_eq!(index.state_version().unwrap(), 2, "a search is no mutation");
    index.reset().unwrap();
    assert_eq!(index.state_version().unwrap(), 3);
    if resolved_backend() == Backend::CPU {
        assert_eq!(index.pool_bytes().unwrap(), 0);
    } else {
        index.pool_bytes().unwrap();
    }
}

/// Device-memory input is for CUDA indexes: a CPU index refuses it before reading the pointer.
#[test]
fn device_memory_input_needs_a_cuda_index() {
    if resolved_backend() != Backend::CPU {
        return;
    }
    let data = generate(N, DIM, 1);
    let index = Index::new(DIM, &test_params()).unwrap();
    // SAFETY: a CPU index refuses device memory in its argument checks, before any read; the
    // pointer is a valid host pointer anyway.
    let err = unsafe { index.train_device(data.as_ptr(), N, core::ptr::null_mut()) }.unwrap_err();
    assert_eq!(err.kind(), ivfgpu::ErrorKind::InvalidArgument, "{err}");
    index.train(&data).unwrap();
    let err =
        unsafe { index.add_device(data.as_ptr(), N, core::ptr::null(), core::ptr::null_mut()) }
            .unwrap_err();
    assert_eq!(err.kind(), ivfgpu::ErrorKind::InvalidArgument, "{err}");
    assert_eq!(index.ntotal().unwrap(), 0);
}
