package ivfgpu

import (
	"runtime"
	"sync"
	"unsafe"
)

// HostBuffer is page-locked host memory allocated by the library (ivf_host_alloc) for the
// queries and results of searches that are repeated: a CUDA index copies them at the bus's
// rate instead of the host's memcpy rate (5 MB of queries: ~0.1 ms instead of ~0.5 ms). The
// memory is C memory, viewed as Go slices (Float32s, Int64s, Uint8s, Int8s) that Search,
// SearchInto and the typed calls take like any slice, with the same results. Without a CUDA
// device it is ordinary memory, so the same program runs everywhere.
//
// Go memory cannot be locked in place (cgo forbids C from keeping Go pointers), so the Go
// binding offers allocation only, not ivf_host_register.
//
// Close frees the memory: the views must not be used after it (they would read freed
// memory). Close is idempotent and safe from any goroutine; a finalizer frees a buffer that
// was never closed, as a safety net only.
type HostBuffer struct {
	mu    sync.Mutex
	p     unsafe.Pointer
	bytes int
}

// NewHostBuffer allocates bytes (> 0) of page-locked host memory, 64-byte aligned and zeroed.
func NewHostBuffer(bytes int) (*HostBuffer, error) {
	if bytes <= 0 {
		return nil, invalid("NewHostBuffer", "bytes is %d, not positive", bytes)
	}
	p, err := hostAlloc("NewHostBuffer", bytes)
	if err != nil {
		return nil, err
	}
	zero := unsafe.Slice((*byte)(p), bytes)
	for i := range zero {
		zero[i] = 0
	}
	b := &HostBuffer{p: p, bytes: bytes}
	runtime.SetFinalizer(b, (*HostBuffer).finalize)
	return b, nil
}

// Len is the buffer's size in bytes (0 after Close).
func (b *HostBuffer) Len() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.bytes
}

// Bytes views the whole buffer (nil after Close).
func (b *HostBuffer) Bytes() []byte { return hostView[byte](b) }

// Float32s views the buffer as len/4 float32 values (nil after Close).
func (b *HostBuffer) Float32s() []float32 { return hostView[float32](b) }

// Int64s views the buffer as len/8 int64 values, e.g. a search's ids (nil after Close).
func (b *HostBuffer) Int64s() []int64 { return hostView[int64](b) }

// Uint8s views the buffer as uint8 rows (nil after Close).
func (b *HostBuffer) Uint8s() []uint8 { return hostView[uint8](b) }

// Int8s views the buffer as int8 rows (nil after Close).
func (b *HostBuffer) Int8s() []int8 { return hostView[int8](b) }

func hostView[T byte | int8 | float32 | int64](b *HostBuffer) []T {
	b.mu.Lock()
	defer b.mu.Unlock()
	var zero T
	n := b.bytes / int(unsafe.Sizeof(zero))
	if b.p == nil || n == 0 {
		return nil
	}
	return unsafe.Slice((*T)(b.p), n)
}

// Close frees the memory. Idempotent; always nil unless the library refuses the pointer
// (which would be a bug).
func (b *HostBuffer) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.p == nil {
		return nil
	}
	err := hostFree("HostBuffer.Close", b.p)
	b.p, b.bytes = nil, 0
	runtime.SetFinalizer(b, nil)
	return err
}

func (b *HostBuffer) finalize() { _ = b.Close() }
