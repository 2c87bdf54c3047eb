// Package ivfgpu is the Go binding of libivfgpu: IVF-Flat approximate nearest-neighbour
// search on the GPU (CUDA), with a CPU reference backend.
//
// An Index is created with New, trained on sample vectors, filled with Add or AddWithIDs and
// queried with Search. Ids are first-class: Remove, Update (an upsert), Get and CountIDs act
// on them, WithUniqueIDs makes them unique, and a Filter (NewFilter, WithFilter) restricts a
// search to an allowed or away from a denied set of ids. Vectors are float32 slices, row-major: n vectors of dimension d are
// one slice of n*d values; an index storing uint8 or int8 rows (WithStorageType) also takes
// []uint8 or []int8 through the generic functions TrainTyped, AddTyped, SearchTyped, ...
// WithShards builds one index over several parts, and WithDynamicBatching merges concurrent
// small searches. Close frees the index; it is idempotent, safe from any goroutine
// and waits for calls in progress. A finalizer frees an index that was never closed, but only
// as a safety net: GPU memory is scarce, so Close indexes explicitly.
//
// Errors are *Error values that wrap a Code; compare with errors.Is against the sentinels
// (ErrInvalidArgument, ErrInvalidState, ErrOutOfMemory, ...).
//
// Cancellation and progress: TrainContext, AddContext, AddWithIDsContext, SearchContext,
// SearchIntoContext, LoadContext and DeserializeContext stop when their context is done (the
// library checks about every 50 ms) with the index unchanged; the error matches both
// ErrCancelled and ctx.Err(). WithProgress(fn) reports a call's progress (0 to 1) to fn, which
// may cancel it by returning an error.
//
// Thread-safety: all methods may be called from any goroutine, concurrently, except that Close
// waits for the calls in progress. Mutations (Train, Add, AddWithIDs, Reset) never block
// searches and searches never block mutations: the library publishes each mutation as a new
// immutable state with one atomic swap, a search reads one published state from its start to
// its end, and mutations on one index run one at a time. So one goroutine may ingest while
// others serve searches from the same Index.
//
// Linking uses pkg-config (package ivfgpu); see cgo_nopkgconfig.go for the fallback.
package ivfgpu

