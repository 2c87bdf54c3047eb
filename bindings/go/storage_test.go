package ivfgpu_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	ivfgpu "github.com/libivfgpu/libivfgpu/bindings/go"
)

// sameResults fails unless a and b have equal distances and equal ids except among equal
// distances (ties may come in either order).
func sameResults(t *testing.T, what string, a, b ivfgpu.Result) {
	t.Helper()
	if a.K != b.K || len(a.IDs) != len(b.IDs) {
		t.Fatalf("%s: shapes differ: k %d/%d, %d/%d ids", what, a.K, b.K, len(a.IDs), len(b.IDs))
	}
	for i := range a.IDs {
		if a.Distances[i] != b.Distances[i] {
			t.Fatalf("%s: entry %d: distance %v != %v", what, i, a.Distances[i], b.Distances[i])
		}
		if a.IDs[i] == b.IDs[i] {
			continue
		}
		row := i / a.K
		ties := 0
		for j := row * a.K; j < (row+1)*a.K; j++ {
			if a.Distances[j] == a.Distances[i] {
				ties++
			}
		}
		if ties < 2 {
			t.Fatalf("%s: entry %d: id %d != %d with no tie", what, i, a.IDs[i], b.IDs[i])
		}
	}
}

// bytesOf returns n*d values in [0, 256) from the test LCG, as uint8.
func bytesOf(n, d int, seed uint64) []uint8 {
	f := generate(n, d, seed)
	out := make([]uint8, len(f))
	for i, v := range f {
		out[i] = uint8(v * 256)
	}
	return out
}

func toF32[T ivfgpu.Element](x []T) []float32 {
	out := make([]float32, len(x))
	for i, v := range x {
		out[i] = float32(v)
	}
	return out
}

