package ivfgpu

// This file exports a Go function to C, so its preamble holds declarations only.

// #include <ivfgpu/ivfgpu.h>
import "C"

import (
	"context"
	"errors"
	"runtime/cgo"
	"strconv"
)

// Stage is the call a progress report is about.
type Stage int32

// Stages.
const (
	StageTrain  Stage = C.IVF_PROGRESS_TRAIN  // Train
	StageAdd    Stage = C.IVF_PROGRESS_ADD    // Add, AddWithIDs
	StageLoad   Stage = C.IVF_PROGRESS_LOAD   // Load, Deserialize
	StageSearch Stage = C.IVF_PROGRESS_SEARCH // Search, SearchInto
)

// String returns "train", "add", "load", "search" or "stage N".
func (s Stage) String() string {
	switch s {
	case StageTrain:
		return "train"
	case StageAdd:
		return "add"
	case StageLoad:
		return "load"
	case StageSearch:
		return "search"
	}
	return "stage " + strconv.Itoa(int(s))
}

// ProgressFunc receives the progress of a long call: its stage and the fraction done (0 to 1,
// never decreasing). It is called on the calling goroutine, inside the call: once at the start
// (0), about every 50 ms while the work runs, and once at the end (1; for a mutation, before
// the result is published). Returning a non-nil error cancels the call, which then fails with
// an error matching both ErrCancelled and the returned error (errors.Is and errors.As see it),
// with the index unchanged.
//
// It may read the index (NTotal, Search, ...) but must not mutate or Close it: the mutation
// would wait for the call that runs the function. A panic in it cancels the call and then
// continues from the call once it has returned (it never unwinds through the C library).
type ProgressFunc func(stage Stage, fraction float64) error

type progressOption struct{ fn ProgressFunc }

// keyProgress marks a WithProgress option; it is never passed to C as a key.
const keyProgress C.ivf_param_key = -1

// WithProgress reports the progress of a call to fn, which can also cancel it (see
// ProgressFunc). Read by Search, SearchInto, Load and Deserialize, and by the Context forms
// of every call (TrainContext, AddContext, AddWithIDsContext, SearchContext,
// SearchIntoContext, LoadContext, DeserializeContext); the last WithProgress wins, and
// WithProgress(nil) means none.
func WithProgress(fn ProgressFunc) Option {
	return Option{key: keyProgress, progress: &progressOption{fn}}
}

// progressCall is the Go side of one call's progress callback, reached from C through a
// cgo.Handle (an integer: no Go pointer is passed to C).
type progressCall struct {
	done   <-chan struct{}
	ctx    context.Context
	fn     ProgressFunc
	handle cgo.Handle

	cause    error // why the call was cancelled: ctx.Err() or fn's error
	panicked bool
	panicVal any
}

// newProgressCall returns nil when there is nothing to report to nor to wait for (no
// WithProgress and a context that is never done), so such calls set no callback at all.
func newProgressCall(ctx context.Context, opts []Option) *progressCall {
	var fn ProgressFunc
	for _, o := range opts {
		if o.key == keyProgress {
			fn = o.progress.fn
		}
	}
	var done <-chan struct{}
	if ctx != nil {
		done = ctx.Done()
	}
	if fn == nil && done == nil {
		return nil
	}
	pc := &progressCall{done: done, ctx: ctx, fn: fn}
	pc.handle = cgo.NewHandle(pc)
	return pc
}

// user is the callback's user pointer for the C helpers (0: no callback).
func (pc *progressCall) user() C.uintptr_t {
	if pc == nil {
		return 0
	}
	return C.uintptr_t(pc.handle)
}

// delete frees the handle; deferred right after newProgressCall.
func (pc *progressCall) delete() {
	if pc != nil {
		pc.handle.Delete()
	}
}

// finish takes the error of a call that may have run the callback (check's result): it
// resumes a panic of fn, and attaches the cause to a cancellation.
func (pc *progressCall) finish(err error) error {
	if pc == nil {
		return err
	}
	if pc.panicked {
		panic(pc.panicVal)
	}
	var e *Error
	if pc.cause != nil && errors.As(err, &e) && e.Code == ErrCancelled {
		e.Cause = pc.cause
	}
	return err
}

// report runs on the calling goroutine, inside the C call: 0 continues, 1 cancels.
func (pc *progressCall) report(stage Stage, fraction float64) (cancel C.int32_t) {
	if pc.panicked || pc.cause != nil {
		return 1
	}
	if pc.done != nil {
		select {
		case <-pc.done:
			pc.cause = pc.ctx.Err()
			return 1
		default:
		}
	}
	if pc.fn == nil {
		return 0
	}
	// A panic must not unwind through the C library's frames (it would skip its cleanup and
	// leave its locks held): recover it, cancel the call, and re-panic once the call returned.
	returned := false
	defer func() {
		if !returned { // also panic(nil), whose recover() is nil
			pc.panicked, pc.panicVal, cancel = true, recover(), 1
		}
	}()
	err := pc.fn(stage, fraction)
	returned = true
	if err != nil {
		pc.cause = err
		return 1
	}
	return 0
}

//export ivfgoProgress
func ivfgoProgress(stage C.ivf_progress_stage, fraction C.double, handle C.uintptr_t) C.int32_t {
	pc, ok := cgo.Handle(handle).Value().(*progressCall)
	if !ok {
		return 1
	}
	return pc.report(Stage(stage), float64(fraction))
}