/*
#include <stdlib.h>
#include <string.h>
#include <ivfgpu/ivfgpu.h>

// Every C call below runs inside one helper together with the copy of its error message:
// the message is thread-local in C, and between two cgo calls a goroutine may move to
// another OS thread, or another goroutine may make a call on this one and overwrite it.
typedef struct { char text[1024]; } ivfgo_msg;

// One parameter key and its value; a call gets an array of them, turned into an ivf_params
// object inside the helper.
typedef struct { ivf_param_key key; int64_t value; } ivfgo_kv;

static ivf_status ivfgo_capture(ivf_status s, ivfgo_msg* msg) {
  if (s != IVF_OK) {
    strncpy(msg->text, ivf_last_error_message(), sizeof msg->text - 1);
    msg->text[sizeof msg->text - 1] = '\0';
  }
  return s;
}

// *out is NULL (all defaults) when nkv is 0; the caller frees *out in every case.
static ivf_status ivfgo_params(const ivfgo_kv* kv, int64_t nkv, ivf_params** out) {
  *out = NULL;
  if (nkv == 0) return IVF_OK;
  ivf_status s = ivf_params_create(out);
  for (int64_t i = 0; s == IVF_OK && i < nkv; ++i) s = ivf_params_set_int(*out, kv[i].key, kv[i].value);
  return s;
}

// The progress callback: ivfgoProgress (progress.go) reaches the call's Go state through the
// cgo.Handle that travels as the user pointer (an integer, never a Go pointer).
extern int32_t ivfgoProgress(ivf_progress_stage stage, double fraction, uintptr_t handle);

static int32_t ivfgo_progress_fn(ivf_progress_stage stage, double fraction, void* user) {
  return ivfgoProgress(stage, fraction, (uintptr_t)user);
}

// Adds the progress callback to *p (created when NULL) when handle is not 0.
static ivf_status ivfgo_progress(ivf_params** p, uintptr_t handle) {
  if (handle == 0) return IVF_OK;
  ivf_status s = IVF_OK;
  if (*p == NULL) s = ivf_params_create(p);
  if (s == IVF_OK) s = ivf_params_set_progress(*p, ivfgo_progress_fn, (void*)handle);
  return s;
}

static ivf_status ivfgo_create(ivf_index** out, int64_t dim, const ivfgo_kv* kv, int64_t nkv,
                               ivfgo_msg* msg) {
  ivf_params* p;
  ivf_status s = ivfgo_params(kv, nkv, &p);
  if (s == IVF_OK) s = ivf_create(out, dim, p);
  s = ivfgo_capture(s, msg);
  ivf_params_free(p);
  return s;
}

// Host rows travel as (data, dtype): float32, or the index's storage type (TrainTyped, ...).
static ivf_status ivfgo_train(ivf_index* ix, const void* data, ivf_dtype dtype, int64_t n,
                              int64_t dim, uintptr_t progress, ivfgo_msg* msg) {
  ivf_params* p = NULL;
  ivf_status s = ivfgo_progress(&p, progress);
  if (s == IVF_OK) s = ivf_train_ex(ix, p, data, dtype, n, dim);
  s = ivfgo_capture(s, msg);
  ivf_params_free(p);
  return s;
}

static ivf_status ivfgo_add(ivf_index* ix, const void* data, ivf_dtype dtype, int64_t n,
                            int64_t dim, const int64_t* ids, uintptr_t progress, ivfgo_msg* msg) {
  ivf_params* p = NULL;
  ivf_status s = ivfgo_progress(&p, progress);
  if (s == IVF_OK) s = ivf_add_ex(ix, p, data, dtype, n, dim, ids);
  s = ivfgo_capture(s, msg);
  ivf_params_free(p);
  return s;
}

// Page-locked host memory (hostmem.go).
static ivf_status ivfgo_host_alloc(size_t bytes, void** out, ivfgo_msg* msg) {
  return ivfgo_capture(ivf_host_alloc(bytes, out), msg);
}
static ivf_status ivfgo_host_free(void* p, ivfgo_msg* msg) { return ivfgo_capture(ivf_host_free(p), msg); }

// Parameters of a call whose input is CUDA device memory (and the stream to wait for, 0: none).
static ivf_status ivfgo_device_params(uintptr_t stream, ivf_params** out) {
  ivf_status s = ivf_params_create(out);
  if (s == IVF_OK) s = ivf_params_set_int(*out, IVF_PARAM_MEMORY_KIND, IVF_MEMORY_DEVICE);
  if (s == IVF_OK && stream != 0) s = ivf_params_set_ptr(*out, IVF_PARAM_CUDA_STREAM, (void*)stream);
  return s;
}

static ivf_status ivfgo_train_device(ivf_index* ix, uintptr_t data, int64_t n, int64_t dim,
                                     uintptr_t stream, ivfgo_msg* msg) {
  ivf_params* p = NULL;
  ivf_status s = ivfgo_device_params(stream, &p);
  if (s == IVF_OK) s = ivf_train_ex(ix, p, (const void*)data, IVF_DTYPE_F32, n, dim);
  s = ivfgo_capture(s, msg);
  ivf_params_free(p);
  return s;
}

static ivf_status ivfgo_add_device(ivf_index* ix, uintptr_t data, int64_t n, int64_t dim,
                                   uintptr_t ids, uintptr_t stream, ivfgo_msg* msg) {
  ivf_params* p = NULL;
  ivf_status s = ivfgo_device_params(stream, &p);
  if (s == IVF_OK) s = ivf_add_ex(ix, p, (const void*)data, IVF_DTYPE_F32, n, dim, (const int64_t*)ids);
  s = ivfgo_capture(s, msg);
  ivf_params_free(p);
  return s;
}

static ivf_status ivfgo_reset(ivf_index* ix, ivfgo_msg* msg) {
  return ivfgo_capture(ivf_reset(ix), msg);
}

static ivf_status ivfgo_search(const ivf_index* ix, const ivfgo_kv* kv, int64_t nkv,
                               const ivf_filter* filter, const void* queries, ivf_dtype dtype,
                               int64_t n, int64_t dim, int64_t k, int64_t* ids, float* dists,
                               uintptr_t progress, ivfgo_msg* msg) {
  ivf_params* p;
  ivf_status s = ivfgo_params(kv, nkv, &p);
  if (s == IVF_OK && filter != NULL) {
    if (p == NULL) s = ivf_params_create(&p);
    // The library only reads the filter; the pointer key takes a void*.
    if (s == IVF_OK) s = ivf_params_set_ptr(p, IVF_PARAM_FILTER, (void*)filter);
  }
  if (s == IVF_OK) s = ivfgo_progress(&p, progress);
  if (s == IVF_OK) s = ivf_search(ix, p, queries, dtype, n, dim, k, ids, dists);
  s = ivfgo_capture(s, msg);
  ivf_params_free(p);
  return s;
}

static ivf_status ivfgo_remove(ivf_index* ix, const int64_t* ids, int64_t n, int64_t* removed,
                               ivfgo_msg* msg) {
  return ivfgo_capture(ivf_remove(ix, NULL, ids, n, removed), msg);
}

static ivf_status ivfgo_update(ivf_index* ix, const void* data, ivf_dtype dtype, int64_t n,
                               int64_t dim, const int64_t* ids, ivfgo_msg* msg) {
  return ivfgo_capture(ivf_update(ix, NULL, data, dtype, n, dim, ids), msg);
}

static ivf_status ivfgo_update_device(ivf_index* ix, uintptr_t data, int64_t n, int64_t dim,
                                      uintptr_t ids, uintptr_t stream, ivfgo_msg* msg) {
  ivf_params* p = NULL;
  ivf_status s = ivfgo_device_params(stream, &p);
  if (s == IVF_OK) s = ivf_update(ix, p, (const void*)data, IVF_DTYPE_F32, n, dim, (const int64_t*)ids);
  s = ivfgo_capture(s, msg);
  ivf_params_free(p);
  return s;
}

static ivf_status ivfgo_get(const ivf_index* ix, const int64_t* ids, int64_t n, void* out,
                            ivf_dtype dtype, int64_t dim, uint8_t* found, ivfgo_msg* msg) {
  return ivfgo_capture(ivf_get(ix, NULL, ids, n, out, dtype, dim, found), msg);
}

static ivf_status ivfgo_count_ids(const ivf_index* ix, const int64_t* ids, int64_t n,
                                  int64_t* counts, ivfgo_msg* msg) {
  return ivfgo_capture(ivf_count_ids(ix, ids, n, counts), msg);
}

static ivf_status ivfgo_filter_create(ivf_filter** out, const int64_t* ids, int64_t n,
                                      ivf_filter_mode mode, ivfgo_msg* msg) {
  return ivfgo_capture(ivf_filter_create(out, ids, n, mode), msg);
}

static ivf_status ivfgo_filter_bytes(const ivf_filter* f, int64_t* host, int64_t* device,
                                     ivfgo_msg* msg) {
  return ivfgo_capture(ivf_filter_bytes(f, host, device), msg);
}

static ivf_status ivfgo_info(const ivf_index* ix, ivf_info_key key, int64_t* value,
                             ivfgo_msg* msg) {
  return ivfgo_capture(ivf_index_info(ix, key, value), msg);
}

static ivf_status ivfgo_save(const ivf_index* ix, const char* path, int faiss, ivfgo_msg* msg) {
  return ivfgo_capture(faiss ? ivf_save_faiss(ix, path) : ivf_save(ix, path), msg);
}

static ivf_status ivfgo_load(const char* path, const ivfgo_kv* kv, int64_t nkv, ivf_index** out,
                             uintptr_t progress, ivfgo_msg* msg) {
  ivf_params* p;
  ivf_status s = ivfgo_params(kv, nkv, &p);
  if (s == IVF_OK) s = ivfgo_progress(&p, progress);
  if (s == IVF_OK) s = ivf_load(path, p, out);
  s = ivfgo_capture(s, msg);
  ivf_params_free(p);
  return s;
}

static ivf_status ivfgo_serialize(const ivf_index* ix, void* buf, size_t cap, size_t* size,
                                  ivfgo_msg* msg) {
  return ivfgo_capture(ivf_serialize(ix, buf, cap, size), msg);
}

static ivf_status ivfgo_deserialize(const void* buf, size_t size, const ivfgo_kv* kv,
                                    int64_t nkv, ivf_index** out, uintptr_t progress,
                                    ivfgo_msg* msg) {
  ivf_params* p;
  ivf_status s = ivfgo_params(kv, nkv, &p);
  if (s == IVF_OK) s = ivfgo_progress(&p, progress);
  if (s == IVF_OK) s = ivf_deserialize(buf, size, p, out);
  s = ivfgo_capture(s, msg);
  ivf_params_free(p);
  return s;
}

static ivf_status ivfgo_cuda_device_count(int32_t* count, ivfgo_msg* msg) {
  return ivfgo_capture(ivf_cuda_device_count(count), msg);
}
*/
import "C"

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"
)

// NoID is the id of a padding entry in search results: a row holds fewer than k real
// neighbours when fewer candidates exist; the rest have this id and an infinite distance.
const NoID int64 = -1

// Metric is a distance measure.
type Metric int32

// Metrics.
const (
	L2           Metric = C.IVF_METRIC_L2            // squared Euclidean, smallest first
	InnerProduct Metric = C.IVF_METRIC_INNER_PRODUCT // dot product, largest first
	Cosine       Metric = C.IVF_METRIC_COSINE        // cosine similarity, largest first
)

// Backend says where an index lives.
type Backend int32

// Backends.
const (
	BackendAuto Backend = C.IVF_BACKEND_AUTO // the first usable CUDA device, else the CPU
	BackendCPU  Backend = C.IVF_BACKEND_CPU  // the CPU reference backend
	BackendCUDA Backend = C.IVF_BACKEND_CUDA // a CUDA device (ErrUnsupported without one)
)

// StorageType is the element type an index stores its rows in (WithStorageType), and the type
// of rows given to it: every index takes float32 rows (converted by the library), and an index
// of a compact type also takes rows of that type (TrainTyped, AddTyped, SearchTyped, ... with
// []uint8 or []int8).
type StorageType int32

// Storage types. Every backend holds every type (on CUDA, device memory falls with the element
// size). Float32 rows given to a compact index are
// converted: f16 and bf16 round to nearest even (a value beyond the type's range is refused),
// uint8 and int8 take only integers in range (no scaling; anything else is refused, naming the
// row). Cosine needs a floating type.
const (
	StorageF32   StorageType = C.IVF_DTYPE_F32  // float32 (the default)
	StorageF16   StorageType = C.IVF_DTYPE_F16  // IEEE half: rows from float32 only in Go
	StorageUint8 StorageType = C.IVF_DTYPE_U8   // uint8: []uint8 or integer-valued float32 rows
	StorageInt8  StorageType = C.IVF_DTYPE_I8   // int8: []int8 or integer-valued float32 rows
	StorageBF16  StorageType = C.IVF_DTYPE_BF16 // bfloat16: rows from float32 only in Go
)

