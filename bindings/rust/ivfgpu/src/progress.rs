//! Progress reporting and cancellation of long calls: a Rust closure behind the C
//! `ivf_progress_fn`, called on the calling thread while train, add, search, load or
//! deserialize runs.

use core::ffi::c_void;
use core::ops::ControlFlow;
use std::any::Any;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};

use ivfgpu_sys as sys;

use crate::error::{check, Result};
use crate::params::RawParams;

/// The call a progress report is about. An integer newtype rather than an enum, so that a
/// stage reported by a newer library is representable.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Stage(i32);

impl Stage {
    /// Training (k-means).
    pub const TRAIN: Stage = Stage(sys::IVF_PROGRESS_TRAIN);
    /// Adding vectors.
    pub const ADD: Stage = Stage(sys::IVF_PROGRESS_ADD);
    /// Loading a file or deserialising bytes.
    pub const LOAD: Stage = Stage(sys::IVF_PROGRESS_LOAD);
    /// Searching.
    pub const SEARCH: Stage = Stage(sys::IVF_PROGRESS_SEARCH);

    /// The stage with C value `raw` (`IVF_PROGRESS_*`).
    pub const fn from_raw(raw: i32) -> Stage {
        Stage(raw)
    }
    /// The C value (`IVF_PROGRESS_*`).
    pub const fn raw(self) -> i32 {
        self.0
    }
}

/// "train", "add", "load", "search", or "stage N" for a stage of a newer library.
impl core::fmt::Display for Stage {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match *self {
            Stage::TRAIN => f.write_str("train"),
            Stage::ADD => f.write_str("add"),
            Stage::LOAD => f.write_str("load"),
            Stage::SEARCH => f.write_str("search"),
            Stage(other) => write!(f, "stage {other}"),
        }
    }
}

/// A progress callback as the library calls it: the stage and the fraction done (0 to 1,
/// never decreasing). `ControlFlow::Break(())` cancels the call.
pub(crate) type ProgressFn<'a> = dyn FnMut(Stage, f64) -> ControlFlow<()> + 'a;

/// What the C callback's `user` pointer points at, for the duration of one call.
struct State<'a, 'f> {
    progress: &'a mut ProgressFn<'f>,
    /// A panic of the closure, caught at the C boundary and resumed after the call.
    panic: Option<Box<dyn Any + Send + 'static>>,
}

unsafe extern "C" fn trampoline(
    stage: sys::ivf_progress_stage,
    fraction: f64,
    user: *mut c_void,
) -> i32 {
    // SAFETY: `user` is the `State` that `call` keeps alive (and does not otherwise touch)
    // until the C call returns; the library calls back on the calling thread only.
    let state = unsafe { &mut *(user as *mut State<'_, '_>) };
    if state.panic.is_some() {
        return 1; // the closure panicked: the call is already being cancelled
    }
    // A panic must not unwind into C: catch it, cancel the call, resume it afterwards.
    match catch_unwind(AssertUnwindSafe(|| {
        (state.progress)(Stage(stage), fraction)
    })) {
        Ok(ControlFlow::Continue(())) => 0,
        Ok(ControlFlow::Break(())) => 1,
        Err(payload) => {
            state.panic = Some(payload);
            1
        }
    }
}

/// Runs the C call `f` with parameters `raw` (NULL when `None` and there is no progress
/// closure). With a closure, the parameters gain the callback (created when `None`); a
/// cancel gives `ErrorKind::Cancelled`, and a panic of the closure cancels the call and is
/// resumed once the call has returned (its error discarded).
pub(crate) fn call(
    raw: Option<RawParams>,
    progress: Option<&mut ProgressFn<'_>>,
    f: impl FnOnce(*const sys::ivf_params) -> sys::ivf_status,
) -> Result<()> {
    let progress = match progress {
        None => return check(f(RawParams::ptr(&raw))),
        Some(progress) => progress,
    };
    let raw = match raw {
        Some(raw) => raw,
        None => RawParams::empty()?,
    };
    let mut state = State {
        progress,
        panic: None,
    };
    let user: *mut State<'_, '_> = &mut state;
    check(unsafe {
        sys::ivf_params_set_progress(raw.as_mut_ptr(), Some(trampoline), user.cast())
    })?;
    let result = check(f(raw.as_mut_ptr()));
    drop(raw);
    if let Some(payload) = state.panic.take() {
        resume_unwind(payload);
    }
    result
}
