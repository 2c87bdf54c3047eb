package ivfgpu_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	ivfgpu "github.com/libivfgpu/libivfgpu/bindings/go"
)

type report struct {
	stage    ivfgpu.Stage
	fraction float64
}

// recorder returns a ProgressFunc that records every report and continues.
func recorder(reports *[]report) ivfgpu.ProgressFunc {
	return func(stage ivfgpu.Stage, fraction float64) error {
		*reports = append(*reports, report{stage, fraction})
		return nil
	}
}

// wantReports checks the reports of one call: all of stage, from 0 to 1, never decreasing.
func wantReports(t *testing.T, what string, reports []report, stage ivfgpu.Stage) {
	t.Helper()
	if len(reports) < 2 || reports[0].fraction != 0 || reports[len(reports)-1].fraction != 1 {
		t.Fatalf("%s: reports %v", what, reports)
	}
	for i, r := range reports {
		if r.stage != stage {
			t.Fatalf("%s: stage %v in %v", what, r.stage, reports)
		}
		if i > 0 && r.fraction < reports[i-1].fraction {
			t.Fatalf("%s: fractions go back: %v", what, reports)
		}
	}
}

// wantCancelled checks an error of a cancelled call: ErrCancelled, the cause, the message.
func wantCancelled(t *testing.T, what string, err, cause error) {
	t.Helper()
	e := wantErr(t, what, err, ivfgpu.ErrCancelled)
	if !errors.Is(err, cause) || !errors.Is(e.Cause, cause) {
		t.Fatalf("%s: %v does not match %v", what, err, cause)
	}
	if !strings.Contains(err.Error(), "cancelled") || !strings.Contains(err.Error(), cause.Error()) {
		t.Fatalf("%s: error text %q", what, err)
	}
}

func TestProgressReportsFromZeroToOne(t *testing.T) {
	data := generate(nvecs, dim, 1)
	ix, err := ivfgpu.New(dim, testOptions()...)
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	ctx := context.Background()

	var reports []report
	if err := ix.TrainContext(ctx, data, ivfgpu.WithProgress(recorder(&reports))); err != nil {
		t.Fatal(err)
	}
	wantReports(t, "train", reports, ivfgpu.StageTrain)

	reports = nil
	if err := ix.AddContext(ctx, data, ivfgpu.WithProgress(recorder(&reports))); err != nil {
		t.Fatal(err)
	}
	wantReports(t, "add", reports, ivfgpu.StageAdd)

	reports = nil
	ids := make([]int64, nvecs)
	for i := range ids {
		ids[i] = int64(10000 + i)
	}
	if err := ix.AddWithIDsContext(ctx, data, ids, ivfgpu.WithProgress(recorder(&reports))); err != nil {
		t.Fatal(err)
	}
	wantReports(t, "add with ids", reports, ivfgpu.StageAdd)
	if n, _ := ix.NTotal(); n != 2*nvecs {
		t.Fatalf("ntotal %d", n)
	}

	// Search reads WithProgress without a context too; results equal a plain search's.
	reports = nil
	got, err := ix.Search(data[:4*dim], 5, ivfgpu.WithNProbe(nlist), ivfgpu.WithProgress(recorder(&reports)))
	if err != nil {
		t.Fatal(err)
	}
	wantReports(t, "search", reports, ivfgpu.StageSearch)
	want, err := ix.SearchContext(ctx, data[:4*dim], 5, ivfgpu.WithNProbe(nlist))
	if err != nil {
		t.Fatal(err)
	}
	for i := range want.IDs {
		if got.IDs[i] != want.IDs[i] || got.Distances[i] != want.Distances[i] {
			t.Fatalf("result %d differs: %v vs %v", i, got, want)
		}
	}
	reports = nil
	out := make([]int64, 20)
	dists := make([]float32, 20)
	if err := ix.SearchIntoContext(ctx, data[:4*dim], 5, out, dists, ivfgpu.WithProgress(recorder(&reports))); err != nil {
		t.Fatal(err)
	}
	wantReports(t, "search into", reports, ivfgpu.StageSearch)

	bytes, err := ix.Serialize()
	if err != nil {
		t.Fatal(err)
	}
	reports = nil
	dup, err := ivfgpu.Deserialize(bytes, ivfgpu.WithBackend(testBackend()), ivfgpu.WithProgress(recorder(&reports)))
	if err != nil {
		t.Fatal(err)
	}
	dup.Close()
	wantReports(t, "deserialize", reports, ivfgpu.StageLoad)

	path := filepath.Join(t.TempDir(), "index.ivf")
	if err := ix.Save(path); err != nil {
		t.Fatal(err)
	}
	reports = nil
	loaded, err := ivfgpu.LoadContext(ctx, path, ivfgpu.WithBackend(testBackend()), ivfgpu.WithProgress(recorder(&reports)))
	if err != nil {
		t.Fatal(err)
	}
	defer loaded.Close()
	wantReports(t, "load", reports, ivfgpu.StageLoad)
	if n, _ := loaded.NTotal(); n != 2*nvecs {
		t.Fatalf("loaded ntotal %d", n)
	}
	if ivfgpu.StageSearch.String() != "search" || ivfgpu.Stage(9).String() != "stage 9" {
		t.Fatal("Stage.String")
	}
}