func cpuIndex(t *testing.T, opts ...ivfgpu.Option) *ivfgpu.Index {
	t.Helper()
	ix, err := ivfgpu.New(dim, append([]ivfgpu.Option{ivfgpu.WithNList(16), ivfgpu.WithBackend(ivfgpu.BackendCPU)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ix.Close() })
	return ix
}

// A uint8 index fed []uint8 (train, add, update, search) equals one fed the same values as
// float32: the same centroids and rows, the same results (exact integer distances here).
func TestUint8RowsEqualTheSameValuesAsFloat32(t *testing.T) {
	ctx := context.Background()
	x := bytesOf(3000, dim, 11)
	q := bytesOf(40, dim, 12)
	typed := cpuIndex(t, ivfgpu.WithStorageType(ivfgpu.StorageUint8))
	plain := cpuIndex(t, ivfgpu.WithStorageType(ivfgpu.StorageUint8))
	if err := ivfgpu.TrainTyped(ctx, typed, x); err != nil {
		t.Fatal(err)
	}
	if err := ivfgpu.AddTyped(ctx, typed, x, nil); err != nil {
		t.Fatal(err)
	}
	if err := plain.Train(toF32(x)); err != nil {
		t.Fatal(err)
	}
	if err := plain.Add(toF32(x)); err != nil {
		t.Fatal(err)
	}
	if st, err := typed.StorageType(); err != nil || st != ivfgpu.StorageUint8 || st.String() != "uint8" {
		t.Fatalf("StorageType = %v, %v", st, err)
	}
	a, _ := typed.Serialize()
	b, _ := plain.Serialize()
	if string(a) != string(b) {
		t.Fatal("the uint8-fed and the float32-fed index differ")
	}
	for _, nprobe := range []int{1, 4, 16} {
		got, err := ivfgpu.SearchTyped(ctx, typed, q, 10, ivfgpu.WithNProbe(nprobe))
		if err != nil {
			t.Fatal(err)
		}
		want, err := plain.Search(toF32(q), 10, ivfgpu.WithNProbe(nprobe))
		if err != nil {
			t.Fatal(err)
		}
		sameResults(t, "uint8 queries", got, want)
		ids, dists := make([]int64, 40*10), make([]float32, 40*10)
		if err := ivfgpu.SearchIntoTyped(ctx, typed, q, 10, ids, dists, ivfgpu.WithNProbe(nprobe)); err != nil {
			t.Fatal(err)
		}
		sameResults(t, "SearchIntoTyped", ivfgpu.Result{IDs: ids, Distances: dists, K: 10}, want)
	}
	fresh := bytesOf(2, dim, 13)
	if err := ivfgpu.UpdateTyped(typed, fresh, []int64{5, 6}); err != nil {
		t.Fatal(err)
	}
	rows, found, err := ivfgpu.GetTyped[uint8](typed, []int64{5, 6, 7, 99999})
	if err != nil {
		t.Fatal(err)
	}
	if !found[0] || !found[1] || !found[2] || found[3] {
		t.Fatalf("found = %v", found)
	}
	for j := 0; j < dim; j++ {
		if rows[j] != fresh[j] || rows[dim+j] != fresh[dim+j] || rows[2*dim+j] != x[7*dim+j] || rows[3*dim+j] != 0 {
			t.Fatalf("GetTyped[uint8] rows differ at column %d", j)
		}
	}
	asF32, _, err := ivfgpu.GetTyped[float32](typed, []int64{7})
	if err != nil || asF32[3] != float32(x[7*dim+3]) {
		t.Fatalf("GetTyped[float32]: %v %v", asF32, err)
	}
	if _, _, err := ivfgpu.GetTyped[int8](typed, []int64{7}); !errors.Is(err, ivfgpu.ErrInvalidArgument) {
		t.Fatalf("GetTyped[int8] of a uint8 index: %v, want ErrInvalidArgument", err)
	}
	// rows of neither float32 nor the storage type are refused, and change nothing
	if err := ivfgpu.AddTyped(ctx, typed, make([]int8, dim), nil); !errors.Is(err, ivfgpu.ErrInvalidArgument) {
		t.Fatalf("int8 rows into a uint8 index: %v", err)
	}
	// float32 rows must hold integers in range
	bad := toF32(fresh[:dim])
	bad[3] = 0.5
	if err := typed.Add(bad); !errors.Is(err, ivfgpu.ErrInvalidArgument) {
		t.Fatalf("0.5 into a uint8 index: %v", err)
	}
	if n, _ := typed.NTotal(); n != 3000 {
		t.Fatalf("NTotal = %d after refused adds", n)
	}
	// the checks of the float32 calls hold for the typed ones
	if err := ivfgpu.AddTyped(ctx, typed, make([]uint8, dim+1), nil); !errors.Is(err, ivfgpu.ErrInvalidArgument) {
		t.Fatal(err)
	}
	if _, err := ivfgpu.SearchTyped(ctx, typed, []uint8{}, 1); !errors.Is(err, ivfgpu.ErrInvalidArgument) {
		t.Fatal(err)
	}
}

type pixel int8

// Named element types go as their underlying type; an int8 index with int8 queries.
func TestInt8NamedTypeAndFloatStorageTypes(t *testing.T) {
	ctx := context.Background()
	raw := bytesOf(1000, dim, 21)
	x := make([]pixel, len(raw))
	for i, v := range raw {
		x[i] = pixel(int(v) - 128)
	}
	ix := cpuIndex(t, ivfgpu.WithStorageType(ivfgpu.StorageInt8))
	if err := ivfgpu.TrainTyped(ctx, ix, x); err != nil {
		t.Fatal(err)
	}
	if err := ivfgpu.AddTyped(ctx, ix, x, nil); err != nil {
		t.Fatal(err)
	}
	r, err := ivfgpu.SearchTyped(ctx, ix, x[:5*dim], 1, ivfgpu.WithNProbe(16))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 5; i++ {
		if r.IDs[i] != int64(i) || r.Distances[i] != 0 {
			t.Fatalf("query %d: %d at %v", i, r.IDs[i], r.Distances[i])
		}
	}
	back, _, err := ivfgpu.GetTyped[pixel](ix, []int64{3})
	if err != nil || back[0] != x[3*dim] {
		t.Fatalf("GetTyped[pixel]: %v %v", back, err)
	}
	// f16 and bf16 take float32 rows in Go
	for _, st := range []ivfgpu.StorageType{ivfgpu.StorageF16, ivfgpu.StorageBF16} {
		f := cpuIndex(t, ivfgpu.WithStorageType(st))
		data := generate(500, dim, 3)
		if err := f.Train(data); err != nil {
			t.Fatal(err)
		}
		if err := f.Add(data); err != nil {
			t.Fatal(err)
		}
		if got, err := f.StorageType(); err != nil || got != st {
			t.Fatalf("StorageType = %v %v, want %v", got, err, st)
		}
		r, err := f.Search(data[:dim], 1, ivfgpu.WithNProbe(16))
		if err != nil || r.IDs[0] != 0 {
			t.Fatalf("%v: %v %v", st, r.IDs, err)
		}
	}
	if ivfgpu.StorageBF16.String() != "bf16" || ivfgpu.StorageType(9).String() != "StorageType(9)" {
		t.Fatal("StorageType.String")
	}
	// cosine needs a floating type; AUTO picks for a compact type what it picks for float32
	if _, err := ivfgpu.New(dim, ivfgpu.WithStorageType(ivfgpu.StorageUint8), ivfgpu.WithMetric(ivfgpu.Cosine)); !errors.Is(err, ivfgpu.ErrUnsupported) {
		t.Fatalf("uint8 cosine: %v", err)
	}
	auto, err := ivfgpu.New(dim, ivfgpu.WithStorageType(ivfgpu.StorageF16))
	if err != nil {
		t.Fatal(err)
	}
	defer auto.Close()
	plain, err := ivfgpu.New(dim)
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	b, _ := auto.Backend()
	if want, _ := plain.Backend(); b != want {
		t.Fatalf("an f16 index on %v, an f32 one on %v", b, want)
	}
	if _, err := ivfgpu.New(dim, ivfgpu.WithStorageType(7)); !errors.Is(err, ivfgpu.ErrInvalidArgument) {
		t.Fatalf("storage type 7: %v", err)
	}
}

// A float32 file opens converted (WithStorageType read by Deserialize and Load).
func TestDeserializeConvertsToTheStorageType(t *testing.T) {
	x := bytesOf(800, dim, 31)
	f := cpuIndex(t)
	if err := f.Train(toF32(x)); err != nil {
		t.Fatal(err)
	}
	if err := f.Add(toF32(x)); err != nil {
		t.Fatal(err)
	}
	blob, err := f.Serialize()
	if err != nil {
		t.Fatal(err)
	}
	u, err := ivfgpu.Deserialize(blob, ivfgpu.WithBackend(ivfgpu.BackendCPU), ivfgpu.WithStorageType(ivfgpu.StorageUint8))
	if err != nil {
		t.Fatal(err)
	}
	defer u.Close()
	if st, _ := u.StorageType(); st != ivfgpu.StorageUint8 {
		t.Fatalf("opened as %v", st)
	}
	got, err := ivfgpu.SearchTyped(context.Background(), u, x[:20*dim], 5, ivfgpu.WithNProbe(16))
	if err != nil {
		t.Fatal(err)
	}
	want, err := f.Search(toF32(x[:20*dim]), 5, ivfgpu.WithNProbe(16))
	if err != nil {
		t.Fatal(err)
	}
	sameResults(t, "converted", got, want)
}

// As tests/capi/shards_test.cpp: one trained index opened on 2 and 3 parts from its bytes
// (the same centroids), the same adds: the results equal the one-part index's.
func TestShardsEqualOnePart(t *testing.T) {
	base := generate(6000, dim, 41)
	more := generate(2000, dim, 42)
	q := generate(100, dim, 43)
	one, err := ivfgpu.New(dim, testOptions()...)
	if err != nil {
		t.Fatal(err)
	}
	defer one.Close()
	if err := one.Train(base); err != nil {
		t.Fatal(err)
	}
	trained, err := one.Serialize()
	if err != nil {
		t.Fatal(err)
	}
	type part struct {
		shards int
		mode   ivfgpu.ShardMode
	}
	all := []*ivfgpu.Index{one}
	parts := []part{{2, ivfgpu.ShardSplit}, {3, ivfgpu.ShardSplit}, {2, ivfgpu.ShardReplicate}}
	for _, p := range parts {
		ix, err := ivfgpu.Deserialize(trained, ivfgpu.WithBackend(testBackend()), ivfgpu.WithShards(p.shards), ivfgpu.WithShardMode(p.mode))
		if err != nil {
			t.Fatal(err)
		}
		defer ix.Close()
		all = append(all, ix)
	}
	for _, ix := range all {
		if err := ix.Add(base); err != nil {
			t.Fatal(err)
		}
		if err := ix.AddWithIDs(more, seq(6000, 2000)); err != nil {
			t.Fatal(err)
		}
	}
	for i, p := range parts {
		ix := all[i+1]
		if s, err := ix.Shards(); err != nil || s != p.shards {
			t.Fatalf("Shards = %d, %v", s, err)
		}
		if s, err := ix.LiveShards(); err != nil || s != p.shards {
			t.Fatalf("LiveShards = %d, %v", s, err)
		}
		if n, _ := ix.NTotal(); n != 8000 {
			t.Fatalf("NTotal = %d", n)
		}
		for _, nprobe := range []int{1, 7, nlist} {
			for _, k := range []int{1, 10, 100} {
				want, err := one.Search(q, k, ivfgpu.WithNProbe(nprobe))
				if err != nil {
					t.Fatal(err)
				}
				got, err := ix.Search(q, k, ivfgpu.WithNProbe(nprobe))
				if err != nil {
					t.Fatal(err)
				}
				sameResults(t, "shards", got, want)
			}
		}
	}
	// The merge's time and the parts' placement are reported.
	for i, p := range parts {
		ix := all[i+1]
		ns, err := ix.MergeNanoseconds()
		if err != nil || (ns > 0) != (p.mode == ivfgpu.ShardSplit) {
			t.Fatalf("MergeNanoseconds = %d, %v (%d parts, mode %d)", ns, err, p.shards, p.mode)
		}
		// The fused kernels are a GPU path: a CPU index never counts one.
		if fused, err := ix.FusedSearches(); err != nil || fused < 0 || (resolvedBackend() == ivfgpu.BackendCPU && fused != 0) {
			t.Fatalf("FusedSearches = %d, %v", fused, err)
		}
		for part := 0; part < p.shards; part++ {
			if _, err := ix.PartDevice(part); err != nil {
				t.Fatal(err)
			}
			if _, err := ix.PartDeviceMemoryBytes(part); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := ix.PartDevice(p.shards); !errors.Is(err, ivfgpu.ErrInvalidArgument) {
			t.Fatalf("PartDevice past the parts: %v", err)
		}
	}
	placed, err := ivfgpu.Deserialize(trained, ivfgpu.WithBackend(testBackend()), ivfgpu.WithShards(2),
		ivfgpu.WithShardDevice(0, 0), ivfgpu.WithShardDevice(1, 0))
	if err != nil {
		t.Fatal(err)
	}
	defer placed.Close()
	if peer, err := placed.PeerMerge(); err != nil || peer {
		t.Fatalf("PeerMerge of parts on one device = %v, %v", peer, err)
	}
	if _, err := ivfgpu.New(dim, ivfgpu.WithShards(2), ivfgpu.WithShardDevice(5000, 0)); !errors.Is(err, ivfgpu.ErrUnsupported) {
		t.Fatalf("WithShardDevice(5000, 0): %v", err)
	}
	if s, _ := one.Shards(); s != 1 {
		t.Fatalf("a plain index has %d parts", s)
	}
	if _, err := ivfgpu.New(dim, ivfgpu.WithShards(0)); !errors.Is(err, ivfgpu.ErrInvalidArgument) {
		t.Fatalf("WithShards(0): %v", err)
	}
	// Compact storage on several parts holds and serves rows like one part.
	compact, err := ivfgpu.New(dim, ivfgpu.WithBackend(ivfgpu.BackendCPU), ivfgpu.WithShards(2), ivfgpu.WithStorageType(ivfgpu.StorageUint8))
	if err != nil {
		t.Fatalf("uint8 on 2 parts: %v", err)
	}
	defer compact.Close()
	if st, err := compact.StorageType(); err != nil || st != ivfgpu.StorageUint8 {
		t.Fatalf("StorageType = %v, %v", st, err)
	}
}

func seq(start, n int) []int64 {
	out := make([]int64, n)
	for i := range out {
		out[i] = int64(start + i)
	}
	return out
}

// Goroutines searching an index built WithDynamicBatching get exactly their solo answers, and
// calls are really merged.
func TestDynamicBatchingGivesTheSoloAnswers(t *testing.T) {
	const d = 24
	base := generate(8000, d, 51)
	queries := generate(600, d, 52)
	ix, err := ivfgpu.New(d, ivfgpu.WithNList(32), ivfgpu.WithBackend(testBackend()), ivfgpu.WithDynamicBatching())
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	if err := ix.Train(base); err != nil {
		t.Fatal(err)
	}
	if err := ix.Add(base); err != nil {
		t.Fatal(err)
	}
	type call struct{ first, n, k, nprobe int }
	const clients, rounds = 16, 6
	calls := make([][]call, clients)
	for c := range calls {
		for r := 0; r < rounds; r++ {
			calls[c] = append(calls[c], call{(7 * (c*rounds + r)) % 590, 1 + (c+r)%3, []int{1, 10, 37}[c%3], 1 + 3*(r%2)})
		}
	}
	run := func(c call, opts ...ivfgpu.Option) (ivfgpu.Result, error) {
		return ix.Search(queries[c.first*d:(c.first+c.n)*d], c.k, append(opts, ivfgpu.WithNProbe(c.nprobe))...)
	}
	solo := make([][]ivfgpu.Result, clients)
	for c := range calls {
		for _, cl := range calls[c] {
			r, err := run(cl, ivfgpu.WithBatchWindow(0))
			if err != nil {
				t.Fatal(err)
			}
			solo[c] = append(solo[c], r)
		}
	}
	if m, err := ix.MergedSearches(); err != nil || m != 0 {
		t.Fatalf("MergedSearches = %d, %v after solo searches", m, err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, clients*rounds)
	for r := 0; r < rounds; r++ {
		start := make(chan struct{})
		for c := 0; c < clients; c++ {
			wg.Add(1)
			go func(c int) {
				defer wg.Done()
				<-start
				got, err := run(calls[c][r], ivfgpu.WithBatchWindow(20*time.Millisecond))
				if err != nil {
					errs <- err
					return
				}
				want := solo[c][r]
				for i := range want.IDs {
					if got.IDs[i] != want.IDs[i] || got.Distances[i] != want.Distances[i] {
						errs <- errors.New("a merged search differs from its solo answer")
						return
					}
				}
			}(c)
		}
		close(start)
		wg.Wait()
	}
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if m, err := ix.MergedSearches(); err != nil || m == 0 {
		t.Fatalf("MergedSearches = %d, %v: nothing was merged", m, err)
	}
	if _, err := ix.Search(queries[:d], 1, ivfgpu.WithBatchWindow(-time.Microsecond)); !errors.Is(err, ivfgpu.ErrInvalidArgument) {
		t.Fatalf("a negative window: %v", err)
	}
}
