package ivfgpu_test

import (
	"errors"
	"reflect"
	"sync"
	"testing"

	ivfgpu "github.com/libivfgpu/libivfgpu/bindings/go"
)

func TestCloseIsIdempotentAndLaterCallsFail(t *testing.T) {
	ix, data := filledIndex(t)
	if err := ix.Close(); err != nil {
		t.Fatal(err)
	}
	if err := ix.Close(); err != nil {
		t.Fatal("second Close:", err)
	}
	if _, err := ix.Search(data[:dim], 1); !errors.Is(err, ivfgpu.ErrClosed) {
		t.Fatalf("Search after Close: %v", err)
	}
	if err := ix.Add(data); !errors.Is(err, ivfgpu.ErrClosed) {
		t.Fatalf("Add after Close: %v", err)
	}
	if _, err := ix.NTotal(); !errors.Is(err, ivfgpu.ErrClosed) {
		t.Fatalf("NTotal after Close: %v", err)
	}
	if err := ix.Reset(); !errors.Is(err, ivfgpu.ErrClosed) {
		t.Fatalf("Reset after Close: %v", err)
	}
}

func TestConcurrentSearchesAgree(t *testing.T) {
	ix, _ := filledIndex(t)
	q := generate(50, dim, 77)
	want, err := ix.Search(q, 8)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 20; i++ {
				got, err := ix.Search(q, 8)
				if err != nil || !reflect.DeepEqual(got, want) {
					t.Errorf("concurrent search differs: %v", err)
					return
				}
			}
		}()
	}
	wg.Wait()
}

// Close from one goroutine while others search, add and close: every call either completes
// or reports ErrClosed, and the handle is freed exactly once (the race detector and the C
// library's allocator would catch a use after free or a double free).
func TestCloseRacesWithCalls(t *testing.T) {
	for round := 0; round < 20; round++ {
		ix, data := filledIndex(t)
		var wg sync.WaitGroup
		for g := 0; g < 6; g++ {
			wg.Add(1)
			go func(g int) {
				defer wg.Done()
				for i := 0; i < 50; i++ {
					var err error
					switch g % 3 {
					case 0:
						_, err = ix.Search(data[:4*dim], 5)
					case 1:
						err = ix.Add(data[:dim])
					default:
						if i == 10 {
							err = ix.Close()
						}
					}
					if err != nil && !errors.Is(err, ivfgpu.ErrClosed) {
						t.Errorf("goroutine %d: %v", g, err)
						return
					}
				}
			}(g)
		}
		wg.Wait()
		if _, err := ix.NTotal(); !errors.Is(err, ivfgpu.ErrClosed) {
			t.Fatalf("index still open: %v", err)
		}
	}
}

// Adds run while searches are in flight: neither waits for the other.
func TestAddDuringSearches(t *testing.T) {
	ix, data := filledIndex(t)
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				if _, err := ix.Search(data[:dim], 3); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	for i := 0; i < 20; i++ {
		if err := ix.Add(data[:100*dim]); err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	wg.Wait()
	if n, _ := ix.NTotal(); n != nvecs+20*100 {
		t.Fatalf("NTotal = %d", n)
	}
}

// A writer goroutine adds and resets while readers search: every search succeeds on one whole
// published state (ntotal a whole number of batches), the state version never goes back, and
// the end state is the writer's.
func TestMutationsDuringSearchesSeeWholeStates(t *testing.T) {
	ix, data := filledIndex(t)
	v0, err := ix.StateVersion()
	if err != nil {
		t.Fatal(err)
	}
	const batches, batch = 10, 100
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for g := 0; g < 3; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var last uint64
			for searches := 0; ; searches++ {
				select {
				case <-stop:
					if searches > 0 {
						return
					}
				default:
				}
				v, err := ix.StateVersion()
				if err != nil || v < last {
					t.Errorf("state version %d after %d (%v)", v, last, err)
					return
				}
				last = v
				n, err := ix.NTotal()
				if err != nil || n < nvecs || n > nvecs+batches*batch || (n-nvecs)%batch != 0 {
					t.Errorf("NTotal = %d (%v): not a published state", n, err)
					return
				}
				r, err := ix.Search(data[:dim], 1)
				if err != nil || r.Distances[0] != 0 {
					t.Errorf("search: %v %v", r, err)
					return
				}
			}
		}()
	}
	ids := make([]int64, batch)
	for b := 0; b < batches; b++ {
		for i := range ids {
			ids[i] = 1_000_000 + int64(b*batch+i)
		}
		if err := ix.AddWithIDs(data[:batch*dim], ids); err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	wg.Wait()
	if n, _ := ix.NTotal(); n != nvecs+batches*batch {
		t.Fatalf("NTotal = %d", n)
	}
	if v, _ := ix.StateVersion(); v != v0+batches {
		t.Fatalf("StateVersion = %d, want %d", v, v0+batches)
	}
	if err := ix.Reset(); err != nil {
		t.Fatal(err)
	}
	if n, _ := ix.NTotal(); n != 0 {
		t.Fatalf("NTotal after Reset = %d", n)
	}
}
