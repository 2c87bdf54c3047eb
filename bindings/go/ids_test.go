package ivfgpu_test

import (
	"errors"
	"math"
	"reflect"
	"sync"
	"testing"

	ivfgpu "github.com/libivfgpu/libivfgpu/bindings/go"
)

// indexWithIDs returns an index holding generate(nvecs, dim, 1), row i with id 10*i.
func indexWithIDs(t *testing.T, opts ...ivfgpu.Option) (*ivfgpu.Index, []float32) {
	t.Helper()
	data := generate(nvecs, dim, 1)
	ids := make([]int64, nvecs)
	for i := range ids {
		ids[i] = 10 * int64(i)
	}
	ix, err := ivfgpu.New(dim, append(testOptions(), opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ix.Close() })
	if err := ix.Train(data); err != nil {
		t.Fatal(err)
	}
	if err := ix.AddWithIDs(data, ids); err != nil {
		t.Fatal(err)
	}
	return ix, data
}

func row(data []float32, i int) []float32 { return data[i*dim : (i+1)*dim] }

func wantCounts(t *testing.T, ix *ivfgpu.Index, ids []int64, want ...int) {
	t.Helper()
	got, err := ix.CountIDs(ids)
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("CountIDs(%v) = %v, %v; want %v", ids, got, err, want)
	}
}

func TestGetAndCountReadBackWhatWasAdded(t *testing.T) {
	ix, data := indexWithIDs(t)
	if u, err := ix.UniqueIDs(); err != nil || u {
		t.Fatalf("UniqueIDs = %v, %v", u, err)
	}
	wantCounts(t, ix, []int64{0, 10, 5, 19_990, -7}, 1, 1, 0, 1, 0)
	vecs, found, err := ix.Get([]int64{10, 5, 19_990})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(found, []bool{true, false, true}) || len(vecs) != 3*dim {
		t.Fatalf("found %v, %d values", found, len(vecs))
	}
	if !reflect.DeepEqual(vecs[:dim], row(data, 1)) || !reflect.DeepEqual(vecs[2*dim:], row(data, nvecs-1)) {
		t.Fatal("Get returned other vectors")
	}
	if !reflect.DeepEqual(vecs[dim:2*dim], make([]float32, dim)) {
		t.Fatal("the row of an absent id is not zeros")
	}
	if vecs, found, err := ix.Get(nil); err != nil || len(vecs) != 0 || len(found) != 0 {
		t.Fatalf("Get(nil) = %v %v %v", vecs, found, err)
	}
	if counts, err := ix.CountIDs(nil); err != nil || len(counts) != 0 {
		t.Fatalf("CountIDs(nil) = %v %v", counts, err)
	}
}

func TestRemoveTakesVectorsOutOfSearches(t *testing.T) {
	ix, data := indexWithIDs(t)
	v0, _ := ix.StateVersion()
	if n, err := ix.Remove([]int64{10, 20, 5, 10}); err != nil || n != 2 {
		t.Fatalf("Remove = %d, %v", n, err)
	}
	if v, _ := ix.StateVersion(); v != v0+1 {
		t.Fatalf("StateVersion %d, want %d", v, v0+1)
	}
	if n, _ := ix.NTotal(); n != nvecs-2 {
		t.Fatalf("NTotal = %d", n)
	}
	wantCounts(t, ix, []int64{10, 20, 30}, 0, 0, 1)
	if r, err := ix.RemovedRows(); err != nil || r > 2 {
		t.Fatalf("RemovedRows = %d, %v", r, err)
	}
	// An exact search for the removed vectors returns the rest, as brute force over the rest.
	q := append(append([]float32(nil), row(data, 1)...), row(data, 2)...)
	r, err := ix.Search(q, 5, ivfgpu.WithNProbe(nlist))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2; i++ {
		want := bruteForceWhere(data, q[i*dim:(i+1)*dim], 5, func(id int64) bool { return id != 1 && id != 2 })
		ids, dists := r.Row(i)
		for j, w := range want {
			if ids[j] != 10*w.id || !closeTo(dists[j], w.dist) {
				t.Fatalf("query %d rank %d: (%d, %g), want (%d, %g)", i, j, ids[j], dists[j], 10*w.id, w.dist)
			}
		}
	}
	if n, err := ix.Remove(nil); err != nil || n != 0 {
		t.Fatalf("Remove(nil) = %d, %v", n, err)
	}
	if n, err := ix.Remove([]int64{10, 20}); err != nil || n != 0 {
		t.Fatalf("second Remove = %d, %v", n, err)
	}
}

func TestUpdateReplacesOrAdds(t *testing.T) {
	ix, data := indexWithIDs(t)
	if _, err := ix.Remove([]int64{20}); err != nil {
		t.Fatal(err)
	}
	fresh := generate(2, dim, 555)
	if err := ix.Update(fresh, []int64{20, 30}); err != nil { // 20 absent: added; 30 replaced
		t.Fatal(err)
	}
	if n, _ := ix.NTotal(); n != nvecs {
		t.Fatalf("NTotal = %d", n)
	}
	wantCounts(t, ix, []int64{20, 30}, 1, 1)
	vecs, _, err := ix.Get([]int64{20, 30})
	if err != nil || !reflect.DeepEqual(vecs, fresh) {
		t.Fatalf("Get after Update: %v", err)
	}
	r, err := ix.Search(fresh[dim:], 1, ivfgpu.WithNProbe(nlist))
	if err != nil || r.IDs[0] != 30 || r.Distances[0] != 0 {
		t.Fatalf("%v %v", r, err)
	}
	// Repeated ids (allowed without WithUniqueIDs): Remove takes every copy; Update replaces
	// all of them by its one row.
	if err := ix.AddWithIDs(data[:2*dim], []int64{30, 40}); err != nil {
		t.Fatal(err)
	}
	wantCounts(t, ix, []int64{30, 40}, 2, 2)
	if n, err := ix.Remove([]int64{40}); err != nil || n != 2 {
		t.Fatalf("Remove = %d, %v", n, err)
	}
	if err := ix.Update(fresh[:dim], []int64{30}); err != nil {
		t.Fatal(err)
	}
	wantCounts(t, ix, []int64{30, 40}, 1, 0)
	if vecs, _, err := ix.Get([]int64{30}); err != nil || !reflect.DeepEqual(vecs, fresh[:dim]) {
		t.Fatalf("Get after Update: %v", err)
	}
}

