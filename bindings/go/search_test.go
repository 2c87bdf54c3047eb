package ivfgpu_test

import (
	"math"
	"path/filepath"
	"reflect"
	"testing"

	ivfgpu "github.com/libivfgpu/libivfgpu/bindings/go"
)

func TestExactSearchMatchesBruteForce(t *testing.T) {
	ix, data := filledIndex(t)
	if n, err := ix.NTotal(); err != nil || n != nvecs {
		t.Fatalf("NTotal = %d, %v", n, err)
	}
	if n, _ := ix.NList(); n != nlist {
		t.Fatalf("NList = %d", n)
	}
	if b, _ := ix.Backend(); b != resolvedBackend() {
		t.Fatalf("Backend = %d", b)
	}
	if m, _ := ix.Metric(); m != ivfgpu.L2 {
		t.Fatalf("Metric = %d", m)
	}
	queries := generate(20, dim, 99)
	const k = 10
	// Probing every list makes the search exact.
	r, err := ix.Search(queries, k, ivfgpu.WithNProbe(nlist))
	if err != nil {
		t.Fatal(err)
	}
	if r.Len() != 20 || r.K != k {
		t.Fatalf("shape %d x %d", r.Len(), r.K)
	}
	for i := 0; i < r.Len(); i++ {
		ids, dists := r.Row(i)
		want := bruteForce(data, dim, queries[i*dim:(i+1)*dim], k)
		for j, w := range want {
			if ids[j] != w.id || math.Abs(float64(dists[j]-w.dist)) > 1e-4*(1+float64(w.dist)) {
				t.Fatalf("query %d rank %d: got (%d, %g), want (%d, %g)", i, j, ids[j], dists[j], w.id, w.dist)
			}
		}
	}
}

func TestStoredVectorsFindThemselves(t *testing.T) {
	ix, data := filledIndex(t)
	r, err := ix.Search(data[:5*dim], 3)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 5; i++ {
		ids, dists := r.Row(i)
		if ids[0] != int64(i) || math.Abs(float64(dists[0])) > 1e-5 || dists[1] < dists[0] || dists[2] < dists[1] {
			t.Fatalf("query %d: %v %v", i, ids, dists)
		}
	}
}

func TestSearchIntoMatchesSearch(t *testing.T) {
	ix, _ := filledIndex(t)
	q := generate(7, dim, 5)
	ids := make([]int64, 7*4)
	dists := make([]float32, 7*4)
	if err := ix.SearchInto(q, 4, ids, dists); err != nil {
		t.Fatal(err)
	}
	r, err := ix.Search(q, 4)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(r.IDs, ids) || !reflect.DeepEqual(r.Distances, dists) {
		t.Fatal("SearchInto and Search disagree")
	}
}

func TestAddWithIDs(t *testing.T) {
	data := generate(nvecs, dim, 1)
	ids := make([]int64, nvecs)
	for i := range ids {
		ids[i] = 1_000_000 + 3*int64(i)
	}
	ix, err := ivfgpu.New(dim, testOptions()...)
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	if err := ix.Train(data); err != nil {
		t.Fatal(err)
	}
	if err := ix.AddWithIDs(data, ids); err != nil {
		t.Fatal(err)
	}
	r, err := ix.Search(data[10*dim:11*dim], 1)
	if err != nil || r.IDs[0] != 1_000_030 {
		t.Fatalf("got %v, %v", r.IDs, err)
	}
}

func TestShortRowsArePadded(t *testing.T) {
	data := generate(64, 4, 3)
	ix, err := ivfgpu.New(4, ivfgpu.WithNList(2), ivfgpu.WithBackend(testBackend()), ivfgpu.WithNProbe(2))
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	if err := ix.Train(data); err != nil {
		t.Fatal(err)
	}
	if err := ix.Add(data[:3*4]); err != nil {
		t.Fatal(err)
	}
	r, err := ix.Search(data[:4], 5)
	if err != nil {
		t.Fatal(err)
	}
	if r.IDs[0] != 0 || r.IDs[3] != ivfgpu.NoID || r.IDs[4] != ivfgpu.NoID || !math.IsInf(float64(r.Distances[4]), 1) {
		t.Fatalf("%v %v", r.IDs, r.Distances)
	}
}

func TestResetKeepsTraining(t *testing.T) {
	ix, data := filledIndex(t)
	if err := ix.Reset(); err != nil {
		t.Fatal(err)
	}
	if n, _ := ix.NTotal(); n != 0 {
		t.Fatalf("NTotal after Reset = %d", n)
	}
	if trained, _ := ix.IsTrained(); !trained {
		t.Fatal("not trained after Reset")
	}
	r, err := ix.Search(data[:dim], 2)
	if err != nil || r.IDs[0] != ivfgpu.NoID {
		t.Fatalf("%v %v", r.IDs, err)
	}
}