// String returns "f32", "f16", "uint8", "int8" or "bf16".
func (t StorageType) String() string {
	switch t {
	case StorageF32:
		return "f32"
	case StorageF16:
		return "f16"
	case StorageUint8:
		return "uint8"
	case StorageInt8:
		return "int8"
	case StorageBF16:
		return "bf16"
	}
	return fmt.Sprintf("StorageType(%d)", int32(t))
}

// ShardMode says how an index of several parts (WithShards) holds its vectors.
type ShardMode int32

// Shard modes.
const (
	// ShardSplit deals the rows to the parts in turn; a search runs on every part and their
	// top-k are merged into exactly the one-part result (ids except ties).
	ShardSplit ShardMode = C.IVF_SHARD_SPLIT
	// ShardReplicate gives every part every row; a search's queries are split among the
	// parts, and a part whose device is lost is dropped while the others keep serving.
	ShardReplicate ShardMode = C.IVF_SHARD_REPLICATE
)

// Option is one parameter for New, Load, Deserialize or Search. A call ignores options it
// does not read (WithNList given to Search, say), as the C library does. Values are checked
// by the library against each key's bounds (ErrInvalidArgument).
type Option struct {
	key      C.ivf_param_key
	value    int64
	filter   *Filter         // for key IVF_PARAM_FILTER (a pointer key), which only Search reads
	progress *progressOption // for keyProgress (WithProgress)
}

// WithNList sets the number of inverted lists (build; default 1024).
func WithNList(n int) Option { return Option{C.IVF_PARAM_NLIST, int64(n), nil, nil} }

// WithMetric sets the distance measure (build; default L2).
func WithMetric(m Metric) Option { return Option{C.IVF_PARAM_METRIC, int64(m), nil, nil} }

// WithBackend chooses the backend (build; default BackendAuto).
func WithBackend(b Backend) Option { return Option{C.IVF_PARAM_BACKEND, int64(b), nil, nil} }

// WithDevice chooses the CUDA device ordinal (build; default 0).
func WithDevice(ordinal int) Option { return Option{C.IVF_PARAM_DEVICE, int64(ordinal), nil, nil} }

// WithKMeansIters sets the number of k-means iterations (build).
func WithKMeansIters(n int) Option { return Option{C.IVF_PARAM_KMEANS_ITERS, int64(n), nil, nil} }

// WithMaxPointsPerCentroid caps the training sample at n x nlist vectors (build; default 256).
func WithMaxPointsPerCentroid(n int) Option {
	return Option{C.IVF_PARAM_MAX_POINTS_PER_CENTROID, int64(n), nil, nil}
}

// WithSeed sets the random seed of sampling and k-means (build; default 1234).
func WithSeed(seed int64) Option { return Option{C.IVF_PARAM_SEED, seed, nil, nil} }

// WithNumThreads sets the CPU threads, 0 = all cores (build; default 0).
func WithNumThreads(n int) Option { return Option{C.IVF_PARAM_NUM_THREADS, int64(n), nil, nil} }

// WithNProbe sets the lists probed per query, clamped to nlist. Given to New it sets the
// index's default (8 unless set); given to Search it applies to that search. nprobe = nlist
// is an exact search.
func WithNProbe(n int) Option { return Option{C.IVF_PARAM_NPROBE, int64(n), nil, nil} }

// WithUniqueIDs makes every id name at most one vector: an add or update that would repeat an
// id is refused (ErrInvalidArgument), and Add without ids continues after the largest id ever
// added (build; by default, as in FAISS, ids may repeat, and Remove and Update act on every
// vector with the id).
func WithUniqueIDs() Option { return Option{C.IVF_PARAM_UNIQUE_IDS, 1, nil, nil} }

// WithDeviceBudget sets the bytes of device memory a CUDA index may hold (build, and read by
// Load and Deserialize; default 0: unlimited, every list on the device). With a budget every
// list lives in pinned host memory and the device holds the centroids, a staging ring, search
// scratch and a cache of the most-probed lists, all within the budget; a search streams the
// probed lists the cache does not hold. Given to Load or Deserialize it opens a saved index
// into host memory. A budget too small for the centroids plus the ring and scratch is refused
// (ErrInvalidArgument, naming the minimum). The CPU backend accepts it and has nothing to
// limit.
func WithDeviceBudget(bytes int64) Option { return Option{C.IVF_PARAM_DEVICE_BUDGET, bytes, nil, nil} }

// WithStorageType sets the element type rows are stored in (build; default StorageF32). Given
// to Load or Deserialize it converts a file of float32 rows (a file already compact keeps its
// type).
func WithStorageType(t StorageType) Option {
	return Option{C.IVF_PARAM_STORAGE_TYPE, int64(t), nil, nil}
}

// WithShards builds one index over n parts (build, and read by Load and Deserialize: a file
// opens on any number of parts; default 1): CUDA parts on devices WithDevice, +1, ...
// (wrapping round the usable devices) unless WithShardDevice places them, or n CPU parts,
// behind the same Index and calls. Device memory lives on the first part's device.
func WithShards(n int) Option { return Option{C.IVF_PARAM_SHARDS, int64(n), nil, nil} }

// WithShardDevice places part `part` of WithShards on CUDA device `device` (a device may hold
// several parts; build, Load, Deserialize). Unset parts follow WithDevice, +1, ... A part
// outside [0, 1024) is refused by the library as an unknown key (ErrUnsupported).
func WithShardDevice(part, device int) Option {
	key := C.ivf_param_key(partDeviceBase + 1024) // past IVF_PARAM_SHARD_DEVICE(1023): unknown
	if part >= 0 && part < 1024 {
		key = C.ivf_param_key(partDeviceBase + part) // IVF_PARAM_SHARD_DEVICE(part)
	}
	return Option{key, int64(device), nil, nil}
}

// WithShardMode sets how the parts of WithShards hold the rows (build, Load, Deserialize;
// default ShardSplit).
func WithShardMode(m ShardMode) Option { return Option{C.IVF_PARAM_SHARD_MODE, int64(m), nil, nil} }

// WithDynamicBatching merges concurrent searches (build, and read by Load and Deserialize;
// off by default): calls of at most 64 host-memory queries with the same k, nprobe and filter
// that arrive within the batch window of each other (WithBatchWindow) run as one search; each
// caller gets its own rows, as it would alone. MergedSearches counts them.
func WithDynamicBatching() Option { return Option{C.IVF_PARAM_DYNAMIC_BATCHING, 1, nil, nil} }

// WithBatchWindow sets how long the first search of a batch waits for others (search; default
// 100µs; 0 never merges this call; microsecond resolution, at most 10s). Ignored unless the
// index was built with WithDynamicBatching.
func WithBatchWindow(d time.Duration) Option {
	return Option{C.IVF_PARAM_BATCH_WINDOW_US, d.Microseconds(), nil, nil}
}

// WithFilter restricts a search to the vectors f permits (search; the last WithFilter wins,
// and WithFilter(nil) means no filter). The search holds f for its duration: Close of f waits
// for it, and a search given a closed filter fails with ErrClosed.
func WithFilter(f *Filter) Option { return Option{C.IVF_PARAM_FILTER, 0, f, nil} }

