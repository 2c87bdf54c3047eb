package ivfgpu_test

import (
	"math"
	"os"
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

// testBackend is the backend the tests run on: IVFGPU_TEST_BACKEND = cpu (default), cuda or
// auto, so that the same suite checks a GPU-backed index on a machine with a GPU.
func testBackend() ivfgpu.Backend {
	switch b := os.Getenv("IVFGPU_TEST_BACKEND"); b {
	case "", "cpu":
		return ivfgpu.BackendCPU
	case "cuda":
		return ivfgpu.BackendCUDA
	case "auto":
		return ivfgpu.BackendAuto
	default:
		panic("IVFGPU_TEST_BACKEND=" + b + ": expected cpu, cuda or auto")
	}
}

// resolvedBackend is the backend an index on the test backend resolves to.
func resolvedBackend() ivfgpu.Backend {
	gpus, _ := ivfgpu.CUDADeviceCount()
	switch b := testBackend(); {
	case b == ivfgpu.BackendCPU, b == ivfgpu.BackendAuto && gpus == 0:
		return ivfgpu.BackendCPU
	default:
		return ivfgpu.BackendCUDA
	}
}

// testOptions are the build options of the test indexes, on the test backend.
func testOptions() []ivfgpu.Option {
	return []ivfgpu.Option{ivfgpu.WithNList(nlist), ivfgpu.WithBackend(testBackend()), ivfgpu.WithSeed(7)}
}

// filledIndex returns a trained index (on the test backend) holding generate(nvecs, dim, 1), closed at the end
// of the test.
func filledIndex(t testing.TB) (*ivfgpu.Index, []float32) {
	t.Helper()
	data := generate(nvecs, dim, 1)
	ix, err := ivfgpu.New(dim, testOptions()...)
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

// bruteForceWhere is bruteForce among the rows whose index passes keep, padded with
// (NoID, +Inf) to k.
func bruteForceWhere(data []float32, q []float32, k int, keep func(int64) bool) []neighbour {
	all := bruteForce(data, dim, q, len(data)/dim)
	out := make([]neighbour, 0, k)
	for _, n := range all {
		if len(out) < k && keep(n.id) {
			out = append(out, n)
		}
	}
	for len(out) < k {
		out = append(out, neighbour{ivfgpu.NoID, float32(math.Inf(1))})
	}
	return out
}

func closeTo(got, want float32) bool {
	if got == want {
		return true
	}
	return math.Abs(float64(got-want)) <= 1e-4*(1+math.Abs(float64(want)))
}