func TestCancelledContextCancelsAndChangesNothing(t *testing.T) {
	data := generate(nvecs, dim, 1)
	ix, err := ivfgpu.New(dim, testOptions()...)
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()

	wantCancelled(t, "train", ix.TrainContext(ctx, data), context.Canceled)
	if trained, _ := ix.IsTrained(); trained {
		t.Fatal("a cancelled train trained the index")
	}
	if err := ix.Train(data); err != nil {
		t.Fatal(err)
	}
	version, _ := ix.StateVersion()
	wantCancelled(t, "add", ix.AddContext(ctx, data), context.Canceled)
	wantCancelled(t, "add with ids", ix.AddWithIDsContext(ctx, data[:dim], []int64{5}), context.Canceled)
	if n, _ := ix.NTotal(); n != 0 {
		t.Fatalf("a cancelled add added %d vectors", n)
	}
	if v, _ := ix.StateVersion(); v != version {
		t.Fatalf("state version %d -> %d", version, v)
	}
	if err := ix.Add(data); err != nil {
		t.Fatal(err)
	}
	_, err = ix.SearchContext(ctx, data[:dim], 3)
	wantCancelled(t, "search", err, context.Canceled)
	err = ix.SearchIntoContext(ctx, data[:dim], 1, make([]int64, 1), make([]float32, 1))
	wantCancelled(t, "search into", err, context.Canceled)

	// A deadline that has passed: the cause is context.DeadlineExceeded.
	past, cancelPast := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancelPast()
	_, err = ix.SearchContext(past, data[:dim], 3)
	wantCancelled(t, "search past its deadline", err, context.DeadlineExceeded)

	path := filepath.Join(t.TempDir(), "index.ivf")
	if err := ix.Save(path); err != nil {
		t.Fatal(err)
	}
	loaded, err := ivfgpu.LoadContext(ctx, path, ivfgpu.WithBackend(testBackend()))
	if loaded != nil {
		t.Fatal("a cancelled load returned an index")
	}
	wantCancelled(t, "load", err, context.Canceled)
	bytes, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	dup, err := ivfgpu.DeserializeContext(ctx, bytes, ivfgpu.WithBackend(testBackend()))
	if dup != nil {
		t.Fatal("a cancelled deserialize returned an index")
	}
	wantCancelled(t, "deserialize", err, context.Canceled)

	// The index is as it was, and a live context changes nothing.
	if n, _ := ix.NTotal(); n != nvecs {
		t.Fatalf("ntotal %d", n)
	}
	r, err := ix.SearchContext(context.Background(), data[:dim], 1)
	if err != nil || r.IDs[0] != 0 {
		t.Fatalf("search after cancellations: %v %v", r, err)
	}
}

// The context is cancelled by another goroutine while the call runs: the next report (at the
// latest the last one, before the add is published) cancels it.
func TestContextCancelledDuringTheCall(t *testing.T) {
	ix, data := filledIndex(t)
	version, _ := ix.StateVersion()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	started := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		<-started
		cancel()
	}()
	var once sync.Once
	err := ix.AddContext(ctx, data, ivfgpu.WithProgress(func(ivfgpu.Stage, float64) error {
		once.Do(func() {
			close(started)
			<-ctx.Done() // the first report waits until the other goroutine has cancelled
		})
		return nil
	}))
	wg.Wait()
	wantCancelled(t, "add cancelled meanwhile", err, context.Canceled)
	if n, _ := ix.NTotal(); n != nvecs {
		t.Fatalf("ntotal %d", n)
	}
	if v, _ := ix.StateVersion(); v != version {
		t.Fatalf("state version %d -> %d", version, v)
	}
}