// kvs turns the integer options into the C array the helpers read (nil pointer when empty).
func kvs(opts []Option) (*C.ivfgo_kv, C.int64_t, []C.ivfgo_kv) {
	arr := make([]C.ivfgo_kv, 0, len(opts))
	for _, o := range opts {
		if o.key != C.IVF_PARAM_FILTER && o.key != keyProgress {
			arr = append(arr, C.ivfgo_kv{key: o.key, value: C.int64_t(o.value)})
		}
	}
	if len(arr) == 0 {
		return nil, 0, nil
	}
	return &arr[0], C.int64_t(len(arr)), arr
}

// filterOf returns the filter of the last WithFilter option, or nil.
func filterOf(opts []Option) *Filter {
	var f *Filter
	for _, o := range opts {
		if o.key == C.IVF_PARAM_FILTER {
			f = o.filter
		}
	}
	return f
}

// hostAlloc and hostFree call ivf_host_alloc and ivf_host_free (HostBuffer, hostmem.go).
func hostAlloc(op string, bytes int) (unsafe.Pointer, error) {
	var p unsafe.Pointer
	var msg C.ivfgo_msg
	if err := check(op, C.ivfgo_host_alloc(C.size_t(bytes), &p, &msg), &msg); err != nil {
		return nil, err
	}
	return p, nil
}

func hostFree(op string, p unsafe.Pointer) error {
	var msg C.ivfgo_msg
	return check(op, C.ivfgo_host_free(p, &msg), &msg)
}

// check turns a helper's status and captured message into an error.
func check(op string, s C.ivf_status, msg *C.ivfgo_msg) error {
	if s == C.IVF_OK {
		return nil
	}
	return &Error{Op: op, Code: Code(s), Message: C.GoString(&msg.text[0])}
}

// Index is an IVF-Flat index. Its rows are stored as float32 unless built WithStorageType.
type Index struct {
	// mu guards handle: every call holds it for reading (the library runs concurrent calls
	// on one index safely), Close holds it for writing, because ivf_free must not race with
	// any other call.
	mu     sync.RWMutex
	handle *C.ivf_index
	dim    int
}

// testHookFree, when set by a test, runs each time an index's handle is freed.
var testHookFree atomic.Pointer[func()]

func newIndex(handle *C.ivf_index, dim int) *Index {
	ix := &Index{handle: handle, dim: dim}
	runtime.SetFinalizer(ix, (*Index).finalize)
	return ix
}

// New creates an empty, untrained index of dimension dim.
func New(dim int, opts ...Option) (*Index, error) {
	if dim <= 0 {
		return nil, invalid("New", "dim must be >= 1, got %d", dim)
	}
	kv, nkv, keep := kvs(opts)
	var handle *C.ivf_index
	var msg C.ivfgo_msg
	s := C.ivfgo_create(&handle, C.int64_t(dim), kv, nkv, &msg)
	runtime.KeepAlive(keep)
	if err := check("New", s, &msg); err != nil {
		return nil, err
	}
	return newIndex(handle, dim), nil
}

// Close frees the index. It is idempotent and safe from any goroutine: it waits for calls in
// progress, and later calls return ErrClosed. It always returns nil.
func (ix *Index) Close() error {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	if ix.handle != nil {
		C.ivf_free(ix.handle)
		ix.handle = nil
		runtime.SetFinalizer(ix, nil)
		if hook := testHookFree.Load(); hook != nil {
			(*hook)()
		}
	}
	return nil
}

func (ix *Index) finalize() { _ = ix.Close() }

// acquire read-locks the index and returns its handle, or ErrClosed.
func (ix *Index) acquire() (*C.ivf_index, error) {
	ix.mu.RLock()
	if ix.handle == nil {
		ix.mu.RUnlock()
		return nil, ErrClosed
	}
	return ix.handle, nil
}

// release ends a call begun by acquire; it also keeps ix reachable, so that the finalizer
// cannot free the handle while C is using it.
func (ix *Index) release() {
	ix.mu.RUnlock()
	runtime.KeepAlive(ix)
}

// Dim returns the dimension of the vectors.
func (ix *Index) Dim() int { return ix.dim }

// hostRows is a caller's host rows as C reads them: the first element, the element type, the
// number of elements, and the slice itself (kept alive over the call).
type hostRows struct {
	ptr   unsafe.Pointer
	dtype StorageType
	len   int
	keep  any
}

func f32Rows(data []float32) hostRows {
	r := hostRows{dtype: StorageF32, len: len(data), keep: data}
	if len(data) > 0 {
		r.ptr = unsafe.Pointer(&data[0])
	}
	return r
}

// rows checks that data is a non-empty whole number of vectors and returns their count.
func (ix *Index) rows(op string, data hostRows) (int, error) {
	if data.len == 0 {
		return 0, invalid(op, "no vectors given")
	}
	if data.len%ix.dim != 0 {
		return 0, invalid(op, "length %d is not a multiple of the dimension %d", data.len, ix.dim)
	}
	return data.len / ix.dim, nil
}

// Train trains the coarse quantizer (k-means) on data, at least nlist vectors. An index that
// already holds vectors refuses (ErrInvalidState).
//
// Like every mutation (Train, Add, AddWithIDs, Reset) it may run while other goroutines
// search: they keep reading the previous state until it returns, and calls that start after
// it returned see it.
func (ix *Index) Train(data []float32) error {
	return ix.train(nil, "Train", f32Rows(data), nil)
}

// TrainContext is Train that stops when ctx is done: the call is cancelled at its next
// progress report (about every 50 ms) and returns an error matching both ErrCancelled and
// ctx.Err(), with the index unchanged. It also reads WithProgress; it ignores other options.
func (ix *Index) TrainContext(ctx context.Context, data []float32, opts ...Option) error {
	return ix.train(ctx, "TrainContext", f32Rows(data), opts)
}

func (ix *Index) train(ctx context.Context, op string, data hostRows, opts []Option) error {
	n, err := ix.rows(op, data)
	if err != nil {
		return err
	}
	h, err := ix.acquire()
	if err != nil {
		return err
	}
	defer ix.release()
	pc := newProgressCall(ctx, opts)
	defer pc.delete()
	var msg C.ivfgo_msg
	s := C.ivfgo_train(h, data.ptr, C.ivf_dtype(data.dtype), C.int64_t(n), C.int64_t(ix.dim), pc.user(), &msg)
	runtime.KeepAlive(data.keep)
	return pc.finish(check(op, s, &msg))
}

// Add adds vectors with sequential ids (continuing from NTotal). All or nothing: on failure
// the index is unchanged.
func (ix *Index) Add(data []float32) error {
	return ix.add(nil, "Add", f32Rows(data), nil, nil)
}

// AddContext is Add that stops when ctx is done, as TrainContext does (a cancelled add adds
// nothing). It also reads WithProgress.
func (ix *Index) AddContext(ctx context.Context, data []float32, opts ...Option) error {
	return ix.add(ctx, "AddContext", f32Rows(data), nil, opts)
}

// AddWithIDs adds vectors with caller ids, one per vector (any value except NoID).
func (ix *Index) AddWithIDs(data []float32, ids []int64) error {
	if ids == nil {
		ids = []int64{}
	}
	return ix.add(nil, "AddWithIDs", f32Rows(data), ids, nil)
}

// AddWithIDsContext is AddWithIDs that stops when ctx is done, as TrainContext does. It also
// reads WithProgress.
func (ix *Index) AddWithIDsContext(ctx context.Context, data []float32, ids []int64, opts ...Option) error {
	if ids == nil {
		ids = []int64{}
	}
	return ix.add(ctx, "AddWithIDsContext", f32Rows(data), ids, opts)
}

