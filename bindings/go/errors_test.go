package ivfgpu_test

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"testing"

	ivfgpu "github.com/libivfgpu/libivfgpu/bindings/go"
)

func wantErr(t *testing.T, what string, err error, sentinel error) *ivfgpu.Error {
	t.Helper()
	if !errors.Is(err, sentinel) {
		t.Fatalf("%s: got %v, want %v", what, err, sentinel)
	}
	var e *ivfgpu.Error
	if !errors.As(err, &e) {
		t.Fatalf("%s: %T is not *ivfgpu.Error", what, err)
	}
	if e.Message == "" || e.Op == "" {
		t.Fatalf("%s: empty Op or Message in %#v", what, e)
	}
	return e
}

func TestWrongLengthsAreRefusedBeforeTheCall(t *testing.T) {
	ix, data := filledIndex(t)
	cases := map[string]error{
		"short query": func() error { _, err := ix.Search(data[:dim-1], 1); return err }(),
		"no query":    func() error { _, err := ix.Search(nil, 1); return err }(),
		"k = 0":       func() error { _, err := ix.Search(data[:dim], 0); return err }(),
		"ragged add":  ix.Add(data[:dim+3]),
		"ids short":   ix.AddWithIDs(data[:2*dim], []int64{1}),
		"ids nil":     ix.AddWithIDs(data[:2*dim], nil),
		"train":       ix.Train(data[:5]),
	}
	for what, err := range cases {
		e := wantErr(t, what, err, ivfgpu.ErrInvalidArgument)
		if e.Code != ivfgpu.ErrInvalidArgument {
			t.Fatalf("%s: code %d", what, e.Code)
		}
	}
	ids := []int64{7, 7, 7}
	dists := make([]float32, 4)
	err := ix.SearchInto(data[:2*dim], 2, ids, dists)
	wantErr(t, "SearchInto short buffers", err, ivfgpu.ErrInvalidArgument)
	if ids[0] != 7 || ids[2] != 7 {
		t.Fatal("outputs written on an argument error")
	}
	if n, _ := ix.NTotal(); n != nvecs {
		t.Fatalf("refused calls changed the index: %d", n)
	}
}

func TestLibraryErrorsAreTyped(t *testing.T) {
	ix, err := ivfgpu.New(dim, testOptions()...)
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	data := generate(nvecs, dim, 1)

	_, err = ix.Search(data[:dim], 1)
	e := wantErr(t, "search before train", err, ivfgpu.ErrInvalidState)
	if !strings.Contains(err.Error(), "invalid state") || !strings.Contains(err.Error(), "Search") {
		t.Fatalf("error text %q", err.Error())
	}
	if errors.Is(err, ivfgpu.ErrInvalidArgument) || errors.Is(err, ivfgpu.ErrOutOfMemory) {
		t.Fatal("matches the wrong sentinel")
	}
	_ = e
	wantErr(t, "add before train", ix.Add(data), ivfgpu.ErrInvalidState)
	wantErr(t, "fewer vectors than lists", ix.Train(data[:(nlist-1)*dim]), ivfgpu.ErrInvalidArgument)
	if err := ix.Train(data); err != nil {
		t.Fatal(err)
	}
	bad := append([]float32(nil), data[:dim]...)
	bad[3] = float32(math.NaN())
	wantErr(t, "NaN add", ix.Add(bad), ivfgpu.ErrInvalidArgument)
	if n, _ := ix.NTotal(); n != 0 {
		t.Fatal("a failed add changed the index")
	}
	bad[3] = float32(math.Inf(1))
	_, err = ix.Search(bad, 1)
	wantErr(t, "Inf query", err, ivfgpu.ErrInvalidArgument)
	if err := ix.Add(data); err != nil {
		t.Fatal(err)
	}
	wantErr(t, "train a filled index", ix.Train(data), ivfgpu.ErrInvalidState)
	_, err = ix.Search(data[:dim], 1, ivfgpu.WithNProbe(0))
	wantErr(t, "nprobe 0", err, ivfgpu.ErrInvalidArgument)
}

func TestBadOptionsInNew(t *testing.T) {
	for what, opts := range map[string][]ivfgpu.Option{
		"nlist 0":     {ivfgpu.WithNList(0)},
		"metric 42":   {ivfgpu.WithMetric(42)},
		"threads 1e6": {ivfgpu.WithNumThreads(1 << 20)},
		"seed < 0":    {ivfgpu.WithSeed(-1)},
	} {
		ix, err := ivfgpu.New(4, opts...)
		if ix != nil {
			t.Fatalf("%s: got an index", what)
		}
		wantErr(t, what, err, ivfgpu.ErrInvalidArgument)
	}
	_, err := ivfgpu.New(0)
	wantErr(t, "dim 0", err, ivfgpu.ErrInvalidArgument)
	if n, _ := ivfgpu.CUDADeviceCount(); n == 0 {
		_, err := ivfgpu.New(4, ivfgpu.WithBackend(ivfgpu.BackendCUDA))
		wantErr(t, "CUDA without a device", err, ivfgpu.ErrUnsupported)
	}
}

func TestOutOfMemoryMatchesBothKinds(t *testing.T) {
	for _, c := range []ivfgpu.Code{ivfgpu.ErrOutOfDeviceMemory, ivfgpu.ErrOutOfHostMemory} {
		err := fmt.Errorf("wrapped: %w", &ivfgpu.Error{Op: "Add", Code: c, Message: "x"})
		if !errors.Is(err, ivfgpu.ErrOutOfMemory) || !errors.Is(err, c) {
			t.Fatalf("%v does not match", err)
		}
	}
	if errors.Is(&ivfgpu.Error{Code: ivfgpu.ErrIO}, ivfgpu.ErrOutOfMemory) {
		t.Fatal("ErrIO matches ErrOutOfMemory")
	}
}

// Many goroutines fail at once, each with a message of its own (the rejected nprobe value
// appears in it), interleaved with successful calls that clear the thread's message. A
// message fetched in a second cgo call could belong to another goroutine or be empty.
func TestErrorMessagesBelongToTheirCall(t *testing.T) {
	ix, data := filledIndex(t)
	var wg sync.WaitGroup
	for g := 0; g < 16; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			bad := -1000 - g
			for i := 0; i < 300; i++ {
				_, err := ix.Search(data[:dim], 1, ivfgpu.WithNProbe(bad))
				var e *ivfgpu.Error
				if !errors.As(err, &e) || !strings.Contains(e.Message, fmt.Sprint(bad)) {
					t.Errorf("goroutine %d: message %q", g, err)
					return
				}
				if _, err := ix.Search(data[:dim], 1); err != nil {
					t.Error(err)
					return
				}
			}
		}(g)
	}
	wg.Wait()
}
