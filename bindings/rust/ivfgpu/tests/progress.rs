//! Progress closures: reports from 0 to 1 for every call that takes one, cancellation with
//! `ControlFlow::Break` (the `Cancelled` error, the index unchanged), and a panicking closure
//! (the call cancelled, the panic resumed after it).

mod common;

use std::ops::ControlFlow;
use std::panic::{catch_unwind, AssertUnwindSafe};

use common::*;
use ivfgpu::{ErrorKind, Index, SearchParams, Stage};
use ivfgpu_sys as sys;

/// A closure recording every report, continuing.
fn recorder(reports: &mut Vec<(Stage, f64)>) -> impl FnMut(Stage, f64) -> ControlFlow<()> + '_ {
    move |stage, fraction| {
        reports.push((stage, fraction));
        ControlFlow::Continue(())
    }
}

/// Reports of one call: all of `stage`, starting at 0, ending at 1, never decreasing.
fn assert_reports(reports: &[(Stage, f64)], stage: Stage) {
    assert!(reports.len() >= 2, "{reports:?}");
    assert!(reports.iter().all(|r| r.0 == stage), "{reports:?}");
    assert_eq!(reports.first().unwrap().1, 0.0, "{reports:?}");
    assert_eq!(reports.last().unwrap().1, 1.0, "{reports:?}");
    assert!(
        reports.windows(2).all(|w| w[0].1 <= w[1].1),
        "fractions go back: {reports:?}"
    );
}

#[test]
fn every_call_reports_from_zero_to_one() {
    let data = generate(N, DIM, 1);
    let index = Index::new(DIM, &test_params()).unwrap();

    let mut reports = Vec::new();
    index
        .with_progress(recorder(&mut reports))
        .train(&data)
        .unwrap();
    assert_reports(&reports, Stage::TRAIN);

    reports.clear();
    index
        .with_progress(recorder(&mut reports))
        .add(&data)
        .unwrap();
    assert_reports(&reports, Stage::ADD);
    assert_eq!(index.ntotal().unwrap(), N);

    reports.clear();
    let ids: Vec<i64> = (0..N as i64).map(|i| i + 10_000).collect();
    index
        .with_progress(recorder(&mut reports))
        .add_with_ids(&data, &ids)
        .unwrap();
    assert_reports(&reports, Stage::ADD);
    assert_eq!(index.ntotal().unwrap(), 2 * N);

    // One view, several calls; the results equal the plain calls'.
    reports.clear();
    let mut view = index.with_progress(recorder(&mut reports));
    let with = view.search(&data[..4 * DIM], 5).unwrap();
    let params = SearchParams::new().nprobe(NLIST);
    let exact = view.search_with(&data[..4 * DIM], 5, &params).unwrap();
    let (mut ids, mut dists) = (vec![0i64; 20], vec![0f32; 20]);
    view.search_into_with(&data[..4 * DIM], 5, &mut ids, &mut dists, &params)
        .unwrap();
    drop(view);
    assert_eq!(with, index.search(&data[..4 * DIM], 5).unwrap());
    assert_eq!(
        exact,
        index.search_with(&data[..4 * DIM], 5, &params).unwrap()
    );
    assert_eq!((&ids[..], &dists[..]), (exact.ids(), exact.distances()));
    assert!(reports.iter().all(|r| r.0 == Stage::SEARCH));
    assert_eq!(
        reports.iter().filter(|r| r.1 == 0.0).count(),
        3,
        "{reports:?}"
    );
    assert_eq!(
        reports.iter().filter(|r| r.1 == 1.0).count(),
        3,
        "{reports:?}"
    );

    let bytes = index.serialize().unwrap();
    reports.clear();
    let copy =
        Index::deserialize_with_progress(&bytes, &test_params(), recorder(&mut reports)).unwrap();
    assert_reports(&reports, Stage::LOAD);
    assert_eq!(copy.ntotal().unwrap(), 2 * N);

    let path = std::env::temp_dir().join(format!("ivfgpu-progress-{}.ivf", std::process::id()));
    index.save(&path).unwrap();
    reports.clear();
    let loaded = Index::load_with_progress(&path, &test_params(), recorder(&mut reports));
    std::fs::remove_file(&path).unwrap();
    assert_eq!(loaded.unwrap().ntotal().unwrap(), 2 * N);
    assert_reports(&reports, Stage::LOAD);
    assert_eq!(Stage::SEARCH.to_string(), "search");
    assert_eq!(Stage::from_raw(9).to_string(), "stage 9");
}