// Save/Load, Serialize/Deserialize and the FAISS format give back an index with the same
// results; damaged bytes and missing files give typed errors.
func TestPersistenceRoundTrips(t *testing.T) {
	ix, data := filledIndex(t)
	q := data[:3*dim]
	before, err := ix.Search(q, 5)
	if err != nil {
		t.Fatal(err)
	}
	same := func(what string, copy *ivfgpu.Index, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		defer copy.Close()
		if copy.Dim() != dim {
			t.Fatalf("%s: dim %d", what, copy.Dim())
		}
		after, err := copy.Search(q, 5)
		if err != nil || !reflect.DeepEqual(after, before) {
			t.Fatalf("%s: results differ (%v)", what, err)
		}
	}
	b, err := ix.Serialize()
	if err != nil {
		t.Fatal(err)
	}
	c, err := ivfgpu.Deserialize(b, ivfgpu.WithBackend(testBackend()))
	same("Deserialize", c, err)

	dir := t.TempDir()
	if err := ix.Save(filepath.Join(dir, "index.ivf")); err != nil {
		t.Fatal(err)
	}
	c, err = ivfgpu.Load(filepath.Join(dir, "index.ivf"), ivfgpu.WithBackend(testBackend()))
	same("Load", c, err)
	if err := ix.SaveFAISS(filepath.Join(dir, "index.faiss")); err != nil {
		t.Fatal(err)
	}
	c, err = ivfgpu.Load(filepath.Join(dir, "index.faiss"), ivfgpu.WithBackend(testBackend()))
	same("Load FAISS", c, err)

	_, err = ivfgpu.Load(filepath.Join(dir, "missing"))
	wantErr(t, "Load of a missing file", err, ivfgpu.ErrIO)
	wantErr(t, "Save into a missing directory", ix.Save(filepath.Join(dir, "no", "such", "dir")), ivfgpu.ErrIO)
	damaged := append([]byte(nil), b...)
	damaged[len(damaged)/2] ^= 0x40
	_, err = ivfgpu.Deserialize(damaged)
	wantErr(t, "a flipped bit", err, ivfgpu.ErrCorruptData)
	_, err = ivfgpu.Deserialize(b[:len(b)/3])
	wantErr(t, "truncated bytes", err, ivfgpu.ErrCorruptData)
	_, err = ivfgpu.Deserialize(nil)
	wantErr(t, "no bytes", err, ivfgpu.ErrInvalidArgument)
}

// WithDeviceBudget is accepted by New, Deserialize and Load. On the CPU backend (forced here,
// whatever the test backend) the budget has nothing to limit: the host-tier properties read 0
// and the results are those of an index without a budget.
func TestDeviceBudgetIsAcceptedOnTheCPU(t *testing.T) {
	const budget = int64(1) << 30
	cpu := []ivfgpu.Option{ivfgpu.WithBackend(ivfgpu.BackendCPU), ivfgpu.WithDeviceBudget(budget)}
	data := generate(nvecs, dim, 1)
	ix, err := ivfgpu.New(dim, append(testOptions(), cpu...)...)
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	if err := ix.Train(data); err != nil {
		t.Fatal(err)
	}
	if err := ix.Add(data); err != nil {
		t.Fatal(err)
	}
	q := data[:3*dim]
	before, err := ix.Search(q, 5)
	if err != nil {
		t.Fatal(err)
	}
	tier := func(what string, x *ivfgpu.Index) {
		t.Helper()
		lists, err := x.ResidentLists()
		if err != nil || lists != 0 {
			t.Fatalf("%s: ResidentLists %d, %v", what, lists, err)
		}
		for _, get := range []struct {
			name string
			f    func() (int64, error)
		}{
			{"DeviceBudget", x.DeviceBudget}, {"ResidentBytes", x.ResidentBytes},
			{"HostTierBytes", x.HostTierBytes}, {"CacheHits", x.CacheHits},
			{"CacheMisses", x.CacheMisses}, {"StreamedBytes", x.StreamedBytes},
		} {
			if v, err := get.f(); err != nil || v != 0 {
				t.Fatalf("%s: %s %d, %v", what, get.name, v, err)
			}
		}
	}
	tier("New", ix)
	same := func(what string, c *ivfgpu.Index, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		defer c.Close()
		after, err := c.Search(q, 5)
		if err != nil || !reflect.DeepEqual(after, before) {
			t.Fatalf("%s: results differ (%v)", what, err)
		}
		tier(what, c)
	}
	b, err := ix.Serialize()
	if err != nil {
		t.Fatal(err)
	}
	c, err := ivfgpu.Deserialize(b, cpu...)
	same("Deserialize", c, err)
	path := filepath.Join(t.TempDir(), "index.ivf")
	if err := ix.Save(path); err != nil {
		t.Fatal(err)
	}
	c, err = ivfgpu.Load(path, cpu...)
	same("Load", c, err)
}