func (ix *Index) add(ctx context.Context, op string, data hostRows, ids []int64, opts []Option) error {
	n, err := ix.rows(op, data)
	if err != nil {
		return err
	}
	var idp *C.int64_t
	if ids != nil {
		if len(ids) != n {
			return invalid(op, "%d ids for %d vectors", len(ids), n)
		}
		idp = (*C.int64_t)(unsafe.Pointer(&ids[0]))
	}
	h, err := ix.acquire()
	if err != nil {
		return err
	}
	defer ix.release()
	pc := newProgressCall(ctx, opts)
	defer pc.delete()
	var msg C.ivfgo_msg
	s := C.ivfgo_add(h, data.ptr, C.ivf_dtype(data.dtype), C.int64_t(n), C.int64_t(ix.dim), idp, pc.user(), &msg)
	runtime.KeepAlive(data.keep)
	runtime.KeepAlive(ids)
	return pc.finish(check(op, s, &msg))
}

// TrainDevice is Train on n vectors in CUDA device memory: data is a device pointer on the
// index's device (a CUDA index only; others refuse with ErrInvalidArgument) to n*Dim() float32
// values. When stream (a cudaStream_t) is not 0 the library waits for the work queued on it
// before reading data. The call is synchronous. The pointers are not Go memory; the caller
// keeps them valid until it returns.
func (ix *Index) TrainDevice(data uintptr, n int, stream uintptr) error {
	if data == 0 || n <= 0 {
		return invalid("TrainDevice", "need a device pointer and n >= 1, got %#x and %d", data, n)
	}
	h, err := ix.acquire()
	if err != nil {
		return err
	}
	defer ix.release()
	var msg C.ivfgo_msg
	s := C.ivfgo_train_device(h, C.uintptr_t(data), C.int64_t(n), C.int64_t(ix.dim), C.uintptr_t(stream), &msg)
	return check("TrainDevice", s, &msg)
}

// AddDevice is Add (ids = 0: sequential ids) or AddWithIDs (ids: a device pointer to n int64
// ids) for n vectors in CUDA device memory, read as TrainDevice reads them.
func (ix *Index) AddDevice(data uintptr, n int, ids uintptr, stream uintptr) error {
	if data == 0 || n <= 0 {
		return invalid("AddDevice", "need a device pointer and n >= 1, got %#x and %d", data, n)
	}
	h, err := ix.acquire()
	if err != nil {
		return err
	}
	defer ix.release()
	var msg C.ivfgo_msg
	s := C.ivfgo_add_device(h, C.uintptr_t(data), C.int64_t(n), C.int64_t(ix.dim), C.uintptr_t(ids),
		C.uintptr_t(stream), &msg)
	return check("AddDevice", s, &msg)
}

// Reset removes every vector, keeping the trained centroids.
func (ix *Index) Reset() error {
	h, err := ix.acquire()
	if err != nil {
		return err
	}
	defer ix.release()
	var msg C.ivfgo_msg
	return check("Reset", C.ivfgo_reset(h, &msg), &msg)
}

// Result holds the neighbours of Len() queries, K per query, row-major and best first.
// Padding entries have id NoID.
type Result struct {
	IDs       []int64
	Distances []float32
	K         int
}

// Len returns the number of queries.
func (r Result) Len() int {
	if r.K == 0 {
		return 0
	}
	return len(r.IDs) / r.K
}

// Row returns the ids and distances of query i.
func (r Result) Row(i int) ([]int64, []float32) {
	return r.IDs[i*r.K : (i+1)*r.K], r.Distances[i*r.K : (i+1)*r.K]
}

// Search returns the k nearest neighbours of each query (queries: n*Dim() values).
func (ix *Index) Search(queries []float32, k int, opts ...Option) (Result, error) {
	return ix.searchAlloc(nil, "Search", f32Rows(queries), k, opts)
}

// SearchContext is Search that stops when ctx is done: the search is cancelled at its next
// progress report (about every 50 ms) and returns an error matching both ErrCancelled and
// ctx.Err().
func (ix *Index) SearchContext(ctx context.Context, queries []float32, k int, opts ...Option) (Result, error) {
	return ix.searchAlloc(ctx, "SearchContext", f32Rows(queries), k, opts)
}

func (ix *Index) searchAlloc(ctx context.Context, op string, queries hostRows, k int, opts []Option) (Result, error) {
	n, total, err := ix.resultSize(op, queries, k)
	if err != nil {
		return Result{}, err
	}
	r := Result{IDs: make([]int64, total), Distances: make([]float32, total), K: k}
	if err := ix.search(ctx, op, queries, n, k, r.IDs, r.Distances, opts); err != nil {
		return Result{}, err
	}
	return r, nil
}

// SearchInto is Search writing into caller slices of exactly n*k elements each, where n is
// the number of queries. On an argument error the slices are untouched; on other errors
// their contents are unspecified.
func (ix *Index) SearchInto(queries []float32, k int, ids []int64, distances []float32, opts ...Option) error {
	return ix.searchInto(nil, "SearchInto", f32Rows(queries), k, ids, distances, opts)
}

// SearchIntoContext is SearchInto that stops when ctx is done, as SearchContext does (the
// slices' contents are then unspecified).
func (ix *Index) SearchIntoContext(ctx context.Context, queries []float32, k int, ids []int64, distances []float32, opts ...Option) error {
	return ix.searchInto(ctx, "SearchIntoContext", f32Rows(queries), k, ids, distances, opts)
}

func (ix *Index) searchInto(ctx context.Context, op string, queries hostRows, k int, ids []int64, distances []float32, opts []Option) error {
	n, total, err := ix.resultSize(op, queries, k)
	if err != nil {
		return err
	}
	if len(ids) != total || len(distances) != total {
		return invalid(op, "%d queries x k = %d need %d ids and distances, got %d and %d",
			n, k, total, len(ids), len(distances))
	}
	return ix.search(ctx, op, queries, n, k, ids, distances, opts)
}

func (ix *Index) resultSize(op string, queries hostRows, k int) (n, total int, err error) {
	n, err = ix.rows(op, queries)
	if err != nil {
		return 0, 0, err
	}
	if k <= 0 {
		return 0, 0, invalid(op, "k must be >= 1, got %d", k)
	}
	if n > int(^uint(0)>>1)/8/k {
		return 0, 0, invalid(op, "%d x %d results overflow", n, k)
	}
	return n, n * k, nil
}

func (ix *Index) search(ctx context.Context, op string, queries hostRows, n, k int, ids []int64, dists []float32, opts []Option) error {
	h, err := ix.acquire()
	if err != nil {
		return err
	}
	defer ix.release()
	var fh *C.ivf_filter
	if f := filterOf(opts); f != nil {
		// Held for reading until the search returns: Close of the filter waits for it.
		if fh, err = f.acquire(op); err != nil {
			return err
		}
		defer f.release()
	}
	kv, nkv, keep := kvs(opts)
	pc := newProgressCall(ctx, opts)
	defer pc.delete()
	var msg C.ivfgo_msg
	s := C.ivfgo_search(h, kv, nkv, fh, queries.ptr, C.ivf_dtype(queries.dtype), C.int64_t(n),
		C.int64_t(ix.dim), C.int64_t(k), (*C.int64_t)(unsafe.Pointer(&ids[0])),
		(*C.float)(unsafe.Pointer(&dists[0])), pc.user(), &msg)
	runtime.KeepAlive(keep)
	runtime.KeepAlive(queries.keep)
	runtime.KeepAlive(ids)
	runtime.KeepAlive(dists)
	return pc.finish(check(op, s, &msg))
}

