package ivfgpu_test

import (
	"errors"
	"math"
	"reflect"
	"sync"
	"testing"

	ivfgpu "github.com/libivfgpu/libivfgpu/bindings/go"
)

// checkFiltered compares an exact filtered search of filledIndex's data with brute force over
// the ids keep permits.
func checkFiltered(t *testing.T, f *ivfgpu.Filter, keep func(int64) bool, k int) {
	t.Helper()
	ix, data := filledIndex(t)
	queries := generate(8, dim, 31)
	r, err := ix.Search(queries, k, ivfgpu.WithNProbe(nlist), ivfgpu.WithFilter(f))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < r.Len(); i++ {
		ids, dists := r.Row(i)
		want := bruteForceWhere(data, queries[i*dim:(i+1)*dim], k, keep)
		for j, w := range want {
			if ids[j] != w.id || !closeTo(dists[j], w.dist) {
				t.Fatalf("query %d rank %d: (%d, %g), want (%d, %g)", i, j, ids[j], dists[j], w.id, w.dist)
			}
		}
	}
}

func TestAllowFilterEqualsBruteForce(t *testing.T) {
	var allowed []int64
	for i := int64(0); i < nvecs; i += 3 {
		allowed = append(allowed, i)
	}
	f, err := ivfgpu.NewFilter(allowed, ivfgpu.FilterAllow)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if f.Mode() != ivfgpu.FilterAllow {
		t.Fatal("mode")
	}
	checkFiltered(t, f, func(id int64) bool { return id%3 == 0 }, 10)

	// A sparse set with ids the index does not hold: fewer than k permitted, rows padded.
	sparse, err := ivfgpu.NewFilter([]int64{7, 1999, 400, 1 << 40, -3, 7}, ivfgpu.FilterAllow)
	if err != nil {
		t.Fatal(err)
	}
	defer sparse.Close()
	checkFiltered(t, sparse, func(id int64) bool { return id == 7 || id == 1999 || id == 400 }, 5)
}

func TestDenyFilterEqualsBruteForce(t *testing.T) {
	var denied []int64
	for i := int64(0); i < nvecs; i++ {
		if i%5 != 1 {
			denied = append(denied, i)
		}
	}
	f, err := ivfgpu.NewFilter(denied, ivfgpu.FilterDeny)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	checkFiltered(t, f, func(id int64) bool { return id%5 == 1 }, 10)
}

func TestEmptyFilters(t *testing.T) {
	ix, data := filledIndex(t)
	nothing, err := ivfgpu.NewFilter(nil, ivfgpu.FilterAllow)
	if err != nil {
		t.Fatal(err)
	}
	defer nothing.Close()
	r, err := ix.Search(data[:dim], 3, ivfgpu.WithNProbe(nlist), ivfgpu.WithFilter(nothing))
	if err != nil {
		t.Fatal(err)
	}
	for j := range r.IDs {
		if r.IDs[j] != ivfgpu.NoID || !math.IsInf(float64(r.Distances[j]), 1) {
			t.Fatalf("allow-nothing returned %v %v", r.IDs, r.Distances)
		}
	}
	everything, err := ivfgpu.NewFilter([]int64{}, ivfgpu.FilterDeny)
	if err != nil {
		t.Fatal(err)
	}
	defer everything.Close()
	got, err := ix.Search(data[:4*dim], 3, ivfgpu.WithFilter(everything))
	if err != nil {
		t.Fatal(err)
	}
	// WithFilter(nil) is no filter; a filter given to New is ignored.
	want, err := ix.Search(data[:4*dim], 3, ivfgpu.WithFilter(nil))
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("deny-nothing differs from no filter (%v)", err)
	}
	other, err := ivfgpu.New(dim, ivfgpu.WithFilter(everything), ivfgpu.WithBackend(ivfgpu.BackendCPU))
	if err != nil {
		t.Fatal(err)
	}
	other.Close()
}

func TestFilterCloseIsIdempotent(t *testing.T) {
	ix, data := filledIndex(t)
	f, err := ivfgpu.NewFilter([]int64{1, 2, 3}, ivfgpu.FilterDeny)
	if err != nil {
		t.Fatal(err)
	}
	if host, _, err := f.Bytes(); err != nil || host <= 0 {
		t.Fatalf("Bytes = %d, %v", host, err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal("second Close:", err)
	}
	if _, _, err := f.Bytes(); !errors.Is(err, ivfgpu.ErrClosed) {
		t.Fatalf("Bytes after Close: %v", err)
	}
	_, err = ix.Search(data[:dim], 1, ivfgpu.WithFilter(f))
	if !errors.Is(err, ivfgpu.ErrClosed) {
		t.Fatalf("Search with a closed filter: %v", err)
	}
	t.Log(err) // "ivfgpu: Search: filter is closed"
}

// A filter closed while searches use it: Close waits for them; each search either ran with
// the filter or reports ErrClosed. Run under -race.
func TestFilterCloseRacesWithSearches(t *testing.T) {
	ix, data := filledIndex(t)
	for round := 0; round < 10; round++ {
		f, err := ivfgpu.NewFilter([]int64{0}, ivfgpu.FilterDeny)
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		for g := 0; g < 4; g++ {
			wg.Add(1)
			go func(g int) {
				defer wg.Done()
				for i := 0; i < 20; i++ {
					if g == 0 && i == 5 {
						f.Close()
						continue
					}
					r, err := ix.Search(data[:dim], 2, ivfgpu.WithFilter(f))
					if err != nil && !errors.Is(err, ivfgpu.ErrClosed) {
						t.Errorf("goroutine %d: %v", g, err)
						return
					}
					if err == nil && r.IDs[0] == 0 {
						t.Errorf("denied id 0 returned")
						return
					}
				}
			}(g)
		}
		wg.Wait()
	}
}

func TestUnknownFilterModeIsRefused(t *testing.T) {
	_, err := ivfgpu.NewFilter([]int64{1}, ivfgpu.FilterMode(7))
	if !errors.Is(err, ivfgpu.ErrInvalidArgument) && !errors.Is(err, ivfgpu.ErrUnsupported) {
		t.Fatalf("got %v", err)
	}
}