// Another goroutine cancels a running search through its context: the search's first report
// waits until the context is cancelled, so the cancel lands inside the call on every machine;
// the index answers as before afterwards.
func TestSearchCancelledFromAnotherGoroutine(t *testing.T) {
	ix, data := filledIndex(t)
	queries := data[:200*dim]
	before, err := ix.Search(queries, 5)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	started := make(chan struct{})
	go func() {
		<-started
		cancel()
	}()
	var once sync.Once
	_, err = ix.SearchContext(ctx, queries, 5, ivfgpu.WithProgress(func(ivfgpu.Stage, float64) error {
		once.Do(func() {
			close(started)
			<-ctx.Done()
		})
		return nil
	}))
	wantCancelled(t, "search cancelled meanwhile", err, context.Canceled)
	after, err := ix.Search(queries, 5)
	if err != nil {
		t.Fatal(err)
	}
	for i := range before.IDs {
		if before.IDs[i] != after.IDs[i] || before.Distances[i] != after.Distances[i] {
			t.Fatalf("result %d changed after a cancelled search", i)
		}
	}
}

type stopError struct{ at float64 }

func (e stopError) Error() string { return "stopped by the test" }

func TestProgressFuncErrorCancels(t *testing.T) {
	ix, data := filledIndex(t)
	for _, at := range []float64{0, 1} {
		err := ix.AddContext(context.Background(), data, ivfgpu.WithProgress(func(_ ivfgpu.Stage, f float64) error {
			if f >= at {
				return stopError{f}
			}
			return nil
		}))
		wantCancelled(t, "add stopped", err, stopError{at})
		var se stopError
		if !errors.As(err, &se) || se.at != at {
			t.Fatalf("errors.As: %v %v", se, err)
		}
	}
	if n, _ := ix.NTotal(); n != nvecs {
		t.Fatalf("ntotal %d", n)
	}
	// WithProgress(nil) is no callback; the last WithProgress wins.
	stop := ivfgpu.WithProgress(func(ivfgpu.Stage, float64) error { return stopError{} })
	if _, err := ix.Search(data[:dim], 1, stop, ivfgpu.WithProgress(nil)); err != nil {
		t.Fatal(err)
	}
	_, err := ix.Search(data[:dim], 1, ivfgpu.WithProgress(nil), stop)
	wantCancelled(t, "search stopped", err, stopError{})
}

func TestProgressFuncPanicCancelsAndRepanics(t *testing.T) {
	data := generate(nvecs, dim, 1)
	ix, err := ivfgpu.New(dim, testOptions()...)
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	if err := ix.Train(data); err != nil {
		t.Fatal(err)
	}
	calls := 0
	func() {
		defer func() {
			if r := recover(); r != "boom" {
				t.Fatalf("recovered %v", r)
			}
		}()
		_ = ix.AddContext(context.Background(), data, ivfgpu.WithProgress(func(_ ivfgpu.Stage, f float64) error {
			if f >= 1 {
				calls++
				panic("boom")
			}
			return nil
		}))
		t.Fatal("no panic")
	}()
	if calls != 1 {
		t.Fatalf("%d calls after the panic", calls)
	}
	if n, _ := ix.NTotal(); n != 0 {
		t.Fatalf("the panicking add added %d vectors", n)
	}
	// The index is usable (its lock was released by the panic): add, search, close.
	if err := ix.Add(data); err != nil {
		t.Fatal(err)
	}
	if r, err := ix.Search(data[:dim], 1); err != nil || r.IDs[0] != 0 {
		t.Fatalf("%v %v", r, err)
	}
}

func TestErrCancelledText(t *testing.T) {
	if ivfgpu.ErrCancelled.Error() != "ivfgpu: cancelled" {
		t.Fatal(ivfgpu.ErrCancelled.Error())
	}
	e := &ivfgpu.Error{Op: "Add", Code: ivfgpu.ErrCancelled, Message: "m"}
	if errors.Is(e, context.Canceled) || e.Error() != "ivfgpu: Add: cancelled: m" {
		t.Fatal(e)
	}
}