// idsPtr is the C view of ids: its first element, or a valid dummy for an empty slice (the
// library writes and reads nothing through it then).
func idsPtr(ids []int64) *C.int64_t {
	if len(ids) == 0 {
		return &noIDs[0]
	}
	return (*C.int64_t)(unsafe.Pointer(&ids[0]))
}

var noIDs [1]C.int64_t

// Remove removes every vector whose id is in ids (absent ids are no error; repeats are
// harmless) and returns how many vectors were removed. A mutation: searches that started
// before it may still return the removed vectors, those that start after it never do.
func (ix *Index) Remove(ids []int64) (int, error) {
	h, err := ix.acquire()
	if err != nil {
		return 0, err
	}
	defer ix.release()
	var removed C.int64_t
	var msg C.ivfgo_msg
	s := C.ivfgo_remove(h, idsPtr(ids), C.int64_t(len(ids)), &removed, &msg)
	runtime.KeepAlive(ids)
	if err := check("Remove", s, &msg); err != nil {
		return 0, err
	}
	return int(removed), nil
}

// Update is an upsert: for each id, the vectors held with that id (all of them, where ids
// repeat) are replaced by the matching row of data, so the id then has one vector; an id the
// index does not hold is added. ids must not repeat nor
// contain NoID. All or nothing, published as one state.
func (ix *Index) Update(data []float32, ids []int64) error {
	return ix.update("Update", f32Rows(data), ids)
}

func (ix *Index) update(op string, data hostRows, ids []int64) error {
	n, err := ix.rows(op, data)
	if err != nil {
		return err
	}
	if len(ids) != n {
		return invalid(op, "%d ids for %d vectors", len(ids), n)
	}
	h, err := ix.acquire()
	if err != nil {
		return err
	}
	defer ix.release()
	var msg C.ivfgo_msg
	s := C.ivfgo_update(h, data.ptr, C.ivf_dtype(data.dtype), C.int64_t(n), C.int64_t(ix.dim),
		idsPtr(ids), &msg)
	runtime.KeepAlive(data.keep)
	runtime.KeepAlive(ids)
	return check(op, s, &msg)
}

// UpdateDevice is Update for n vectors and ids in CUDA device memory (device pointers on the
// index's device), read as TrainDevice reads them.
func (ix *Index) UpdateDevice(data uintptr, n int, ids uintptr, stream uintptr) error {
	if data == 0 || ids == 0 || n <= 0 {
		return invalid("UpdateDevice", "need device pointers and n >= 1, got %#x, %#x and %d", data, ids, n)
	}
	h, err := ix.acquire()
	if err != nil {
		return err
	}
	defer ix.release()
	var msg C.ivfgo_msg
	s := C.ivfgo_update_device(h, C.uintptr_t(data), C.int64_t(n), C.int64_t(ix.dim), C.uintptr_t(ids),
		C.uintptr_t(stream), &msg)
	return check("UpdateDevice", s, &msg)
}

// Get returns the stored vector of each id (the index's own copy: unit length for the cosine
// metric), len(ids)*Dim() values row-major in request order, and whether each id was found;
// the row of an absent id is zeros. An id with several vectors gives the first in list order
// (CountIDs tells how many there are). Reads one published state.
func (ix *Index) Get(ids []int64) (vectors []float32, found []bool, err error) {
	vectors = make([]float32, len(ids)*ix.dim+1) // +1: a valid pointer for no ids
	if found, err = ix.get("Get", ids, unsafe.Pointer(&vectors[0]), StorageF32); err != nil {
		return nil, nil, err
	}
	return vectors[:len(ids)*ix.dim], found, nil
}

// get writes the stored rows of ids into out (len(ids)*Dim() elements of dtype, at least one).
func (ix *Index) get(op string, ids []int64, out unsafe.Pointer, dtype StorageType) ([]bool, error) {
	h, err := ix.acquire()
	if err != nil {
		return nil, err
	}
	defer ix.release()
	flags := make([]C.uint8_t, len(ids)+1)
	var msg C.ivfgo_msg
	s := C.ivfgo_get(h, idsPtr(ids), C.int64_t(len(ids)), out, C.ivf_dtype(dtype), C.int64_t(ix.dim),
		&flags[0], &msg)
	runtime.KeepAlive(ids)
	if err := check(op, s, &msg); err != nil {
		return nil, err
	}
	found := make([]bool, len(ids))
	for i := range found {
		found[i] = flags[i] != 0
	}
	return found, nil
}

// CountIDs returns the number of vectors held with each id (0: absent), from one published
// state.
func (ix *Index) CountIDs(ids []int64) ([]int, error) {
	h, err := ix.acquire()
	if err != nil {
		return nil, err
	}
	defer ix.release()
	counts := make([]C.int64_t, len(ids)+1)
	var msg C.ivfgo_msg
	s := C.ivfgo_count_ids(h, idsPtr(ids), C.int64_t(len(ids)), &counts[0], &msg)
	runtime.KeepAlive(ids)
	if err := check("CountIDs", s, &msg); err != nil {
		return nil, err
	}
	out := make([]int, len(ids))
	for i := range out {
		out[i] = int(counts[i])
	}
	return out, nil
}

func (ix *Index) info(op string, key C.ivf_info_key) (int64, error) {
	h, err := ix.acquire()
	if err != nil {
		return 0, err
	}
	defer ix.release()
	var v C.int64_t
	var msg C.ivfgo_msg
	if err := check(op, C.ivfgo_info(h, key, &v, &msg), &msg); err != nil {
		return 0, err
	}
	return int64(v), nil
}

// NTotal returns the number of vectors held.
func (ix *Index) NTotal() (int, error) {
	v, err := ix.info("NTotal", C.IVF_INFO_NTOTAL)
	return int(v), err
}

// NList returns the number of inverted lists.
func (ix *Index) NList() (int, error) {
	v, err := ix.info("NList", C.IVF_INFO_NLIST)
	return int(v), err
}

// NProbe returns the index's default number of lists probed per query.
func (ix *Index) NProbe() (int, error) {
	v, err := ix.info("NProbe", C.IVF_INFO_NPROBE)
	return int(v), err
}

// Metric returns the distance measure.
func (ix *Index) Metric() (Metric, error) {
	v, err := ix.info("Metric", C.IVF_INFO_METRIC)
	return Metric(v), err
}

// Backend returns the resolved backend: BackendCPU or BackendCUDA.
func (ix *Index) Backend() (Backend, error) {
	v, err := ix.info("Backend", C.IVF_INFO_BACKEND)
	return Backend(v), err
}

// IsTrained reports whether the index has been trained.
func (ix *Index) IsTrained() (bool, error) {
	v, err := ix.info("IsTrained", C.IVF_INFO_IS_TRAINED)
	return v != 0, err
}

// StateVersion returns the number of the published state a call starting now reads: 0 for a
// new index, +1 per successful mutation (Train, Add, Reset, ...). A failed mutation leaves it
// unchanged.
func (ix *Index) StateVersion() (uint64, error) {
	v, err := ix.info("StateVersion", C.IVF_INFO_STATE_VERSION)
	return uint64(v), err
}

// UniqueIDs reports whether ids are unique (WithUniqueIDs).
func (ix *Index) UniqueIDs() (bool, error) {
	v, err := ix.info("UniqueIDs", C.IVF_INFO_UNIQUE_IDS)
	return v != 0, err
}

