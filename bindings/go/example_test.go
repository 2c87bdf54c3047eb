package ivfgpu_test

import (
	"context"
	"errors"
	"fmt"
	"log"

	ivfgpu "github.com/libivfgpu/libivfgpu/bindings/go"
)

// Build an index on 64 vectors (vector i is (i, i, i, i)), then find the three nearest
// neighbours of a query, probing every list so that the search is exact. The backend is the
// default: the GPU when there is one, else the CPU.
func Example() {
	const dim = 4
	data := make([]float32, 0, 64*dim)
	for i := 0; i < 64; i++ {
		data = append(data, float32(i), float32(i), float32(i), float32(i))
	}
	ix, err := ivfgpu.New(dim, ivfgpu.WithNList(4))
	if err != nil {
		log.Fatal(err)
	}
	defer ix.Close()
	if err := ix.Train(data); err != nil {
		log.Fatal(err)
	}
	if err := ix.Add(data); err != nil {
		log.Fatal(err)
	}
	r, err := ix.Search([]float32{10.2, 10.2, 10.2, 10.2}, 3, ivfgpu.WithNProbe(4))
	if err != nil {
		log.Fatal(err)
	}
	ids, dists := r.Row(0)
	fmt.Println(ids)
	fmt.Printf("%.2f\n", dists)
	// Output:
	// [10 11 9]
	// [0.16 2.56 5.76]
}

// Errors wrap a status code; test them with errors.Is against the sentinels.
func ExampleError() {
	ix, err := ivfgpu.New(8, ivfgpu.WithBackend(ivfgpu.BackendCPU))
	if err != nil {
		log.Fatal(err)
	}
	defer ix.Close()
	_, err = ix.Search(make([]float32, 8), 1)
	fmt.Println(errors.Is(err, ivfgpu.ErrInvalidState))
	_, err = ix.Search(make([]float32, 7), 1) // not a whole vector: refused before calling C
	fmt.Println(errors.Is(err, ivfgpu.ErrInvalidArgument))
	// Output:
	// true
	// true
}

// Close is idempotent; calls after it return ErrClosed.
func ExampleIndex_Close() {
	ix, err := ivfgpu.New(8, ivfgpu.WithBackend(ivfgpu.BackendCPU))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(ix.Close(), ix.Close())
	_, err = ix.NTotal()
	fmt.Println(err)
	// Output:
	// <nil> <nil>
	// ivfgpu: index is closed
}

// The Context forms of the long calls stop when the context is done; WithProgress reports how
// far a call got (and can stop it too, by returning an error).
func ExampleIndex_TrainContext() {
	const dim = 4
	data := make([]float32, 0, 64*dim)
	for i := 0; i < 64; i++ {
		data = append(data, float32(i), float32(i), float32(i), float32(i))
	}
	ix, err := ivfgpu.New(dim, ivfgpu.WithNList(4), ivfgpu.WithBackend(ivfgpu.BackendCPU))
	if err != nil {
		log.Fatal(err)
	}
	defer ix.Close()
	last := -1.0
	err = ix.TrainContext(context.Background(), data, ivfgpu.WithProgress(func(stage ivfgpu.Stage, done float64) error {
		last = done
		return nil
	}))
	fmt.Println(err, last)

	ctx, cancel := context.WithCancel(context.Background())
	cancel() // the caller gave up
	err = ix.AddContext(ctx, data)
	n, _ := ix.NTotal()
	fmt.Println(errors.Is(err, context.Canceled), errors.Is(err, ivfgpu.ErrCancelled), n)
	// Output:
	// <nil> 1
	// true true 0
}

// An index storing uint8 rows (a quarter of the memory of float32) takes []uint8 rows and
// queries through the typed functions, read in place; integer distances are exact.
func ExampleSearchTyped() {
	const dim = 4
	data := make([]uint8, 0, 64*dim)
	for i := 0; i < 64; i++ {
		data = append(data, uint8(i), uint8(i), uint8(i), uint8(i))
	}
	ix, err := ivfgpu.New(dim, ivfgpu.WithNList(4), ivfgpu.WithStorageType(ivfgpu.StorageUint8))
	if err != nil {
		log.Fatal(err)
	}
	defer ix.Close()
	ctx := context.Background()
	if err := ivfgpu.TrainTyped(ctx, ix, data); err != nil {
		log.Fatal(err)
	}
	if err := ivfgpu.AddTyped(ctx, ix, data, nil); err != nil {
		log.Fatal(err)
	}
	r, err := ivfgpu.SearchTyped(ctx, ix, []uint8{10, 10, 11, 11}, 3, ivfgpu.WithNProbe(4))
	if err != nil {
		log.Fatal(err)
	}
	st, _ := ix.StorageType()
	ids, dists := r.Row(0)
	fmt.Println(st, ids, dists)
	// Output:
	// uint8 [10 11 9] [2 2 10]
}