#[test]
fn break_cancels_and_changes_nothing() {
    let data = generate(N, DIM, 1);
    let index = Index::new(DIM, &test_params()).unwrap();
    let cancelled = |err: ivfgpu::Error| {
        assert_eq!(err.kind(), ErrorKind::Cancelled, "{err}");
        assert_eq!(err.code(), sys::IVF_ERR_CANCELLED);
        assert!(err.to_string().contains("cancelled"), "{err}");
    };

    // At the first report (0) and at the last (1, before the result is published).
    for at in [0.0, 1.0] {
        let stop = move |_: Stage, f: f64| {
            if f >= at {
                ControlFlow::Break(())
            } else {
                ControlFlow::Continue(())
            }
        };
        cancelled(index.with_progress(stop).train(&data).unwrap_err());
        assert!(!index.is_trained().unwrap());
        assert_eq!(index.state_version().unwrap(), 0);
    }
    index.train(&data).unwrap();
    let version = index.state_version().unwrap();

    for at in [0.0, 1.0] {
        let mut calls = 0;
        let mut view = index.with_progress(|_, f| {
            calls += 1;
            if f >= at {
                ControlFlow::Break(())
            } else {
                ControlFlow::Continue(())
            }
        });
        cancelled(view.add(&data).unwrap_err());
        assert!(calls >= 1);
    }
    let ids: Vec<i64> = (0..N as i64).collect();
    cancelled(
        index
            .with_progress(|_, _| ControlFlow::Break(()))
            .add_with_ids(&data, &ids)
            .unwrap_err(),
    );
    assert_eq!(index.ntotal().unwrap(), 0, "a cancelled add adds nothing");
    assert_eq!(index.state_version().unwrap(), version);

    index.add(&data).unwrap();
    cancelled(
        index
            .with_progress(|_, _| ControlFlow::Break(()))
            .search(&data[..DIM], 3)
            .unwrap_err(),
    );

    let bytes = index.serialize().unwrap();
    cancelled(
        Index::deserialize_with_progress(&bytes, &test_params(), |_, f| {
            if f >= 1.0 {
                ControlFlow::Break(())
            } else {
                ControlFlow::Continue(())
            }
        })
        .unwrap_err(),
    );
    let path = std::env::temp_dir().join(format!("ivfgpu-cancel-{}.ivf", std::process::id()));
    index.save(&path).unwrap();
    let err = Index::load_with_progress(&path, &test_params(), |_, _| ControlFlow::Break(()));
    std::fs::remove_file(&path).unwrap();
    cancelled(err.unwrap_err());

    // The closure's state is there afterwards, and the index works as before.
    let mut view = index.with_progress(|_, _| ControlFlow::Continue(()));
    assert_eq!(view.search(&data[..DIM], 1).unwrap().ids(), &[0]);
    assert_eq!(view.index().ntotal().unwrap(), N);
}

#[test]
fn a_panic_cancels_the_call_and_is_resumed_after_it() {
    let data = generate(N, DIM, 1);
    let index = Index::new(DIM, &test_params()).unwrap();
    index.train(&data).unwrap();
    let version = index.state_version().unwrap();

    let mut after_panic = 0;
    let outcome = catch_unwind(AssertUnwindSafe(|| {
        let mut view = index.with_progress(|_, f| {
            if f >= 1.0 {
                after_panic += 1; // never reached twice: the call is cancelled by the panic
                panic!("stop at {f}");
            }
            ControlFlow::Continue(())
        });
        view.add(&data)
    }));
    let payload = outcome.expect_err("the panic reaches the caller");
    assert_eq!(
        payload.downcast_ref::<String>().map(String::as_str),
        Some("stop at 1")
    );
    assert_eq!(after_panic, 1);
    assert_eq!(
        index.ntotal().unwrap(),
        0,
        "the panicking add was cancelled"
    );
    assert_eq!(index.state_version().unwrap(), version);

    // A panic at the start of a load gives no index (and no leak, under a leak checker).
    let bytes = {
        index.add(&data).unwrap();
        index.serialize().unwrap()
    };
    let outcome = catch_unwind(|| {
        Index::deserialize_with_progress(&bytes, &test_params(), |_, _| panic!("no"))
    });
    assert!(outcome.is_err());

    // The library is fine afterwards, on this thread.
    assert_eq!(index.ntotal().unwrap(), N);
    assert_eq!(index.search(&data[..DIM], 1).unwrap().ids(), &[0]);
}

#[test]
fn the_closure_may_read_the_index() {
    let data = generate(N, DIM, 1);
    let index = Index::new(DIM, &test_params()).unwrap();
    index.train(&data).unwrap();
    let mut seen = Vec::new();
    index
        .with_progress(|_, _| {
            // The add is not published while it runs.
            seen.push(index.ntotal().unwrap());
            ControlFlow::Continue(())
        })
        .add(&data)
        .unwrap();
    assert!(seen.iter().all(|&n| n == 0), "{seen:?}");
    assert_eq!(index.ntotal().unwrap(), N);
}
