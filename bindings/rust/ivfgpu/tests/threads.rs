//! Concurrency as the C contract allows it: many threads searching one index, mutations through
//! `&self` while others search, moving an index to another thread, and error messages that
//! stay with the thread whose call failed.

mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;

use common::*;
use ivfgpu::{ErrorKind, Filter, Index, SearchParams, SearchResult, StoredVectors};

fn assert_send_sync<T: Send + Sync>() {}

#[test]
fn index_is_send_and_sync() {
    assert_send_sync::<Index>();
    assert_send_sync::<ivfgpu::Error>();
    assert_send_sync::<ivfgpu::IndexParams>();
    assert_send_sync::<SearchResult>();
    assert_send_sync::<Filter>();
    assert_send_sync::<SearchParams<'static>>();
    assert_send_sync::<StoredVectors>();
}

#[test]
fn concurrent_searches_agree_with_a_serial_one() {
    let (index, _) = filled_index();
    let index = Arc::new(index);
    let queries = Arc::new(generate(50, DIM, 77));
    let expected = index.search(&queries, 8).unwrap();
    let handles: Vec<_> = (0..8)
        .map(|_| {
            let (index, queries) = (Arc::clone(&index), Arc::clone(&queries));
            thread::spawn(move || {
                (0..20)
                    .map(|_| index.search(&queries, 8).unwrap())
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    for h in handles {
        for r in h.join().unwrap() {
            assert_eq!(r, expected);
        }
    }
}

#[test]
fn index_moves_to_and_drops_on_another_thread() {
    let (index, data) = filled_index();
    let first = thread::spawn(move || {
        let r = index.search(&data[..DIM], 1).unwrap();
        drop(index);
        r
    })
    .join()
    .unwrap();
    assert_eq!(first.ids(), &[0]);
}

/// Each thread fails in its own way many times; each error must carry its own message.
#[test]
fn error_messages_belong_to_the_failing_thread() {
    let (index, data) = filled_index();
    let index = Arc::new(index);
    let data = Arc::new(data);
    let handles: Vec<_> = (0..6)
        .map(|t| {
            let (index, data) = (Arc::clone(&index), Arc::clone(&data));
            thread::spawn(move || {
                for _ in 0..200 {
                    if t % 2 == 0 {
                        let mut q = data[..DIM].to_vec();
                        q[t] = f32::NAN;
                        let e = index.search(&q, 1).unwrap_err();
                        assert_eq!(e.kind(), ErrorKind::InvalidArgument);
                        assert!(!e.message().is_empty());
                    } else {
                        let e = Index::new(0usize.wrapping_sub(1), &test_params()).unwrap_err();
                        assert_eq!(e.kind(), ErrorKind::InvalidArgument);
                    }
                    // A success in between clears this thread's message only.
                    index.search(&data[..DIM], 1).unwrap();
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
}

/// A writer adds and resets through an `Arc<Index>` (`&self`) while readers search it: every
/// search succeeds and sees one whole published state, the versions only grow, and the end
/// state is what the writer made.
#[test]
fn mutations_through_an_arc_while_searching() {
    let (index, data) = filled_index();
    let index = Arc::new(index);
    let data = Arc::new(data);
    let v0 = index.state_version().unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let readers: Vec<_> = (0..3)
        .map(|_| {
            let (index, data, stop) = (Arc::clone(&index), Arc::clone(&data), Arc::clone(&stop));
            thread::spawn(move || {
                let mut last_version = 0;
                let mut searches = 0;
                while !stop.load(Ordering::Relaxed) || searches == 0 {
                    let version = index.state_version().unwrap();
                    assert!(version >= last_version, "state version went back");
                    last_version = version;
                    let ntotal = index.ntotal().unwrap();
                    assert!(ntotal <= N + 10 * 100, "ntotal {ntotal}");
                    assert_eq!((ntotal - N) % 100, 0, "a half-published add: {ntotal}");
                    // Vector 0 is always held (the writer only adds), at distance 0.
                    let r = index.search(&data[..DIM], 1).unwrap();
                    assert_eq!(r.distances()[0], 0.0, "{:?}", r);
                    searches += 1;
                }
                searches
            })
        })
        .collect();
    let writer = {
        let (index, data) = (Arc::clone(&index), Arc::clone(&data));
        thread::spawn(move || {
            for batch in 0..10i64 {
                let ids: Vec<i64> = (0..100).map(|i| 1_000_000 + batch * 100 + i).collect();
                index.add_with_ids(&data[..100 * DIM], &ids).unwrap();
            }
        })
    };
    writer.join().unwrap();
    stop.store(true, Ordering::Relaxed);
    for r in readers {
        assert!(r.join().unwrap() > 0);
    }
    assert_eq!(index.ntotal().unwrap(), N + 1000);
    assert_eq!(index.state_version().unwrap(), v0 + 10);
    // A reset through the Arc, seen by the next call (read-your-writes).
    index.reset().unwrap();
    assert_eq!(index.ntotal().unwrap(), 0);
    assert_eq!(index.state_version().unwrap(), v0 + 11);
}

/// Removes and updates through an `Arc<Index>` while readers search with a filter and read
/// ids: no search returns a denied id, and every read sees whole states.
#[test]
fn removes_and_updates_while_searching_with_a_filter() {
    let (index, data) = filled_index();
    let index = Arc::new(index);
    let data = Arc::new(data);
    let filter = Arc::new(Filter::deny(&[0, 1]).unwrap());
    let stop = Arc::new(AtomicBool::new(false));
    let readers: Vec<_> = (0..3)
        .map(|_| {
            let (index, data, filter, stop) = (
                Arc::clone(&index),
                Arc::clone(&data),
                Arc::clone(&filter),
                Arc::clone(&stop),
            );
            thread::spawn(move || {
                let params = SearchParams::new().filter(&filter);
                let mut searches = 0;
                while !stop.load(Ordering::Relaxed) || searches == 0 {
                    let r = index.search_with(&data[..2 * DIM], 5, &params).unwrap();
                    assert!(!r.ids().iter().any(|&id| id == 0 || id == 1), "{r:?}");
                    // Ids 100..110 are removed and updated back as one batch each time.
                    let counts = index.count_ids(&[100, 109]).unwrap();
                    assert_eq!(counts[0], counts[1], "a half-published batch");
                    searches += 1;
                }
                searches
            })
        })
        .collect();
    let batch: Vec<i64> = (100..110).collect();
    for _ in 0..10 {
        assert_eq!(index.remove(&batch).unwrap(), 10);
        index.update(&data[100 * DIM..110 * DIM], &batch).unwrap();
    }
    stop.store(true, Ordering::Relaxed);
    for r in readers {
        assert!(r.join().unwrap() > 0);
    }
    assert_eq!(index.ntotal().unwrap(), N);
    assert_eq!(index.count_ids(&batch).unwrap(), vec![1; 10]);
}
