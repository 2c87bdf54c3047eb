// The smallest useful libivfgpu program, in Go: build an index on generated data, search it,
// print the neighbours. The same program as examples/rust (identical output) and
// examples/c. Checked with go vet and run in CI.
package main

import (
	"errors"
	"fmt"
	"os"

	ivfgpu "github.com/libivfgpu/libivfgpu/bindings/go"
)

const (
	dim = 16
	n   = 2000
	k   = 3
)

// generate returns n*d values in [0, 1) from a 64-bit linear congruential generator (the
// same in every language's example, so that their outputs can be compared).
func generate(n, d int, seed uint64) []float32 {
	out := make([]float32, n*d)
	state := seed
	for i := range out {
		state = state*6364136223846793005 + 1442695040888963407
		out[i] = float32(state>>40) / float32(1<<24)
	}
	return out
}

func run() (bool, error) {
	data := generate(n, dim, 1)
	ix, err := ivfgpu.New(dim, ivfgpu.WithNList(32), ivfgpu.WithNProbe(4))
	if err != nil {
		return false, err
	}
	defer ix.Close()
	if err := ix.Train(data); err != nil {
		return false, err
	}
	if err := ix.Add(data); err != nil {
		return false, err
	}

	// Query with the first two stored vectors: each finds itself first, at distance 0.
	r, err := ix.Search(data[:2*dim], k)
	if err != nil {
		return false, err
	}
	b, err := ix.Backend()
	if err != nil {
		return false, err
	}
	backend := "CPU"
	if b == ivfgpu.BackendCUDA {
		backend = "CUDA"
	}
	fmt.Printf("libivfgpu %s, backend %s\n", ivfgpu.Version(), backend)
	for i := 0; i < r.Len(); i++ {
		ids, dists := r.Row(i)
		fmt.Printf("query %d:", i)
		for j := range ids {
			fmt.Printf("  id %d (d=%.4f)", ids[j], dists[j])
		}
		fmt.Println()
	}
	return r.IDs[0] == 0 && r.IDs[k] == 1, nil
}

func main() {
	ok, err := run()
	if err != nil {
		// The error names the call, the status and the library's message.
		fmt.Fprintln(os.Stderr, err)
		if errors.Is(err, ivfgpu.ErrOutOfMemory) {
			fmt.Fprintln(os.Stderr, "(out of memory: try a smaller index)")
		}
		os.Exit(1)
	}
	if !ok {
		fmt.Fprintln(os.Stderr, "a stored vector did not find itself")
		os.Exit(2)
	}
}
