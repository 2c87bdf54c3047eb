//! Ids as first-class: remove, update, get and count round trips on known data, unique ids.

mod common;

use common::*;
use ivfgpu::{ErrorKind, Index, SearchParams, NO_ID};

/// An index holding `generate(N, DIM, 1)`, row i with id 10 * i.
fn index_with_ids(params: ivfgpu::IndexParams) -> (Index, Vec<f32>) {
    let data = generate(N, DIM, 1);
    let ids: Vec<i64> = (0..N as i64).map(|i| 10 * i).collect();
    let index = Index::new(DIM, &params).unwrap();
    index.train(&data).unwrap();
    index.add_with_ids(&data, &ids).unwrap();
    (index, data)
}

fn row(data: &[f32], i: usize) -> &[f32] {
    &data[i * DIM..(i + 1) * DIM]
}

#[test]
fn get_and_count_read_back_what_was_added() {
    let (index, data) = index_with_ids(test_params());
    assert!(!index.unique_ids().unwrap());
    assert_eq!(
        index.count_ids(&[0, 10, 5, 19_990, -7]).unwrap(),
        [1, 1, 0, 1, 0]
    );
    let got = index.get(&[10, 5, 19_990]).unwrap();
    assert_eq!((got.len(), got.dim()), (3, DIM));
    assert_eq!(got.found(), &[true, false, true]);
    assert_eq!(got.get(0), Some(row(&data, 1)));
    assert_eq!(got.get(1), None);
    assert_eq!(got.get(2), Some(row(&data, N - 1)));
    assert_eq!(
        &got.data()[DIM..2 * DIM],
        &[0.0; DIM],
        "absent rows are zeros"
    );
    let rows: Vec<_> = got.iter().collect();
    assert_eq!(rows[1], None);
    // No ids: nothing to read.
    assert!(index.get(&[]).unwrap().is_empty());
    assert!(index.count_ids(&[]).unwrap().is_empty());
}

#[test]
fn remove_takes_vectors_out_of_searches() {
    let (index, data) = index_with_ids(test_params());
    let v0 = index.state_version().unwrap();
    // Absent ids and repeats are harmless.
    assert_eq!(index.remove(&[10, 20, 5, 10]).unwrap(), 2);
    assert_eq!(index.state_version().unwrap(), v0 + 1);
    assert_eq!(index.ntotal().unwrap(), N - 2);
    assert_eq!(index.count_ids(&[10, 20, 30]).unwrap(), [0, 0, 1]);
    assert_eq!(index.get(&[10]).unwrap().get(0), None);
    assert!(index.removed_rows().unwrap() <= 2);
    // An exact search for the removed vectors finds the rest, as brute force over the rest.
    let ids: Vec<i64> = (0..N as i64).map(|i| 10 * i).collect();
    let queries = [row(&data, 1), row(&data, 2)].concat();
    let result = index
        .search_with(&queries, 5, &SearchParams::new().nprobe(NLIST))
        .unwrap();
    let expected: Vec<_> = queries
        .chunks_exact(DIM)
        .map(|q| brute_force_where(&data, &ids, DIM, q, 5, |id| id != 10 && id != 20))
        .collect();
    assert_rows(&result, &expected);
    // Removing nothing changes nothing; removing again finds nothing.
    assert_eq!(index.remove(&[]).unwrap(), 0);
    assert_eq!(index.remove(&[10, 20]).unwrap(), 0);
    assert_eq!(index.ntotal().unwrap(), N - 2);
}

#[test]
fn update_replaces_or_adds() {
    let (index, data) = index_with_ids(test_params());
    index.remove(&[20]).unwrap();
    let fresh = generate(2, DIM, 555);
    // 20 is absent now (added back), 30 is held (replaced).
    index.update(&fresh, &[20, 30]).unwrap();
    assert_eq!(index.ntotal().unwrap(), N - 1 + 1);
    assert_eq!(index.count_ids(&[20, 30]).unwrap(), [1, 1]);
    let got = index.get(&[20, 30]).unwrap();
    assert_eq!(got.data(), &fresh[..]);
    // The new vectors are found at distance 0 under their ids; the old one of 30 is gone.
    let exact = SearchParams::new().nprobe(NLIST);
    let r = index.search_with(&fresh[DIM..], 1, &exact).unwrap();
    assert_eq!((r.ids()[0], r.distances()[0]), (30, 0.0));
    let r = index.search_with(row(&data, 3), 1, &exact).unwrap();
    assert_ne!(r.ids()[0], 30);

    // Repeated ids (allowed without unique ids): remove takes every copy; update replaces
    // all of them by its one row.
    index.add_with_ids(&data[..2 * DIM], &[30, 40]).unwrap();
    assert_eq!(index.count_ids(&[30, 40]).unwrap(), [2, 2]);
    assert_eq!(index.remove(&[40]).unwrap(), 2);
    index.update(&fresh[..DIM], &[30]).unwrap();
    assert_eq!(index.count_ids(&[30, 40]).unwrap(), [1, 0]);
    let got = index.get(&[30]).unwrap();
    assert_eq!(got.get(0), Some(&fresh[..DIM]));
}

#[test]
fn update_refuses_bad_ids_and_changes_nothing() {
    let (index, data) = index_with_ids(test_params());
    let v0 = index.state_version().unwrap();
    let two = &data[..2 * DIM];
    let e = index.update(two, &[1]).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
    let e = index.update(two, &[40, 40]).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument, "repeated ids: {e}");
    assert!(!e.message().is_empty());
    let e = index.update(two, &[40, NO_ID]).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument, "NO_ID: {e}");
    let mut bad = two.to_vec();
    bad[1] = f32::NAN;
    let e = index.update(&bad, &[40, 50]).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument, "NaN: {e}");
    assert_eq!(index.state_version().unwrap(), v0, "nothing published");
    assert_eq!(index.get(&[40]).unwrap().get(0), Some(row(&data, 4)));
}

#[test]
fn untrained_index_refuses_remove_and_update() {
    let index = Index::new(DIM, &test_params()).unwrap();
    let e = index.remove(&[1]).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidState, "{e}");
    let e = index.update(&generate(1, DIM, 2), &[1]).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidState, "{e}");
}

#[test]
fn unique_ids_refuse_repeats() {
    let (index, data) = index_with_ids(test_params().unique_ids(true));
    assert!(index.unique_ids().unwrap());
    let before = index.state_version().unwrap();
    // An id already held, and one repeated within the batch.
    let e = index.add_with_ids(&data[..DIM], &[10]).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument, "held id: {e}");
    let e = index.add_with_ids(&data[..2 * DIM], &[-5, -5]).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument, "repeated id: {e}");
    assert_eq!(index.ntotal().unwrap(), N);
    assert_eq!(index.state_version().unwrap(), before);
    // Sequential ids continue after the largest id ever added.
    index.add(&data[..2 * DIM]).unwrap();
    let last = 10 * (N as i64 - 1);
    assert_eq!(index.count_ids(&[last + 1, last + 2]).unwrap(), [1, 1]);
    // Update keeps one vector per id; a removed id may be added again.
    index.update(&data[..DIM], &[10]).unwrap();
    assert_eq!(index.count_ids(&[10]).unwrap(), [1]);
    assert_eq!(index.remove(&[10]).unwrap(), 1);
    index.add_with_ids(&data[..DIM], &[10]).unwrap();
    assert_eq!(index.count_ids(&[10]).unwrap(), [1]);
}
