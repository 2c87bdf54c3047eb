//! Storage types (typed rows), several parts and dynamic batching through the safe API.

mod common;

use std::sync::{Arc, Barrier};
use std::time::Duration;

use common::{generate, resolved_backend, test_backend, test_params, DIM, NLIST};
use ivfgpu::{
    Backend, Bf16, ErrorKind, Index, IndexParams, SearchParams, SearchResult, ShardMode,
    StorageType,
};

/// Distances equal; ids equal except among equal distances.
fn assert_same(a: &SearchResult, b: &SearchResult, what: &str) {
    assert_eq!(a.k(), b.k(), "{what}");
    assert_eq!(a.distances(), b.distances(), "{what}: distances");
    for (i, (x, y)) in a.ids().iter().zip(b.ids()).enumerate() {
        if x != y {
            let row = i / a.k();
            let (_, d) = a.row(row);
            let ties = d.iter().filter(|&&v| v == a.distances()[i]).count();
            assert!(ties > 1, "{what}: entry {i}: id {x} != {y} with no tie");
        }
    }
}

/// `n * dim` values in [0, 256) as u8.
fn bytes(n: usize, dim: usize, seed: u64) -> Vec<u8> {
    generate(n, dim, seed)
        .into_iter()
        .map(|v| (v * 256.0) as u8)
        .collect()
}

fn cpu(storage: StorageType) -> IndexParams {
    IndexParams::new()
        .nlist(16)
        .backend(Backend::CPU)
        .storage_type(storage)
}

#[test]
fn u8_rows_equal_the_same_values_as_f32() {
    let x = bytes(3000, DIM, 11);
    let q = bytes(40, DIM, 12);
    let xf: Vec<f32> = x.iter().map(|&v| f32::from(v)).collect();
    let qf: Vec<f32> = q.iter().map(|&v| f32::from(v)).collect();
    let typed = Index::new(DIM, &cpu(StorageType::U8)).unwrap();
    let plain = Index::new(DIM, &cpu(StorageType::U8)).unwrap();
    typed.train_typed(&x).unwrap();
    typed.add_typed(&x).unwrap();
    plain.train(&xf).unwrap();
    plain.add(&xf).unwrap();
    assert_eq!(typed.storage_type().unwrap(), StorageType::U8);
    assert_eq!(typed.serialize().unwrap(), plain.serialize().unwrap());
    for nprobe in [1, 4, 16] {
        let sp = SearchParams::new().nprobe(nprobe);
        let want = plain.search_with(&qf, 10, &sp).unwrap();
        assert_same(
            &typed.search_typed(&q, 10, &sp).unwrap(),
            &want,
            "u8 queries",
        );
        assert_same(
            &typed.search_with(&qf, 10, &sp).unwrap(),
            &want,
            "f32 queries",
        );
        let mut ids = vec![0i64; 40 * 10];
        let mut d = vec![0f32; 40 * 10];
        typed
            .search_into_typed(&q, 10, &mut ids, &mut d, &sp)
            .unwrap();
        assert_eq!(ids.len(), want.ids().len());
        assert_eq!(d, want.distances());
    }
    let fresh = bytes(2, DIM, 13);
    typed.update_typed(&fresh, &[5, 6]).unwrap();
    typed.add_with_ids_typed(&fresh[..DIM], &[77_777]).unwrap();
    let got = typed.get_typed::<u8>(&[5, 6, 7, 77_777, 99_999]).unwrap();
    assert_eq!(got.get(0), Some(&fresh[..DIM]));
    assert_eq!(got.get(1), Some(&fresh[DIM..]));
    assert_eq!(got.get(2), Some(&x[7 * DIM..8 * DIM]));
    assert_eq!(got.get(3), Some(&fresh[..DIM]));
    assert_eq!(got.get(4), None);
    assert_eq!(got.found(), &[true, true, true, true, false]);
    let as_f32 = typed.get(&[7]).unwrap();
    assert_eq!(as_f32.get(0).unwrap(), &xf[7 * DIM..8 * DIM]);
    // neither f32 nor the storage type: refused, nothing changes
    let n = typed.ntotal().unwrap();
    assert_eq!(
        typed.get_typed::<i8>(&[7]).unwrap_err().kind(),
        ErrorKind::InvalidArgument
    );
    assert_eq!(
        typed.add_typed(&[0i8; DIM]).unwrap_err().kind(),
        ErrorKind::InvalidArgument
    );
    let mut bad = xf[..DIM].to_vec();
    bad[3] = 0.5; // no u8 value
    let err = typed.add(&bad).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{err}");
    assert_eq!(typed.ntotal().unwrap(), n);
    // the binding's length checks hold for every type
    assert_eq!(
        typed.add_typed(&[0u8; DIM + 1]).unwrap_err().kind(),
        ErrorKind::InvalidArgument
    );
}