func TestVersions(t *testing.T) {
	if ivfgpu.ABIVersion() != ivfgpu.HeaderABIVersion {
		t.Fatalf("library ABI %d, header %d", ivfgpu.ABIVersion(), ivfgpu.HeaderABIVersion)
	}
	if ivfgpu.Version() == "" {
		t.Fatal("empty version")
	}
	if _, err := ivfgpu.CUDADeviceCount(); err != nil {
		t.Fatal(err)
	}
}

// On a machine with a GPU: the CUDA backend gives the CPU's exact results.
func TestCUDAMatchesCPU(t *testing.T) {
	if n, _ := ivfgpu.CUDADeviceCount(); n == 0 {
		t.Skip("no CUDA device")
	}
	data := generate(nvecs, dim, 1)
	var results [2]ivfgpu.Result
	for i, b := range []ivfgpu.Backend{ivfgpu.BackendCPU, ivfgpu.BackendCUDA} {
		ix, err := ivfgpu.New(dim, append(testOptions(), ivfgpu.WithBackend(b))...)
		if err != nil {
			t.Fatal(err)
		}
		defer ix.Close()
		if got, _ := ix.Backend(); got != b {
			t.Fatalf("backend %d, want %d", got, b)
		}
		if err := ix.Train(data); err != nil {
			t.Fatal(err)
		}
		if err := ix.Add(data); err != nil {
			t.Fatal(err)
		}
		if results[i], err = ix.Search(generate(30, dim, 4), 10, ivfgpu.WithNProbe(nlist)); err != nil {
			t.Fatal(err)
		}
	}
	same := 0
	for j := range results[0].IDs {
		if results[0].IDs[j] == results[1].IDs[j] {
			same++
		}
		if d := math.Abs(float64(results[0].Distances[j] - results[1].Distances[j])); d > 1e-3*(1+math.Abs(float64(results[0].Distances[j]))) {
			t.Fatalf("distance %d: %g vs %g", j, results[0].Distances[j], results[1].Distances[j])
		}
	}
	if same < len(results[0].IDs)*9/10 {
		t.Fatalf("only %d of %d ids agree", same, len(results[0].IDs))
	}
}

// Each successful mutation publishes one state; refused ones publish nothing.
func TestStateVersionCountsSuccessfulMutations(t *testing.T) {
	data := generate(nvecs, dim, 1)
	ix, err := ivfgpu.New(dim, testOptions()...)
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	version := func(want uint64, what string) {
		t.Helper()
		if v, err := ix.StateVersion(); err != nil || v != want {
			t.Fatalf("%s: StateVersion = %d (%v), want %d", what, v, err, want)
		}
	}
	version(0, "new")
	if err := ix.Train(data); err != nil {
		t.Fatal(err)
	}
	version(1, "trained")
	if err := ix.Add(data[:10*dim]); err != nil {
		t.Fatal(err)
	}
	version(2, "added")
	bad := append([]float32(nil), data[:dim]...)
	bad[0] = float32(math.NaN())
	if err := ix.Add(bad); err == nil {
		t.Fatal("NaN accepted")
	}
	if err := ix.Train(data); err == nil {
		t.Fatal("train of a filled index accepted")
	}
	if _, err := ix.Search(data[:dim], 1); err != nil {
		t.Fatal(err)
	}
	version(2, "after refused mutations and a search")
	if err := ix.Reset(); err != nil {
		t.Fatal(err)
	}
	version(3, "reset")
	pool, err := ix.PoolBytes()
	if err != nil {
		t.Fatal(err)
	}
	host, err := ix.HostMemoryBytes()
	if err != nil || host <= 0 {
		t.Fatalf("HostMemoryBytes = %d, %v", host, err)
	}
	if resolvedBackend() == ivfgpu.BackendCPU {
		if dev, _ := ix.DeviceMemoryBytes(); pool != 0 || dev != 0 {
			t.Fatalf("CPU index: pool %d, device %d bytes", pool, dev)
		}
	}
}

// Device-memory input needs a CUDA index: a CPU index refuses it before reading the pointer.
func TestDeviceInputNeedsACUDAIndex(t *testing.T) {
	if resolvedBackend() != ivfgpu.BackendCPU {
		t.Skip("needs device buffers; covered by the C++ GPU tests")
	}
	ix, err := ivfgpu.New(dim, testOptions()...)
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	// Not a device pointer, but a CPU index checks the memory kind before any read.
	fake := uintptr(0x1000)
	wantErr(t, "TrainDevice", ix.TrainDevice(fake, nvecs, 0), ivfgpu.ErrInvalidArgument)
	if err := ix.Train(generate(nvecs, dim, 1)); err != nil {
		t.Fatal(err)
	}
	wantErr(t, "AddDevice", ix.AddDevice(fake, 10, 0, 0), ivfgpu.ErrInvalidArgument)
	wantErr(t, "AddDevice nil", ix.AddDevice(0, 10, 0, 0), ivfgpu.ErrInvalidArgument)
	if n, _ := ix.NTotal(); n != 0 {
		t.Fatalf("NTotal = %d", n)
	}
}
