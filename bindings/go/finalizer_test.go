package ivfgpu

import (
	"runtime"
	"sync/atomic"
	"testing"
	"time"
)

// An index that is never closed is freed by its finalizer once unreachable; a closed one is
// not freed a second time.
func TestFinalizerFreesForgottenIndexes(t *testing.T) {
	var freed atomic.Int32
	hook := func() { freed.Add(1) }
	testHookFree.Store(&hook)
	defer testHookFree.Store(nil)

	closed, err := New(4, WithNList(1), WithBackend(BackendCPU))
	if err != nil {
		t.Fatal(err)
	}
	closed.Close()
	if freed.Load() != 1 {
		t.Fatalf("Close freed %d handles", freed.Load())
	}
	for i := 0; i < 10; i++ {
		if _, err := New(4, WithNList(1), WithBackend(BackendCPU)); err != nil {
			t.Fatal(err)
		}
	}
	closed = nil
	deadline := time.Now().Add(10 * time.Second)
	for freed.Load() < 11 && time.Now().Before(deadline) {
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
	}
	if got := freed.Load(); got != 11 {
		t.Fatalf("freed %d handles, want 11 (1 Close + 10 finalizers)", got)
	}
}