#[test]
fn i8_and_bf16_rows() {
    let x: Vec<i8> = bytes(1000, DIM, 21)
        .into_iter()
        .map(|v| (i16::from(v) - 128) as i8)
        .collect();
    let index = Index::new(DIM, &cpu(StorageType::I8)).unwrap();
    index.train_typed(&x).unwrap();
    index.add_typed(&x).unwrap();
    let found = index
        .search_typed(&x[..5 * DIM], 1, &SearchParams::new().nprobe(16))
        .unwrap();
    assert_eq!(found.ids(), &[0, 1, 2, 3, 4]);
    assert_eq!(found.distances(), &[0.0; 5]);
    assert_eq!(
        index.get_typed::<i8>(&[3]).unwrap().get(0),
        Some(&x[3 * DIM..4 * DIM])
    );

    // bf16: rows as bits (values exact in bf16), and the same values as f32
    let xf: Vec<f32> = generate(800, DIM, 22)
        .into_iter()
        .map(|v| ((v * 64.0) as i32 - 32) as f32 / 8.0)
        .collect();
    let bits: Vec<u16> = xf
        .iter()
        .map(|v| {
            assert_eq!(v.to_bits() & 0xFFFF, 0);
            (v.to_bits() >> 16) as u16
        })
        .collect();
    let rows = Bf16::from_bits_slice(&bits);
    assert_eq!(rows[5].to_f32(), xf[5]);
    let typed = Index::new(DIM, &cpu(StorageType::BF16)).unwrap();
    let plain = Index::new(DIM, &cpu(StorageType::BF16)).unwrap();
    typed.train_typed(rows).unwrap();
    typed.add_typed(rows).unwrap();
    plain.train(&xf).unwrap();
    plain.add(&xf).unwrap();
    assert_eq!(typed.serialize().unwrap(), plain.serialize().unwrap());
    let sp = SearchParams::new().nprobe(16);
    assert_same(
        &typed.search_typed(&rows[..20 * DIM], 5, &sp).unwrap(),
        &plain.search_with(&xf[..20 * DIM], 5, &sp).unwrap(),
        "bf16",
    );
    let back = typed.get_typed::<Bf16>(&[0, 1]).unwrap();
    assert_eq!(back.data(), &rows[..2 * DIM]);
    assert_eq!(typed.storage_type().unwrap(), StorageType::BF16);

    // f16 takes f32 rows; AUTO picks what it picks for f32; cosine needs a floating type
    let f16 = Index::new(
        DIM,
        &IndexParams::new().nlist(4).storage_type(StorageType::F16),
    )
    .unwrap();
    let plain = Index::new(DIM, &IndexParams::new().nlist(4)).unwrap();
    assert_eq!(f16.backend().unwrap(), plain.backend().unwrap());
    let data = generate(200, DIM, 23);
    f16.train(&data).unwrap();
    f16.add(&data).unwrap();
    assert_eq!(
        f16.search_with(&data[..DIM], 1, &SearchParams::new().nprobe(4))
            .unwrap()
            .ids(),
        &[0]
    );
    let err = Index::new(DIM, &cpu(StorageType::U8).metric(ivfgpu::Metric::COSINE)).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Unsupported, "{err}");
    let err = Index::new(DIM, &cpu(StorageType::from_raw(7))).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{err}");
}

