package ivfgpu_test

import (
	"errors"
	"reflect"
	"testing"
	"unsafe"

	ivfgpu "github.com/libivfgpu/libivfgpu/bindings/go"
)

// Queries and results in page-locked buffers give what ordinary slices give.
func TestHostBufferSearchMatchesSlices(t *testing.T) {
	ix, _ := filledIndex(t)
	queries := generate(30, dim, 5)
	const k = 7
	want, err := ix.Search(queries, k, ivfgpu.WithNProbe(4))
	if err != nil {
		t.Fatal(err)
	}
	qb, err := ivfgpu.NewHostBuffer(len(queries) * 4)
	if err != nil {
		t.Fatal(err)
	}
	defer qb.Close()
	ib, err := ivfgpu.NewHostBuffer(30 * k * 8)
	if err != nil {
		t.Fatal(err)
	}
	defer ib.Close()
	db, err := ivfgpu.NewHostBuffer(30 * k * 4)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, v := range qb.Bytes() {
		if v != 0 {
			t.Fatal("a new HostBuffer is not zeroed")
		}
	}
	if uintptr(unsafe.Pointer(&qb.Bytes()[0]))%64 != 0 {
		t.Fatal("a HostBuffer is not 64-byte aligned")
	}
	copy(qb.Float32s(), queries)
	if err := ix.SearchInto(qb.Float32s(), k, ib.Int64s(), db.Float32s(), ivfgpu.WithNProbe(4)); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(ib.Int64s(), want.IDs) || !reflect.DeepEqual(db.Float32s(), want.Distances) {
		t.Fatalf("results from host buffers differ:\n%v\n%v", ib.Int64s(), want.IDs)
	}
}

func TestHostBufferArgumentsAndClose(t *testing.T) {
	for _, n := range []int{0, -1} {
		if _, err := ivfgpu.NewHostBuffer(n); !errors.Is(err, ivfgpu.ErrInvalidArgument) {
			t.Fatalf("NewHostBuffer(%d): %v", n, err)
		}
	}
	b, err := ivfgpu.NewHostBuffer(10)
	if err != nil {
		t.Fatal(err)
	}
	if b.Len() != 10 || len(b.Float32s()) != 2 || len(b.Int64s()) != 1 || len(b.Uint8s()) != 10 || len(b.Int8s()) != 10 {
		t.Fatalf("views of 10 bytes: %d %d %d", b.Len(), len(b.Float32s()), len(b.Int64s()))
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if b.Len() != 0 || b.Float32s() != nil || b.Bytes() != nil {
		t.Fatal("views after Close are not empty")
	}
}
