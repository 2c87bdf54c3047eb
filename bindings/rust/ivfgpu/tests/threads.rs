//! Concurrency as the C contract allows it: many threads searching one index, moving an index
//! to another thread, and error messages that stay with the thread whose call failed.

mod common;

use std::sync::Arc;
use std::thread;

use common::*;
use ivfgpu::{ErrorKind, Index, SearchResult};

fn assert_send_sync<T: Send + Sync>() {}

#[test]
fn index_is_send_and_sync() {
    assert_send_sync::<Index>();
    assert_send_sync::<ivfgpu::Error>();
    assert_send_sync::<ivfgpu::IndexParams>();
    assert_send_sync::<SearchResult>();
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
