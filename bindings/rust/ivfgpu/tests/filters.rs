//! Filters: a filtered search at nprobe = nlist equals brute force over the permitted vectors.

mod common;

use std::thread;

use common::*;
use ivfgpu::{ErrorKind, Filter, FilterMode, SearchParams, NO_ID};

const K: usize = 10;

/// Searches `queries` exactly with `filter` and compares with brute force over `keep`.
fn check_filtered(filter: &Filter, keep: impl Fn(i64) -> bool + Copy, k: usize) {
    let (index, data) = filled_index();
    let ids: Vec<i64> = (0..N as i64).collect();
    let queries = generate(8, DIM, 31);
    let params = SearchParams::new().nprobe(NLIST).filter(filter);
    let result = index.search_with(&queries, k, &params).unwrap();
    let expected: Vec<_> = queries
        .chunks_exact(DIM)
        .map(|q| brute_force_where(&data, &ids, DIM, q, k, keep))
        .collect();
    assert_rows(&result, &expected);
}

#[test]
fn allow_filter_equals_brute_force_over_the_allowed() {
    let allowed: Vec<i64> = (0..N as i64).filter(|i| i % 3 == 0).collect();
    let filter = Filter::allow(&allowed).unwrap();
    assert_eq!(filter.mode(), FilterMode::ALLOW);
    check_filtered(&filter, |id| id % 3 == 0, K);
    // A sparse set (kept as a hash set), including ids the index does not hold.
    let sparse = [7, 1_999, 400, 1 << 40, -3, 7];
    let filter = Filter::allow(&sparse).unwrap();
    check_filtered(&filter, |id| [7, 1_999, 400].contains(&id), 5);
}

#[test]
fn deny_filter_equals_brute_force_over_the_rest() {
    let denied: Vec<i64> = (0..N as i64).filter(|i| i % 5 != 1).collect();
    let filter = Filter::deny(&denied).unwrap();
    assert_eq!(filter.mode(), FilterMode::DENY);
    check_filtered(&filter, |id| id % 5 == 1, K);
}

#[test]
fn empty_filters_allow_nothing_or_deny_nothing() {
    let (index, data) = filled_index();
    let exact = SearchParams::new().nprobe(NLIST);
    let nothing = Filter::allow(&[]).unwrap();
    let r = index
        .search_with(&data[..DIM], 3, &exact.clone().filter(&nothing))
        .unwrap();
    assert_eq!(r.ids(), &[NO_ID; 3]);
    assert!(r.distances().iter().all(|d| *d == f32::INFINITY));
    let everything = Filter::deny(&[]).unwrap();
    let filtered = index
        .search_with(&data[..4 * DIM], 3, &exact.clone().filter(&everything))
        .unwrap();
    assert_eq!(
        filtered,
        index.search_with(&data[..4 * DIM], 3, &exact).unwrap()
    );
}

/// One filter, borrowed by searches on two indexes from several threads at once.
#[test]
fn a_filter_is_shared_between_threads_and_indexes() {
    let (a, data) = filled_index();
    let (b, _) = filled_index();
    let filter = Filter::deny(&[0, 1, 2]).unwrap();
    assert!(filter.host_bytes().unwrap() > 0);
    let params = SearchParams::new().filter(&filter);
    let expected = a.search_with(&data[..3 * DIM], 4, &params).unwrap();
    assert!(!expected.ids().iter().any(|id| (0..3).contains(id)));
    thread::scope(|s| {
        for index in [&a, &b, &a, &b] {
            let (params, data, expected) = (&params, &data, &expected);
            s.spawn(move || {
                for _ in 0..20 {
                    let r = index.search_with(&data[..3 * DIM], 4, params).unwrap();
                    assert_eq!(&r, expected);
                }
            });
        }
    });
    if resolved_backend() == ivfgpu::Backend::CPU {
        assert_eq!(filter.device_bytes().unwrap(), 0);
    }
}

#[test]
fn unknown_filter_mode_is_refused() {
    let e = Filter::new(&[1], FilterMode::from_raw(7)).unwrap_err();
    assert!(
        matches!(
            e.kind(),
            ErrorKind::InvalidArgument | ErrorKind::Unsupported
        ),
        "{e}"
    );
    assert!(!e.message().is_empty());
}