#[test]
fn deserialize_converts_f32_rows() {
    let x = bytes(800, DIM, 31);
    let xf: Vec<f32> = x.iter().map(|&v| f32::from(v)).collect();
    let f = Index::new(DIM, &cpu(StorageType::F32)).unwrap();
    f.train(&xf).unwrap();
    f.add(&xf).unwrap();
    let u = Index::deserialize(
        &f.serialize().unwrap(),
        &IndexParams::new()
            .backend(Backend::CPU)
            .storage_type(StorageType::U8),
    )
    .unwrap();
    assert_eq!(u.storage_type().unwrap(), StorageType::U8);
    let sp = SearchParams::new().nprobe(16);
    assert_same(
        &u.search_typed(&x[..20 * DIM], 5, &sp).unwrap(),
        &f.search_with(&xf[..20 * DIM], 5, &sp).unwrap(),
        "converted",
    );
}

/// As tests/capi/shards_test.cpp: one trained index opened on 2 and 3 parts from its bytes
/// (the same centroids), the same adds: the results equal the one-part index's.
#[test]
fn shards_equal_one_part() {
    let base = generate(6000, DIM, 41);
    let more = generate(2000, DIM, 42);
    let q = generate(100, DIM, 43);
    let one = Index::new(DIM, &test_params()).unwrap();
    one.train(&base).unwrap();
    let trained = one.serialize().unwrap();
    let layouts = [
        (2, ShardMode::SPLIT),
        (3, ShardMode::SPLIT),
        (2, ShardMode::REPLICATE),
    ];
    let many: Vec<Index> = layouts
        .iter()
        .map(|&(g, mode)| {
            let p = IndexParams::new()
                .backend(test_backend())
                .shards(g)
                .shard_mode(mode);
            Index::deserialize(&trained, &p).unwrap()
        })
        .collect();
    let ids: Vec<i64> = (6000..8000).collect();
    for ix in std::iter::once(&one).chain(&many) {
        ix.add(&base).unwrap();
        ix.add_with_ids(&more, &ids).unwrap();
    }
    assert_eq!(one.shards().unwrap(), 1);
    for (ix, &(g, _)) in many.iter().zip(&layouts) {
        assert_eq!(ix.shards().unwrap(), g);
        assert_eq!(ix.live_shards().unwrap(), g);
        assert_eq!(ix.ntotal().unwrap(), 8000);
        for nprobe in [1, 7, NLIST] {
            for k in [1, 10, 100] {
                let sp = SearchParams::new().nprobe(nprobe);
                assert_same(
                    &ix.search_with(&q, k, &sp).unwrap(),
                    &one.search_with(&q, k, &sp).unwrap(),
                    &format!("{g} parts, nprobe {nprobe}, k {k}"),
                );
            }
        }
    }
    // The merge's time and the parts' placement are reported.
    for (ix, &(g, mode)) in many.iter().zip(&layouts) {
        let merged = ix.merge_time().unwrap();
        assert_eq!(merged.is_zero(), mode == ShardMode::REPLICATE, "{g} parts");
        // The fused kernels are a GPU path: a CPU index never counts one.
        let fused = ix.fused_searches().unwrap();
        if resolved_backend() == Backend::CPU {
            assert_eq!(fused, 0, "{g} parts");
        }
        for part in 0..g {
            ix.part_device(part).unwrap();
            ix.part_device_memory_bytes(part).unwrap();
        }
        assert_eq!(ix.part_device(g).unwrap_err().kind(), ErrorKind::InvalidArgument);
    }
    let placed = IndexParams::new()
        .backend(test_backend())
        .shards(2)
        .shard_device(0, 0)
        .shard_device(1, 0);
    let two = Index::deserialize(&trained, &placed).unwrap();
    assert_eq!(two.shards().unwrap(), 2);
    assert!(!two.peer_merge().unwrap());
    assert_eq!(
        Index::new(DIM, &IndexParams::new().shards(2).shard_device(5000, 0))
            .unwrap_err()
            .kind(),
        ErrorKind::Unsupported
    );
    assert_eq!(
        Index::new(DIM, &IndexParams::new().shards(0))
            .unwrap_err()
            .kind(),
        ErrorKind::InvalidArgument
    );
    // Compact storage on several parts: the same results as one part holding the same rows.
    let x = bytes(2000, DIM, 21);
    let one = Index::new(DIM, &cpu(StorageType::U8)).unwrap();
    let parts = Index::new(DIM, &cpu(StorageType::U8).shards(2)).unwrap();
    for ix in [&one, &parts] {
        ix.train_typed(&x).unwrap();
        ix.add_typed(&x).unwrap();
    }
    assert_eq!(parts.storage_type().unwrap(), StorageType::U8);
    let sp = SearchParams::new().nprobe(4);
    let q = &x[..20 * DIM];
    assert_same(
        &parts.search_typed(q, 10, &sp).unwrap(),
        &one.search_typed(q, 10, &sp).unwrap(),
        "u8 on 2 parts",
    );
}

