package ivfgpu_test

import (
	"sort"
	"testing"

	ivfgpu "github.com/libivfgpu/libivfgpu/bindings/go"
)

// The test data: the same 64-bit LCG as the examples and the Rust tests.
const (
	dim   = 16
	nvecs = 2000
	nlist = 32
)

func generate(n, d int, seed uint64) []float32 {
	out := make([]float32, n*d)
	state := seed
	for i := range out {
		state = state*6364136223846793005 + 1442695040888963407
		out[i] = float32(state>>40) / float32(1<<24)
	}
	return out
}

func cpuOptions() []ivfgpu.Option {
	return []ivfgpu.Option{ivfgpu.WithNList(nlist), ivfgpu.WithBackend(ivfgpu.BackendCPU), ivfgpu.WithSeed(7)}
}

// filledIndex returns a trained CPU index holding generate(nvecs, dim, 1), closed at the end
// of the test.
func filledIndex(t testing.TB) (*ivfgpu.Index, []float32) {
	t.Helper()
	data := generate(nvecs, dim, 1)
	ix, err := ivfgpu.New(dim, cpuOptions()...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ix.Close() })
	if err := ix.Train(data); err != nil {
		t.Fatal(err)
	}
	if err := ix.Add(data); err != nil {
		t.Fatal(err)
	}
	return ix, data
}

type neighbour struct {
	id   int64
	dist float32
}

func bruteForce(data []float32, d int, q []float32, k int) []neighbour {
	all := make([]neighbour, 0, len(data)/d)
	for i := 0; i < len(data)/d; i++ {
		var s float32
		for j := 0; j < d; j++ {
			x := data[i*d+j] - q[j]
			s += x * x
		}
		all = append(all, neighbour{int64(i), s})
	}
	sort.Slice(all, func(a, b int) bool {
		if all[a].dist != all[b].dist {
			return all[a].dist < all[b].dist
		}
		return all[a].id < all[b].id
	})
	return all[:k]
}
