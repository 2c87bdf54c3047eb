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

// Trains and adds run while searches are in flight; the library serialises them.
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