func TestUpdateRefusesBadIDs(t *testing.T) {
	ix, data := indexWithIDs(t)
	v0, _ := ix.StateVersion()
	two := data[:2*dim]
	wantErr(t, "ids short", ix.Update(two, []int64{1}), ivfgpu.ErrInvalidArgument)
	wantErr(t, "repeated ids", ix.Update(two, []int64{40, 40}), ivfgpu.ErrInvalidArgument)
	wantErr(t, "NoID", ix.Update(two, []int64{40, ivfgpu.NoID}), ivfgpu.ErrInvalidArgument)
	bad := append([]float32(nil), two...)
	bad[1] = float32(math.NaN())
	wantErr(t, "NaN", ix.Update(bad, []int64{40, 50}), ivfgpu.ErrInvalidArgument)
	if v, _ := ix.StateVersion(); v != v0 {
		t.Fatalf("refused updates published states: %d -> %d", v0, v)
	}
	untrained, err := ivfgpu.New(dim, testOptions()...)
	if err != nil {
		t.Fatal(err)
	}
	defer untrained.Close()
	_, err = untrained.Remove([]int64{1})
	wantErr(t, "Remove untrained", err, ivfgpu.ErrInvalidState)
	wantErr(t, "Update untrained", untrained.Update(data[:dim], []int64{1}), ivfgpu.ErrInvalidState)
}

func TestUniqueIDsRefuseRepeats(t *testing.T) {
	ix, data := indexWithIDs(t, ivfgpu.WithUniqueIDs())
	if u, err := ix.UniqueIDs(); err != nil || !u {
		t.Fatalf("UniqueIDs = %v, %v", u, err)
	}
	v0, _ := ix.StateVersion()
	wantErr(t, "held id", ix.AddWithIDs(data[:dim], []int64{10}), ivfgpu.ErrInvalidArgument)
	wantErr(t, "repeated id", ix.AddWithIDs(data[:2*dim], []int64{-5, -5}), ivfgpu.ErrInvalidArgument)
	if v, _ := ix.StateVersion(); v != v0 {
		t.Fatal("a refused add published a state")
	}
	// Sequential ids continue after the largest id ever added.
	if err := ix.Add(data[:2*dim]); err != nil {
		t.Fatal(err)
	}
	last := int64(10 * (nvecs - 1))
	wantCounts(t, ix, []int64{last + 1, last + 2}, 1, 1)
	if err := ix.Update(data[:dim], []int64{10}); err != nil {
		t.Fatal(err)
	}
	wantCounts(t, ix, []int64{10}, 1)
}

// Removes and updates from one goroutine while others search with a filter and count ids:
// no denied id comes back, and each batch is seen whole or not at all.
func TestRemoveAndUpdateDuringFilteredSearches(t *testing.T) {
	ix, data := filledIndex(t)
	f, err := ivfgpu.NewFilter([]int64{0, 1}, ivfgpu.FilterDeny)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	batch := make([]int64, 10)
	for i := range batch {
		batch[i] = int64(100 + i)
	}
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for g := 0; g < 3; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for searches := 0; ; searches++ {
				select {
				case <-stop:
					if searches > 0 {
						return
					}
				default:
				}
				r, err := ix.Search(data[:2*dim], 5, ivfgpu.WithFilter(f))
				if err != nil {
					t.Error(err)
					return
				}
				for _, id := range r.IDs {
					if id == 0 || id == 1 {
						t.Errorf("denied id %d returned", id)
						return
					}
				}
				c, err := ix.CountIDs([]int64{100, 109})
				if err != nil || c[0] != c[1] {
					t.Errorf("counts %v (%v): a half-published batch", c, err)
					return
				}
			}
		}()
	}
	for i := 0; i < 10; i++ {
		if n, err := ix.Remove(batch); err != nil || n != 10 {
			t.Fatalf("Remove = %d, %v", n, err)
		}
		if err := ix.Update(data[100*dim:110*dim], batch); err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	wg.Wait()
	if n, _ := ix.NTotal(); n != nvecs {
		t.Fatalf("NTotal = %d", n)
	}
}

func TestIDCallsAfterCloseFail(t *testing.T) {
	ix, data := indexWithIDs(t)
	ix.Close()
	_, err := ix.Remove([]int64{1})
	if !errors.Is(err, ivfgpu.ErrClosed) {
		t.Fatalf("Remove: %v", err)
	}
	if err := ix.Update(data[:dim], []int64{1}); !errors.Is(err, ivfgpu.ErrClosed) {
		t.Fatalf("Update: %v", err)
	}
	if _, _, err := ix.Get([]int64{1}); !errors.Is(err, ivfgpu.ErrClosed) {
		t.Fatalf("Get: %v", err)
	}
	if _, err := ix.CountIDs([]int64{1}); !errors.Is(err, ivfgpu.ErrClosed) {
		t.Fatalf("CountIDs: %v", err)
	}
}