// RemovedRows returns the removed rows still held, awaiting compaction (every scan skips
// them).
func (ix *Index) RemovedRows() (int, error) {
	v, err := ix.info("RemovedRows", C.IVF_INFO_REMOVED_ROWS)
	return int(v), err
}

// IDMapBytes returns the memory of the id map (device memory on CUDA, else host memory).
func (ix *Index) IDMapBytes() (int64, error) {
	return ix.info("IDMapBytes", C.IVF_INFO_ID_MAP_BYTES)
}

// DeviceMemoryBytes returns the device memory held by the index (0 on the CPU).
func (ix *Index) DeviceMemoryBytes() (int64, error) {
	return ix.info("DeviceMemoryBytes", C.IVF_INFO_DEVICE_MEMORY_BYTES)
}

// HostMemoryBytes returns the host memory held by the index.
func (ix *Index) HostMemoryBytes() (int64, error) {
	return ix.info("HostMemoryBytes", C.IVF_INFO_HOST_MEMORY_BYTES)
}

// PoolBytes returns the device memory the index's memory pool keeps cached for later
// searches (not in DeviceMemoryBytes; 0 on the CPU). Reset and Close give it back to the
// driver.
func (ix *Index) PoolBytes() (int64, error) {
	return ix.info("PoolBytes", C.IVF_INFO_POOL_BYTES)
}

// DeviceBudget returns the device budget in bytes (WithDeviceBudget); 0 = unlimited, and on
// the CPU.
func (ix *Index) DeviceBudget() (int64, error) {
	return ix.info("DeviceBudget", C.IVF_INFO_DEVICE_BUDGET)
}

// ResidentLists returns the lists with a copy on the device now (0 without a budget).
func (ix *Index) ResidentLists() (int, error) {
	v, err := ix.info("ResidentLists", C.IVF_INFO_RESIDENT_LISTS)
	return int(v), err
}

// ResidentBytes returns the bytes of list data held on the device now (0 without a budget).
func (ix *Index) ResidentBytes() (int64, error) {
	return ix.info("ResidentBytes", C.IVF_INFO_RESIDENT_BYTES)
}

// HostTierBytes returns the pinned host memory of the host tier (0 without a budget).
func (ix *Index) HostTierBytes() (int64, error) {
	return ix.info("HostTierBytes", C.IVF_INFO_HOST_TIER_BYTES)
}

// CacheHits returns the probes ((query, list) pairs) served from the device cache since the
// index was created.
func (ix *Index) CacheHits() (int64, error) {
	return ix.info("CacheHits", C.IVF_INFO_CACHE_HITS)
}

// CacheMisses returns the probes ((query, list) pairs) whose list was streamed from the host since the index
// was created.
func (ix *Index) CacheMisses() (int64, error) {
	return ix.info("CacheMisses", C.IVF_INFO_CACHE_MISSES)
}

// StreamedBytes returns the bytes copied from the host to the device by searches since the
// index was created.
func (ix *Index) StreamedBytes() (int64, error) {
	return ix.info("StreamedBytes", C.IVF_INFO_STREAMED_BYTES)
}

// StorageType returns the element type rows are stored in (WithStorageType).
func (ix *Index) StorageType() (StorageType, error) {
	v, err := ix.info("StorageType", C.IVF_INFO_STORAGE_TYPE)
	return StorageType(v), err
}

// Shards returns the number of parts of the index (WithShards; 1 for a plain index).
func (ix *Index) Shards() (int, error) {
	v, err := ix.info("Shards", C.IVF_INFO_SHARDS)
	return int(v), err
}

// LiveShards returns the parts still serving (a replica whose device was lost no longer does).
func (ix *Index) LiveShards() (int, error) {
	v, err := ix.info("LiveShards", C.IVF_INFO_LIVE_SHARDS)
	return int(v), err
}

// MergedSearches returns the searches answered inside a merged batch of two or more
// (WithDynamicBatching) since the index was created.
func (ix *Index) MergedSearches() (int64, error) {
	return ix.info("MergedSearches", C.IVF_INFO_MERGED_SEARCHES)
}

// GraphSearches returns the searches of at most 64 queries answered by replaying a captured
// CUDA graph (the opt-in latency path, IVFGPU_SEARCH_GRAPH=1); 0 on the CPU.
func (ix *Index) GraphSearches() (int64, error) {
	return ix.info("GraphSearches", C.IVF_INFO_GRAPH_SEARCHES)
}

// FusedSearches returns the searches of a few queries answered by the fused small-batch
// kernels (the default latency path) since the index was created; 0 on the CPU.
func (ix *Index) FusedSearches() (int64, error) {
	return ix.info("FusedSearches", C.IVF_INFO_FUSED_SEARCHES)
}

// MergeNanoseconds returns the time split searches of an index of several parts spent after
// their parts returned (moving the parts' top-k to one device and merging them), in ns since
// creation; 0 for one part. Its share of the search time is the merge's cost.
func (ix *Index) MergeNanoseconds() (int64, error) {
	return ix.info("MergeNanoseconds", C.IVF_INFO_MERGE_NANOSECONDS)
}

// PeerMerge reports whether the parts' results cross devices by peer copies (NVLink or PCIe
// peer-to-peer); false when they go through host memory, or every part shares one device.
func (ix *Index) PeerMerge() (bool, error) {
	v, err := ix.info("PeerMerge", C.IVF_INFO_PEER_MERGE)
	return v != 0, err
}

// The bases of IVF_INFO_PART_DEVICE(part) and IVF_INFO_PART_DEVICE_MEMORY_BYTES(part) (and
// of the build key IVF_PARAM_SHARD_DEVICE(part)): function-like macros, which cgo cannot call.
const (
	partDeviceBase       = 4096
	partDeviceMemoryBase = 8192
)

// PartDevice returns the CUDA device of part `part` (-1 on the CPU).
func (ix *Index) PartDevice(part int) (int, error) {
	if part < 0 || part >= 4096 {
		return 0, invalid("PartDevice", "part %d is outside [0, 4096)", part)
	}
	v, err := ix.info("PartDevice", C.ivf_info_key(partDeviceBase+part))
	return int(v), err
}

// PartDeviceMemoryBytes returns the device memory of part `part` (as DeviceMemoryBytes).
func (ix *Index) PartDeviceMemoryBytes(part int) (int64, error) {
	if part < 0 || part >= 4096 {
		return 0, invalid("PartDeviceMemoryBytes", "part %d is outside [0, 4096)", part)
	}
	return ix.info("PartDeviceMemoryBytes", C.ivf_info_key(partDeviceMemoryBase+part))
}

// Save writes the index to path atomically (path is replaced only on success).
func (ix *Index) Save(path string) error { return ix.save("Save", path, 0) }

// SaveFAISS writes the index as a FAISS IndexIVFFlat file (L2 and inner product), atomically.
func (ix *Index) SaveFAISS(path string) error { return ix.save("SaveFAISS", path, 1) }

func (ix *Index) save(op, path string, faiss C.int) error {
	h, err := ix.acquire()
	if err != nil {
		return err
	}
	defer ix.release()
	cpath := C.CString(path)
	defer C.free(unsafe.Pointer(cpath))
	var msg C.ivfgo_msg
	return check(op, C.ivfgo_save(h, cpath, faiss, &msg), &msg)
}