const D: usize = 24;
const CLIENTS: usize = 16;
const ROUNDS: usize = 6;

/// Client c's search of round r, with the given batch window: few shapes (k, nprobe), so that
/// calls meet.
fn run(index: &Index, queries: &[f32], c: usize, r: usize, window: Duration) -> SearchResult {
    let first = (7 * (c * ROUNDS + r)) % 590;
    let n = 1 + (c + r) % 3;
    let k = [1, 10, 37][c % 3];
    let sp = SearchParams::new()
        .nprobe(1 + 3 * (r % 2))
        .batch_window(window);
    index
        .search_with(&queries[first * D..(first + n) * D], k, &sp)
        .unwrap()
}

/// Threads searching an index built with dynamic batching get exactly their solo answers, and
/// calls are really merged.
#[test]
fn dynamic_batching_gives_the_solo_answers() {
    let base = generate(8000, D, 51);
    let queries = Arc::new(generate(600, D, 52));
    let params = IndexParams::new()
        .nlist(32)
        .backend(test_backend())
        .dynamic_batching(true);
    let index = Arc::new(Index::new(D, &params).unwrap());
    index.train(&base).unwrap();
    index.add(&base).unwrap();
    let solo: Vec<Vec<SearchResult>> = (0..CLIENTS)
        .map(|c| {
            (0..ROUNDS)
                .map(|r| run(&index, &queries, c, r, Duration::ZERO))
                .collect()
        })
        .collect();
    assert_eq!(index.merged_searches().unwrap(), 0);
    let barrier = Arc::new(Barrier::new(CLIENTS));
    let threads: Vec<_> = (0..CLIENTS)
        .map(|c| {
            let (index, queries, barrier) = (index.clone(), queries.clone(), barrier.clone());
            std::thread::spawn(move || {
                (0..ROUNDS)
                    .map(|r| {
                        barrier.wait();
                        run(&index, &queries, c, r, Duration::from_millis(20))
                    })
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    for (c, t) in threads.into_iter().enumerate() {
        assert_eq!(t.join().unwrap(), solo[c], "client {c}");
    }
    assert!(index.merged_searches().unwrap() > 0, "nothing was merged");
    // a window beyond the key's bounds is refused by the library
    let err = index
        .search_with(
            &queries[..D],
            1,
            &SearchParams::new().batch_window(Duration::from_secs(11)),
        )
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{err}");
}