// Serialize returns the index as bytes (the format of Save).
func (ix *Index) Serialize() ([]byte, error) {
	h, err := ix.acquire()
	if err != nil {
		return nil, err
	}
	defer ix.release()
	var size C.size_t
	var msg C.ivfgo_msg
	if err := check("Serialize", C.ivfgo_serialize(h, nil, 0, &size, &msg), &msg); err != nil {
		return nil, err
	}
	buf := make([]byte, int(size)+1) // +1: a valid pointer even for an empty image
	if err := check("Serialize", C.ivfgo_serialize(h, unsafe.Pointer(&buf[0]), size, &size, &msg), &msg); err != nil {
		return nil, err
	}
	return buf[:int(size)], nil
}

// Load reads an index written by Save or a FAISS IndexIVFFlat file. Options choose the
// backend, device, threads and device budget (WithDeviceBudget: open it into host memory),
// the parts (WithShards, WithShardMode), WithDynamicBatching, and WithStorageType (convert a
// file of float32 rows); everything else comes from the file.
func Load(path string, opts ...Option) (*Index, error) {
	return load(nil, "Load", path, opts)
}

// LoadContext is Load that stops when ctx is done: the load is cancelled at its next
// progress report (about every 50 ms) and returns no index and an error matching both
// ErrCancelled and ctx.Err().
func LoadContext(ctx context.Context, path string, opts ...Option) (*Index, error) {
	return load(ctx, "LoadContext", path, opts)
}

func load(ctx context.Context, op, path string, opts []Option) (*Index, error) {
	cpath := C.CString(path)
	defer C.free(unsafe.Pointer(cpath))
	kv, nkv, keep := kvs(opts)
	pc := newProgressCall(ctx, opts)
	defer pc.delete()
	var handle *C.ivf_index
	var msg C.ivfgo_msg
	s := C.ivfgo_load(cpath, kv, nkv, &handle, pc.user(), &msg)
	runtime.KeepAlive(keep)
	if err := pc.finish(check(op, s, &msg)); err != nil {
		return nil, err
	}
	return adopt(op, handle)
}

// Deserialize builds an index from bytes written by Serialize (or a FAISS file image).
func Deserialize(data []byte, opts ...Option) (*Index, error) {
	return deserialize(nil, "Deserialize", data, opts)
}

// DeserializeContext is Deserialize that stops when ctx is done, as LoadContext does.
func DeserializeContext(ctx context.Context, data []byte, opts ...Option) (*Index, error) {
	return deserialize(ctx, "DeserializeContext", data, opts)
}

func deserialize(ctx context.Context, op string, data []byte, opts []Option) (*Index, error) {
	if len(data) == 0 {
		return nil, invalid(op, "no bytes given")
	}
	kv, nkv, keep := kvs(opts)
	pc := newProgressCall(ctx, opts)
	defer pc.delete()
	var handle *C.ivf_index
	var msg C.ivfgo_msg
	s := C.ivfgo_deserialize(unsafe.Pointer(&data[0]), C.size_t(len(data)), kv, nkv, &handle, pc.user(), &msg)
	runtime.KeepAlive(keep)
	runtime.KeepAlive(data)
	if err := pc.finish(check(op, s, &msg)); err != nil {
		return nil, err
	}
	return adopt(op, handle)
}

// adopt wraps a handle made by the library, reading its dimension.
func adopt(op string, handle *C.ivf_index) (*Index, error) {
	var dim C.int64_t
	var msg C.ivfgo_msg
	if err := check(op, C.ivfgo_info(handle, C.IVF_INFO_DIM, &dim, &msg), &msg); err != nil {
		C.ivf_free(handle)
		return nil, err
	}
	return newIndex(handle, int(dim)), nil
}

// FilterMode says whether a Filter's ids are the only ones a search may return, or the ones it
// must not return.
type FilterMode int32

// Filter modes.
const (
	FilterAllow FilterMode = C.IVF_FILTER_ALLOW // only vectors whose id is in the set
	FilterDeny  FilterMode = C.IVF_FILTER_DENY  // every vector whose id is not in the set
)

// Filter is a reusable, immutable set of ids that restricts searches, built once and given to
// any number of searches on any index through WithFilter. A filtered search returns, for each
// query, the k nearest permitted vectors among the lists it probes (exactly what an index
// holding only the permitted vectors would return), padded with NoID when fewer exist.
//
// Close frees it; it is idempotent, safe from any goroutine, and waits for the searches using
// the filter. A finalizer frees a filter that was never closed, as a safety net only.
type Filter struct {
	// mu guards handle: searches hold it for reading, Close for writing, because
	// ivf_filter_free must not run while a search uses the filter.
	mu     sync.RWMutex
	handle *C.ivf_filter
	mode   FilterMode
}

// NewFilter builds a filter from ids (any values; repeats allowed; none gives allow-nothing or
// deny-nothing). The library copies the ids.
func NewFilter(ids []int64, mode FilterMode) (*Filter, error) {
	var handle *C.ivf_filter
	var msg C.ivfgo_msg
	s := C.ivfgo_filter_create(&handle, idsPtr(ids), C.int64_t(len(ids)), C.ivf_filter_mode(mode), &msg)
	runtime.KeepAlive(ids)
	if err := check("NewFilter", s, &msg); err != nil {
		return nil, err
	}
	f := &Filter{handle: handle, mode: mode}
	runtime.SetFinalizer(f, (*Filter).finalize)
	return f, nil
}

// Close frees the filter. It is idempotent and safe from any goroutine: it waits for the
// searches using the filter, and later searches given it return ErrClosed. It always returns
// nil.
func (f *Filter) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.handle != nil {
		C.ivf_filter_free(f.handle)
		f.handle = nil
		runtime.SetFinalizer(f, nil)
	}
	return nil
}

func (f *Filter) finalize() { _ = f.Close() }

// acquire read-locks the filter for a call named op and returns its handle, or ErrClosed.
func (f *Filter) acquire(op string) (*C.ivf_filter, error) {
	f.mu.RLock()
	if f.handle == nil {
		f.mu.RUnlock()
		return nil, closedError{op: op, what: "filter"}
	}
	return f.handle, nil
}

// release ends a call begun by acquire and keeps f reachable until then.
func (f *Filter) release() {
	f.mu.RUnlock()
	runtime.KeepAlive(f)
}

// Mode returns whether the filter allows or denies its ids.
func (f *Filter) Mode() FilterMode { return f.mode }

// Bytes returns the memory the filter holds on the host and, summed over the devices it was
// uploaded to (on first use by a search on a CUDA index), on devices.
func (f *Filter) Bytes() (host, device int64, err error) {
	h, err := f.acquire("Filter.Bytes")
	if err != nil {
		return 0, 0, err
	}
	defer f.release()
	var hb, db C.int64_t
	var msg C.ivfgo_msg
	if err := check("Filter.Bytes", C.ivfgo_filter_bytes(h, &hb, &db, &msg), &msg); err != nil {
		return 0, 0, err
	}
	return int64(hb), int64(db), nil
}

// Version returns the loaded library's version, "MAJOR.MINOR.PATCH".
func Version() string { return C.GoString(C.ivf_version()) }

// ABIVersion returns the loaded library's ABI version; it equals HeaderABIVersion when the
// library matches the header this package was built against.
func ABIVersion() int { return int(C.ivf_abi_version()) }

// HeaderABIVersion is the ABI version of the header this package was compiled with.
const HeaderABIVersion = C.IVF_ABI_VERSION

// CUDADeviceCount returns the number of usable CUDA devices (0 for a CPU-only library).
func CUDADeviceCount() (int, error) {
	var n C.int32_t
	var msg C.ivfgo_msg
	if err := check("CUDADeviceCount", C.ivfgo_cuda_device_count(&n, &msg), &msg); err != nil {
		return 0, err
	}
	return int(n), nil
}
