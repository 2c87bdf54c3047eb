/*
 * libivfgpu — IVF-Flat vector search on the GPU (CUDA) with a CPU reference backend.
 *
 * This is the one public header: pure C99, it includes only <stdint.h> and <stddef.h>.
 * It is the single source of truth for the ABI. Rules that never change:
 *   - every symbol starts with ivf_, every constant with IVF_;
 *   - enumerations travel as int32_t typedefs whose values are never renumbered;
 *   - counts, dimensions and ids are int64_t; byte sizes are size_t;
 *   - handles are opaque pointers; the caller owns every buffer it passes in, and the library
 *     never frees caller memory; outputs go into caller-owned buffers;
 *   - a function never aborts, exits or prints; it returns an ivf_status
 *     (IVF_OK = 0, failures negative) and sets a thread-local message (ivf_last_error_message);
 *   - on failure the index is exactly as before the call; a call rejected by its argument checks
 *     writes no output; a search failing later (e.g. out of memory) leaves its output buffers'
 *     contents unspecified, and never writes beyond the n*k elements it was given.
 *
 * Thread-safety and consistency (docs/architecture.md, "Concurrency"): every call on an index
 * may run concurrently from any number of threads, except ivf_free, which must not race with any
 * other call on the same index (the caller ends the handle's life). An index is a sequence of
 * published, immutable states, numbered by IVF_INFO_STATE_VERSION:
 *   - a search (and every other read: ivf_index_info, ivf_ntotal, ivf_serialize, ivf_save,
 *     ivf_save_faiss) reads exactly one published state from its start to its end: the state
 *     before or after each mutation, never a mix; it never waits for a mutation;
 *   - a mutation (ivf_train, ivf_add, ivf_reset and their _ex forms) builds its new state beside
 *     the current one, sharing what did not change, and publishes it with one atomic swap when
 *     it succeeds (a failed mutation publishes nothing); mutations on one index run one at a
 *     time, in the order they take the index's mutation lock; a mutation never waits for
 *     searches;
 *   - read-your-writes: a call that starts after a mutation has returned sees it.
 * Memory of a replaced state is reclaimed when the last search that reads it has finished (on
 * the GPU: after that search's stream work), so long searches pin old states; a mutation that
 * cannot allocate meanwhile fails with an out-of-memory status and leaves the index unchanged.
 * Parameter objects are not locked: configure one from one thread, then share it read-only.
 */
#ifndef IVFGPU_IVFGPU_H
#define IVFGPU_IVFGPU_H

#include <stddef.h>
#include <stdint.h>

#if defined(_WIN32)
#  if defined(IVFGPU_BUILDING_LIBRARY)
#    define IVF_API __declspec(dllexport)
#  else
#    define IVF_API __declspec(dllimport)
#  endif
#elif defined(__GNUC__) || defined(__clang__)
#  define IVF_API __attribute__((visibility("default")))
#else
#  define IVF_API
#endif

#if defined(__GNUC__) || defined(__clang__)
#  define IVF_NODISCARD __attribute__((warn_unused_result))
#else
#  define IVF_NODISCARD
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------------------------ */
/* Versions                                                                                   */
/* ------------------------------------------------------------------------------------------ */

/** Release version of the header. The library's own is returned by ivf_version(). */
#define IVF_VERSION_MAJOR 0
#define IVF_VERSION_MINOR 2
#define IVF_VERSION_PATCH 0
/** ABI major: the SONAME is libivfgpu.so.<IVF_ABI_VERSION>. It changes only when a symbol is
 *  removed or a signature changes, which we avoid by adding _v2 symbols instead. */
#define IVF_ABI_VERSION 1

/** "MAJOR.MINOR.PATCH" of the loaded library. Static storage; never NULL; thread-safe. */
IVF_API const char* ivf_version(void);
/** IVF_ABI_VERSION of the loaded library; a host compares it with the header it was built
 *  against. Thread-safe. */
IVF_API uint32_t ivf_abi_version(void);

/* ------------------------------------------------------------------------------------------ */
/* Status codes                                                                               */
/* ------------------------------------------------------------------------------------------ */

typedef int32_t ivf_status;
#define IVF_OK                        0
#define IVF_ERR_INVALID_ARGUMENT     (-1)  /**< NULL pointer, bad size, NaN/Inf in data, ... */
#define IVF_ERR_OUT_OF_DEVICE_MEMORY (-2)  /**< a GPU allocation failed; nothing changed      */
#define IVF_ERR_OUT_OF_HOST_MEMORY   (-3)  /**< a host allocation failed; nothing changed     */
#define IVF_ERR_CUDA                 (-4)  /**< a non-sticky CUDA or cuBLAS error              */
#define IVF_ERR_UNSUPPORTED          (-5)  /**< unknown key, dtype or feature not built in    */
#define IVF_ERR_INVALID_STATE        (-6)  /**< e.g. add or search before train               */
#define IVF_ERR_BUFFER_TOO_SMALL     (-7)  /**< caller buffer shorter than required           */
#define IVF_ERR_IO                   (-8)  /**< open/read/write/rename failed                 */
#define IVF_ERR_CORRUPT_DATA         (-9)  /**< a file or buffer failed validation            */
#define IVF_ERR_VERSION_MISMATCH    (-10)  /**< file format or ABI version not understood     */
#define IVF_ERR_DEVICE_LOST         (-11)  /**< sticky CUDA error: this index's GPU is unusable */
#define IVF_ERR_INTERNAL            (-12)  /**< a bug: please report it with the message      */
#define IVF_ERR_CANCELLED           (-13)  /**< a progress callback asked to stop; nothing changed */

/** Short static description of a status ("invalid argument", ...). Never NULL; unknown codes
 *  give "unknown status". Thread-safe. */
IVF_API const char* ivf_status_string(ivf_status status);

/** Message describing the last failure of an ivf_ call made by the calling thread. Never NULL;
 *  "" after a call that succeeded. Valid until the thread's next ivf_ call. */
IVF_API const char* ivf_last_error_message(void);

/* ------------------------------------------------------------------------------------------ */
/* Enumerations                                                                               */
/* ------------------------------------------------------------------------------------------ */

/** Distance. L2 results are squared Euclidean distances, smallest first. Inner-product results
 *  are dot products, largest first. Cosine normalises data and queries to unit length and then
 *  behaves as inner product (results are cosine similarities, largest first). */
typedef int32_t ivf_metric;
#define IVF_METRIC_L2            0
#define IVF_METRIC_INNER_PRODUCT 1
#define IVF_METRIC_COSINE        2

/** Element types. An index stores its rows in one type (IVF_PARAM_STORAGE_TYPE; default f32);
 *  train, add, update, search and get take data in f32 or in that type (any other type:
 *  IVF_ERR_INVALID_ARGUMENT). f32 data for a compact index is converted: f16 and bf16 round to
 *  nearest, ties to even (a value beyond the type's range is refused); uint8 and int8 take only
 *  integers in range (no scaling; anything else is refused, naming the row). Distances are
 *  exact for the stored values: an f32 query stays f32 and the distance between it and the
 *  stored (decoded) vector is computed in fp32; a query of the storage type is decoded, except
 *  integer queries against integer rows, whose distances are exact integers rounded once to
 *  float. f16 and bf16 queries on rows of their own type are the GPU's fastest form for those
 *  rows (its scan multiplies both as they are); the results are the same. Centroids are f32,
 *  and training data only feeds k-means: it is decoded, never converted or range-checked.
 *  Cosine needs a floating type (f32, f16, bf16: rows are normalised in f32, then rounded);
 *  with uint8/int8 ivf_create returns IVF_ERR_UNSUPPORTED. Every backend holds every type (CPU,
 *  CUDA, a device budget, several parts); a CUDA index converts f32 rows on the GPU (a
 *  budgeted one on the host, where its rows live), with the same rounding and checks, and its
 *  device memory falls with the element size. */
typedef int32_t ivf_dtype;
#define IVF_DTYPE_F32  0
#define IVF_DTYPE_F16  1
#define IVF_DTYPE_U8   2
#define IVF_DTYPE_I8   3
#define IVF_DTYPE_BF16 4

/** Where an index lives. AUTO picks the first usable CUDA device, else the CPU. */
typedef int32_t ivf_backend;
#define IVF_BACKEND_AUTO 0
#define IVF_BACKEND_CPU  1
#define IVF_BACKEND_CUDA 2

/** Where the query and result buffers given to ivf_search live. DEVICE needs a CUDA index;
 *  the pointers are then CUDA device pointers on the index's device. */
typedef int32_t ivf_memory_kind;
#define IVF_MEMORY_HOST   0
#define IVF_MEMORY_DEVICE 1

/* ------------------------------------------------------------------------------------------ */
/* Parameters: an opaque, extensible key/value object                                         */
/* ------------------------------------------------------------------------------------------ */

typedef struct ivf_params ivf_params;

/** How an index of several parts (IVF_PARAM_SHARDS) holds its vectors.
 *  SPLIT: rows are dealt to the parts in turn (each holds ~1/G of every list); a search runs
 *  on every part and their top-k are merged into exactly the one-part result (ids except ties):
 *  on the first part's device for CUDA parts (peer copies where the devices have peer access,
 *  host memory otherwise), on the host for CPU parts.
 *  A part whose device is lost makes the index IVF_ERR_DEVICE_LOST.
 *  REPLICATE: every part holds every row; a search's queries are split among the parts; a part
 *  whose device is lost is dropped and the others keep serving (and take the mutations).
 *  With several parts, ivf_get returns the row of the lowest-numbered part holding the id. */
typedef int32_t ivf_shard_mode;
#define IVF_SHARD_SPLIT     0
#define IVF_SHARD_REPLICATE 1

/** Keys. Build keys are read by ivf_create (and ivf_load); search keys by ivf_search.
 *  Setting a key that the receiving call does not read is harmless. */
typedef int32_t ivf_param_key;
/* build keys */
#define IVF_PARAM_NLIST            1  /**< number of lists, >= 1; default 1024                 */
#define IVF_PARAM_METRIC           2  /**< an ivf_metric; default IVF_METRIC_L2                */
#define IVF_PARAM_BACKEND          3  /**< an ivf_backend; default IVF_BACKEND_AUTO            */
#define IVF_PARAM_DEVICE           4  /**< CUDA device ordinal for CUDA/AUTO; default 0        */
#define IVF_PARAM_KMEANS_ITERS     5  /**< k-means iterations; default 10 (as FAISS IVF)      */
#define IVF_PARAM_MAX_POINTS_PER_CENTROID 6 /**< training sample cap = this x nlist; default 256 */
#define IVF_PARAM_SEED             7  /**< random seed for sampling and k-means; default 1234  */
#define IVF_PARAM_NUM_THREADS      8  /**< CPU threads, 0 = all cores; default 0               */
#define IVF_PARAM_UNIQUE_IDS       9  /**< 1: every id names at most one vector (an add or
                                           update that would repeat an id is refused); 0
                                           (default, as FAISS): ids may repeat, and remove /
                                           update act on every vector with the id          */
#define IVF_PARAM_DEVICE_BUDGET   10  /**< bytes of device memory the index may hold (CUDA);
                                           0 (default): unlimited, every list on the device.
                                           Set: every list lives in pinned host memory, the
                                           device holds the centroids, a staging ring, search
                                           scratch and a cache of the most-probed lists, all
                                           within the budget (docs/host-tier.md); a search
                                           streams the probed lists it does not hold. Also
                                           read by ivf_load / ivf_deserialize ("open"): the
                                           file's lists become the host tier. Too small for
                                           the centroids plus the ring and scratch:
                                           IVF_ERR_INVALID_ARGUMENT naming the minimum.
                                           Searches of a budgeted index run one at a time
                                           and return when done (also on a caller's stream);
                                           results equal the unbudgeted index's exactly. The
                                           CPU backend ignores the key                       */
#define IVF_PARAM_DYNAMIC_BATCHING 11 /**< 1: concurrent ivf_search calls of at most 64
                                           host-memory queries with the same k, nprobe and
                                           filter, arriving within IVF_PARAM_BATCH_WINDOW_US
                                           of each other, run as one search; each caller gets
                                           its own rows, as it would alone, and waits at most
                                           the window beyond that search. 0 (default): off  */
#define IVF_PARAM_SHARDS          12  /**< parts of one index, >= 1; default 1. Each part is a
                                           backend of its own: CUDA parts on devices
                                           IVF_PARAM_DEVICE, +1, ... (wrapping round the usable
                                           devices, so parts may share one) or those
                                           IVF_PARAM_SHARD_DEVICE(part) names, or all on the
                                           CPU (IVF_BACKEND_CPU).
                                           The handle and every call stay the same. Device
                                           memory (CUDA parts) lives on the first part's
                                           device (IVF_INFO_PART_DEVICE(0)); a device-memory
                                           search on a caller's stream waits for that stream,
                                           then returns with its results written (synchronous);
                                           device-memory adds and updates are copied to the
                                           host first. Also read by ivf_load: a file opens on
                                           any number of parts                              */
#define IVF_PARAM_SHARD_MODE      13  /**< an ivf_shard_mode; default IVF_SHARD_SPLIT        */
#define IVF_PARAM_SHARD_DEVICE(part) (4096 + (part)) /**< the CUDA device of part `part` of
                                           IVF_PARAM_SHARDS, part in [0, 1024); a device may
                                           hold several parts; -1 (default): IVF_PARAM_DEVICE +
                                           part, wrapping. Read by ivf_create and ivf_load. A
                                           device that does not exist: IVF_ERR_UNSUPPORTED with
                                           IVF_BACKEND_CUDA; with AUTO every part then runs on
                                           the CPU (an index never mixes kinds)            */
#define IVF_PARAM_STORAGE_TYPE    14  /**< the ivf_dtype the index stores rows in; default
                                           IVF_DTYPE_F32. Read by ivf_load / ivf_deserialize
                                           too: a file of f32 rows then converts on load (a
                                           file already compact keeps its type)              */
/* search keys (IVF_PARAM_NPROBE given to ivf_create sets the index's default nprobe);
   IVF_PARAM_MEMORY_KIND and IVF_PARAM_CUDA_STREAM are also read by ivf_train_ex / ivf_add_ex */
#define IVF_PARAM_NPROBE          32  /**< lists probed per query, >= 1, clamped to nlist; default 8 */
#define IVF_PARAM_MEMORY_KIND     33  /**< an ivf_memory_kind; default IVF_MEMORY_HOST         */
#define IVF_PARAM_CUDA_STREAM     34  /**< pointer key: a cudaStream_t to run on; default NULL
                                           (the library uses a stream of its own and
                                           synchronises before returning)                    */
#define IVF_PARAM_FILTER          35  /**< pointer key: an ivf_filter* restricting the vectors a
                                           search may return; default NULL (no filter). The
                                           filter must outlive the searches that use it      */
#define IVF_PARAM_BATCH_WINDOW_US 36  /**< dynamic batching: how long (microseconds) the first
                                           call of a batch waits for others; 0 = never merge
                                           this call; default 100. Ignored unless the index was
                                           created with IVF_PARAM_DYNAMIC_BATCHING = 1       */

/** Create a parameter object holding every default. *out receives it; the caller frees it
 *  with ivf_params_free. Returns IVF_OK, IVF_ERR_INVALID_ARGUMENT (out NULL) or
 *  IVF_ERR_OUT_OF_HOST_MEMORY. Thread-safe. */
IVF_API IVF_NODISCARD ivf_status ivf_params_create(ivf_params** out);
/** Free a parameter object; NULL is a no-op. Any thread. */
IVF_API void ivf_params_free(ivf_params* params);
/** Set an integer key. IVF_ERR_UNSUPPORTED for an unknown key (or a pointer key),
 *  IVF_ERR_INVALID_ARGUMENT for a value out of the key's bounds (nothing changes). */
IVF_API IVF_NODISCARD ivf_status ivf_params_set_int(ivf_params* params, ivf_param_key key,
                                                    int64_t value);
/** Read an integer key's current value (its default unless set). */
IVF_API IVF_NODISCARD ivf_status ivf_params_get_int(const ivf_params* params, ivf_param_key key,
                                                    int64_t* value);
/** Set a pointer key (IVF_PARAM_CUDA_STREAM). The library does not own the pointer. */
IVF_API IVF_NODISCARD ivf_status ivf_params_set_ptr(ivf_params* params, ivf_param_key key,
                                                    void* value);
/** Progress and cancellation of long calls. A callback set on the parameters of ivf_train_ex,
 *  ivf_add_ex, ivf_search, ivf_load or ivf_deserialize is called on the calling thread with the
 *  call's stage and the fraction done (0 to 1, never decreasing): once at the start (0), about
 *  every 50 ms while the work runs (on the GPU: between device steps and while the calling
 *  thread waits for the device), and once at the end (1, before a mutation publishes its
 *  result). Returning 0 continues; any other value cancels the call, which returns
 *  IVF_ERR_CANCELLED with the index exactly as it was (a mutation publishes nothing, a load
 *  returns no handle; a cancelled search's outputs are unspecified). To cancel from another
 *  thread, have the callback return a flag that thread sets. A synchronous search returns,
 *  cancelled or not, only after the device work it queued, so nothing is written to its
 *  outputs after it returns. An asynchronous search (IVF_MEMORY_DEVICE on a caller's
 *  IVF_PARAM_CUDA_STREAM) only queues work: its fraction counts the queries queued, 1 means
 *  queued rather than done, and a cancel stops further queueing while the work already queued
 *  runs on the caller's stream and may write any of the outputs. A search merged by dynamic
 *  batching reports while it waits for its batch; a cancel then is answered when the batch is
 *  done (the other callers' searches go on). The callback must not call into the same index's
 *  mutations; it may read the index. */
typedef int32_t ivf_progress_stage;
#define IVF_PROGRESS_TRAIN  1
#define IVF_PROGRESS_ADD    2
#define IVF_PROGRESS_LOAD   3
#define IVF_PROGRESS_SEARCH 4
typedef int32_t (*ivf_progress_fn)(ivf_progress_stage stage, double fraction, void* user);
/** Set (fn non-NULL) or clear (fn NULL) the progress callback; user is passed back unchanged. */
IVF_API IVF_NODISCARD ivf_status ivf_params_set_progress(ivf_params* params, ivf_progress_fn fn,
                                                         void* user);

/** Inclusive bounds of an integer key's accepted values. Thread-safe. */
IVF_API IVF_NODISCARD ivf_status ivf_param_bounds(ivf_param_key key, int64_t* min_value,
                                                  int64_t* max_value);

/* ------------------------------------------------------------------------------------------ */
/* The index                                                                                  */
/* ------------------------------------------------------------------------------------------ */

typedef struct ivf_index ivf_index;

/** Create an empty, untrained index of dimension dim (>= 1) with the build keys of params
 *  (NULL = all defaults). The backend is fixed here: AUTO takes CUDA device
 *  IVF_PARAM_DEVICE when it is usable, else the CPU; CUDA fails with IVF_ERR_UNSUPPORTED when
 *  the library was built without CUDA or no device is usable. On success *out receives the
 *  handle, to be released with ivf_free. Returns IVF_OK, IVF_ERR_INVALID_ARGUMENT,
 *  IVF_ERR_UNSUPPORTED, IVF_ERR_OUT_OF_HOST_MEMORY, IVF_ERR_CUDA. Thread-safe. */
IVF_API IVF_NODISCARD ivf_status ivf_create(ivf_index** out, int64_t dim, const ivf_params* params);

/** Free an index and everything it holds; NULL is a no-op. Must not race with other calls on
 *  the same index. Any thread. */
IVF_API void ivf_free(ivf_index* index);

/** Train the coarse quantizer (k-means) on n vectors of dimension dim, row-major. At most
 *  IVF_PARAM_MAX_POINTS_PER_CENTROID x nlist of them (a seeded random sample) are used;
 *  n must be >= nlist. Training an index that already holds vectors is refused
 *  (IVF_ERR_INVALID_STATE; call ivf_reset first); training again an empty trained index
 *  replaces its centroids. Vectors with NaN or Inf are refused (IVF_ERR_INVALID_ARGUMENT), and
 *  so, under L2 and inner product, are vectors whose squared norm exceeds FLT_MAX / 8
 *  (elements beyond about 6.5e18: their distances could overflow float); cosine accepts them.
 *  Synchronous. A mutation: concurrent searches keep reading the previous state. */
IVF_API IVF_NODISCARD ivf_status ivf_train(ivf_index* index, const void* data, ivf_dtype dtype,
                                           int64_t n, int64_t dim);

/** Add n vectors (row-major, dimension dim) to a trained index. ids: n caller ids (any int64
 *  values, -1 excepted; repeats allowed unless the index was created with IVF_PARAM_UNIQUE_IDS,
 *  which refuses an id already held or repeated in the batch), or NULL for sequential ids
 *  ntotal, ntotal+1, ... (in a unique-ids index: one more than the largest id ever added)
 *  An untrained index refuses (IVF_ERR_INVALID_STATE): train first, explicitly. NaN/Inf (and,
 *  under L2 and inner product, a squared norm beyond FLT_MAX / 8, as for ivf_train) in
 *  data: IVF_ERR_INVALID_ARGUMENT. All or nothing: on any failure the index is unchanged.
 *  Synchronous. A mutation: concurrent searches keep reading the previous state until it
 *  returns. */
IVF_API IVF_NODISCARD ivf_status ivf_add(ivf_index* index, const void* data, ivf_dtype dtype,
                                         int64_t n, int64_t dim, const int64_t* ids);

/** Remove every vector, keeping the trained centroids. A mutation (see the top of this header);
 *  on a CUDA index the device memory pool's cached blocks are returned to the driver. */
IVF_API IVF_NODISCARD ivf_status ivf_reset(ivf_index* index);

/** ivf_train with parameters: params (NULL = defaults) is read for IVF_PARAM_MEMORY_KIND and
 *  IVF_PARAM_CUDA_STREAM. With IVF_MEMORY_DEVICE, data is a CUDA device pointer on the index's
 *  device (CUDA index only, else IVF_ERR_INVALID_ARGUMENT; so is a pointer that device cannot
 *  address: pageable host memory, another device's memory. Page-locked host memory and managed
 *  memory are accepted); a stream, when set, is one the caller's producer work was queued on: the library waits for it before reading data. With
 *  or without one, it also waits for the work queued on the default stream of the index's
 *  device (the legacy stream and the calling thread's per-thread stream), such as the
 *  cudaMemcpy or cudaMemset that filled data: both can return before their bytes land. The
 *  call is synchronous either way. Otherwise as ivf_train. */
IVF_API IVF_NODISCARD ivf_status ivf_train_ex(ivf_index* index, const ivf_params* params,
                                              const void* data, ivf_dtype dtype, int64_t n,
                                              int64_t dim);

/** ivf_add with parameters, read as for ivf_train_ex: with IVF_MEMORY_DEVICE both data and ids
 *  (when not NULL) are device pointers on the index's device. Otherwise as ivf_add. */
IVF_API IVF_NODISCARD ivf_status ivf_add_ex(ivf_index* index, const ivf_params* params,
                                            const void* data, ivf_dtype dtype, int64_t n,
                                            int64_t dim, const int64_t* ids);

/** k nearest neighbours of n queries (row-major, dimension dim) among the probed lists.
 *  params: search keys (NULL = defaults: the index's nprobe, host memory, own stream).
 *  nprobe is clamped to nlist. Results, row-major n x k, best first: ids[i*k+j] and
 *  dists[i*k+j]. When fewer than k candidates exist the row is padded with id -1 and distance
 *  +INFINITY (L2) or -INFINITY (inner product, cosine). Both output buffers must hold n*k
 *  elements; nothing beyond n*k is written (see the failure rule at the top of this header).
 *  Queries with NaN/Inf, or (L2, inner product) a squared norm beyond FLT_MAX / 8:
 *  IVF_ERR_INVALID_ARGUMENT. Device-memory queries are checked on the device (a handful of
 *  queries inside the search's own kernels; more while the search runs, its results held back
 *  in scratch until the check has passed, or with one more synchronisation first where they
 *  would take more than 2^22 results of scratch); either way a refused call writes nothing. An
 *  asynchronous search (IVF_PARAM_CUDA_STREAM with device memory) cannot wait for a check and
 *  is not checked: with such a query its results are unspecified. A synchronous device-memory
 *  search first waits for the work queued on the default stream of the index's device (the
 *  legacy stream and the calling thread's per-thread stream: e.g. the cudaMemcpy that filled
 *  queries or a cudaMemset of ids, which can return before their bytes land); work on other
 *  streams the caller synchronises first. An asynchronous one is ordered by its stream alone.
 *  With IVF_MEMORY_DEVICE, queries, ids and dists must be memory the index's device can
 *  address (as for ivf_train_ex), else IVF_ERR_INVALID_ARGUMENT naming the argument.
 *  An empty (trained) index pads every row.
 *  Untrained index: IVF_ERR_INVALID_STATE. k >= 1; n >= 1. The CPU backend takes any k; a CUDA
 *  index takes k up to a limit read from the device's shared memory (16384 on an H100) and
 *  returns IVF_ERR_UNSUPPORTED above it.
 *  With IVF_PARAM_CUDA_STREAM set the call is asynchronous on that stream for device memory
 *  (results are ready when the stream reaches them); otherwise it returns with results ready.
 *  Thread-safe: any number of concurrent searches on one index. */
IVF_API IVF_NODISCARD ivf_status ivf_search(const ivf_index* index, const ivf_params* params,
                                            const void* queries, ivf_dtype dtype, int64_t n,
                                            int64_t dim, int64_t k, int64_t* ids, float* dists);

/** Number of vectors held. Thread-safe. */
IVF_API IVF_NODISCARD ivf_status ivf_ntotal(const ivf_index* index, int64_t* ntotal);

/* ------------------------------------------------------------------------------------------ */
/* Ids: remove, update, get, count                                                            */
/* ------------------------------------------------------------------------------------------ */

/** Remove every vector whose id is one of ids[0..n) (host memory; any int64 values; ids that are
 *  absent are not an error; repeats are harmless). *removed (may be NULL) receives the number of
 *  vectors removed. A mutation (see the top of this header): a search that started before it
 *  may still return the removed vectors, one that starts after it never does. Removed rows are
 *  skipped by every scan and reclaimed when their list is compacted (automatically, when more
 *  than a quarter of the index is removed rows). params: NULL (reserved for later keys).
 *  n = 0 is allowed and changes nothing. Returns IVF_OK, IVF_ERR_INVALID_ARGUMENT,
 *  IVF_ERR_INVALID_STATE (untrained), memory and CUDA errors. */
IVF_API IVF_NODISCARD ivf_status ivf_remove(ivf_index* index, const ivf_params* params,
                                            const int64_t* ids, int64_t n, int64_t* removed);

/** Upsert: for each of the n ids, all the vectors the index holds with that id (none, one, or
 *  several in a duplicate-ids index) are removed and row i of data is added with the id, so the
 *  id then names exactly that one vector. All or nothing, one published state. ids must not
 *  repeat within one call (IVF_ERR_INVALID_ARGUMENT) and must not be -1. data and ids are read
 *  as ivf_add_ex reads them (params: memory kind and stream; NULL = host). */
IVF_API IVF_NODISCARD ivf_status ivf_update(ivf_index* index, const ivf_params* params,
                                            const void* data, ivf_dtype dtype, int64_t n,
                                            int64_t dim, const int64_t* ids);

/** Copy the stored vector of each of n ids (host memory) into out (n x dim of dtype, host memory,
 *  caller-owned). The stored vector is the index's own copy: for the cosine metric, unit
 *  length. Where an id has several vectors, the one returned is the first in list order (lowest
 *  list, then earliest in the list); ivf_count_ids tells how many there are. found (may be NULL)
 *  receives 1 or 0 per id; the row of an absent id is filled with zeros. Reads one published
 *  state. dtype: IVF_DTYPE_F32 (decoded rows) or the index's storage type (the stored
 *  values). params: NULL (reserved). */
IVF_API IVF_NODISCARD ivf_status ivf_get(const ivf_index* index, const ivf_params* params,
                                         const int64_t* ids, int64_t n, void* out, ivf_dtype dtype,
                                         int64_t dim, uint8_t* found);

/** counts[i] = number of vectors with id ids[i] (0: absent), for n ids in host memory. Reads
 *  one published state. */
IVF_API IVF_NODISCARD ivf_status ivf_count_ids(const ivf_index* index, const int64_t* ids,
                                               int64_t n, int64_t* counts);

/* ------------------------------------------------------------------------------------------ */
/* Filters: reusable id sets that restrict a search                                           */
/* ------------------------------------------------------------------------------------------ */

/** A set of ids, built once (hashed, and uploaded to each device on first use) and passed to any
 *  number of searches on any index through IVF_PARAM_FILTER. Immutable after creation; safe to
 *  share between threads; must outlive the searches that use it. */
typedef struct ivf_filter ivf_filter;

typedef int32_t ivf_filter_mode;
#define IVF_FILTER_ALLOW 0  /**< only vectors whose id is in the set may be returned            */
#define IVF_FILTER_DENY  1  /**< vectors whose id is in the set are never returned               */

/** Build a filter from n ids (host memory; any int64 values; repeats allowed; n = 0 gives an
 *  empty set: allow-nothing or deny-nothing). A filtered search returns, for each query, the k
 *  nearest permitted vectors among the lists it probes: exactly what an unfiltered search of an
 *  index holding only the permitted vectors (same centroids) returns, padded when fewer exist.
 *  The filter is applied inside the list scan, not to a result list. Dense id sets (a range at
 *  most 64x the count) are kept as a bitset, others as a hash set. *out receives the filter, to
 *  be released with ivf_filter_free. */
IVF_API IVF_NODISCARD ivf_status ivf_filter_create(ivf_filter** out, const int64_t* ids, int64_t n,
                                                   ivf_filter_mode mode);
/** Free a filter; NULL is a no-op. No search may be using it. */
IVF_API void ivf_filter_free(ivf_filter* filter);
/** Bytes the filter holds on the host and, summed over the devices it was uploaded to, on
 *  devices (either pointer may be NULL). */
IVF_API IVF_NODISCARD ivf_status ivf_filter_bytes(const ivf_filter* filter, int64_t* host_bytes,
                                                  int64_t* device_bytes);

/** Keys of ivf_index_info. */
typedef int32_t ivf_info_key;
#define IVF_INFO_DIM                 1
#define IVF_INFO_NLIST               2
#define IVF_INFO_METRIC              3  /**< an ivf_metric                                   */
#define IVF_INFO_BACKEND             4  /**< IVF_BACKEND_CPU or IVF_BACKEND_CUDA (resolved)   */
#define IVF_INFO_DEVICE              5  /**< CUDA ordinal, -1 for the CPU backend            */
#define IVF_INFO_NTOTAL              6
#define IVF_INFO_IS_TRAINED          7  /**< 0 or 1                                          */
#define IVF_INFO_NPROBE              8  /**< default nprobe                                  */
#define IVF_INFO_DEVICE_MEMORY_BYTES 9  /**< device memory held by the index, 0 on the CPU   */
#define IVF_INFO_HOST_MEMORY_BYTES  10  /**< host memory held by the index                   */
#define IVF_INFO_STATE_VERSION      11  /**< number of the published state a call started now
                                             reads: 0 for a new index, +1 per successful
                                             mutation (train, add, reset, ...)               */
#define IVF_INFO_POOL_BYTES         12  /**< device memory the index's stream-ordered pool
                                             keeps cached for reuse by later searches (not in
                                             IVF_INFO_DEVICE_MEMORY_BYTES); returned to the
                                             driver by ivf_reset (except blocks sharing a
                                             pool chunk with live arrays) and ivf_free; 0 on
                                             the CPU                                         */
#define IVF_INFO_UNIQUE_IDS         13  /**< 1 when ids are unique (IVF_PARAM_UNIQUE_IDS)     */
#define IVF_INFO_REMOVED_ROWS       14  /**< removed rows still held, awaiting compaction    */
#define IVF_INFO_ID_MAP_BYTES       15  /**< memory of the id map (device on CUDA, else host) */
/* the host tier (IVF_PARAM_DEVICE_BUDGET); budget, tier and cache keys are 0 without one */
#define IVF_INFO_DEVICE_BUDGET      16  /**< the budget in bytes; 0 = unlimited               */
#define IVF_INFO_RESIDENT_LISTS     17  /**< lists with a device copy now (every non-empty list
                                             without a budget)                               */
#define IVF_INFO_RESIDENT_BYTES     18  /**< bytes of list data held on the device now        */
#define IVF_INFO_HOST_TIER_BYTES    19  /**< pinned host memory of the host tier (arenas)     */
#define IVF_INFO_CACHE_HITS         20  /**< probes (query, list pairs) served from the device
                                             cache, since creation                           */
#define IVF_INFO_CACHE_MISSES       21  /**< probes whose list was streamed from the host
                                             (once per batch chunk, whatever its probes)     */
#define IVF_INFO_STREAMED_BYTES     22  /**< bytes copied host-to-device by searches          */
#define IVF_INFO_MERGED_SEARCHES    23  /**< ivf_search calls answered inside a merged batch of
                                             two or more (IVF_PARAM_DYNAMIC_BATCHING)         */
#define IVF_INFO_SHARDS             24  /**< parts of the index (IVF_PARAM_SHARDS)            */
#define IVF_INFO_LIVE_SHARDS        25  /**< parts still serving (a replica whose device was
                                             lost no longer does)                            */
#define IVF_INFO_STORAGE_TYPE       26  /**< the ivf_dtype rows are stored in                */
#define IVF_INFO_GRAPH_SEARCHES     27  /**< searches (calls, or merged batches) of at most 64
                                             queries answered by replaying a captured CUDA graph,
                                             since creation; 0 on the CPU (README "Serving")   */
/* an index of several parts (IVF_PARAM_SHARDS); 0 for one part */
#define IVF_INFO_MERGE_NANOSECONDS  28  /**< time split searches spent after their parts'
                                             searches returned (moving the parts' top-k to
                                             one device and merging them), in ns, since
                                             creation: its share of the search time is the
                                             merge's cost                                     */
#define IVF_INFO_PEER_MERGE         29  /**< 1 when the parts' results cross devices by peer
                                             copies (NVLink or PCIe peer-to-peer); 0 when they
                                             go through host memory (no peer access, or
                                             IVFGPU_DISABLE_PEER_ACCESS=1), or every part is on
                                             one device or the CPU                           */
#define IVF_INFO_FUSED_SEARCHES     30  /**< searches (calls, or merged batches) of a few
                                             queries answered by the fused small-batch
                                             kernels (the default latency path), since
                                             creation; 0 on the CPU (README "Serving")        */
/* per part: part in [0, IVF_INFO_SHARDS), else IVF_ERR_INVALID_ARGUMENT */
#define IVF_INFO_PART_DEVICE(part)  (4096 + (part))  /**< the CUDA device of a part; -1 on
                                                          the CPU                          */
#define IVF_INFO_PART_DEVICE_MEMORY_BYTES(part) (8192 + (part)) /**< a part's device memory
                                                          (as IVF_INFO_DEVICE_MEMORY_BYTES) */

/** Read one property of an index. IVF_ERR_UNSUPPORTED for an unknown key. Thread-safe. */
IVF_API IVF_NODISCARD ivf_status ivf_index_info(const ivf_index* index, ivf_info_key key,
                                                int64_t* value);

/** Number of usable CUDA devices (0 when built without CUDA or none is usable). Thread-safe. */
IVF_API IVF_NODISCARD ivf_status ivf_cuda_device_count(int32_t* count);

/* ------------------------------------------------------------------------------------------ */
/* Page-locked host memory for queries and results                                            */
/* ------------------------------------------------------------------------------------------ */

/** Host memory that a CUDA index copies at the bus's full rate. A host-memory search
 *  (IVF_MEMORY_HOST) copies its queries in and its results out. From ordinary (pageable)
 *  memory the CUDA driver stages those copies through its own buffers at about the host's
 *  memcpy rate (~10 GB/s: 5 MB of queries take ~0.5 ms, half a 10,000-query search at nprobe 1);
 *  from page-locked memory it copies directly (~50 GB/s). A caller that reuses its query or
 *  result buffers allocates them here, or registers its own; ivf_search needs no flag (the
 *  driver recognises the memory) and results are the same either way. Both work without a
 *  CUDA device (ordinary memory; a registration is only recorded), so one program runs on
 *  every backend. The library records every range it hands out or registers: unknown
 *  pointers, double frees and overlapping registrations are refused, never passed on.
 *
 *  ivf_host_alloc: *out receives bytes (> 0) of memory aligned to 64 bytes, page-locked and
 *  usable by every CUDA device when one is usable. Release it with ivf_host_free.
 *  IVF_ERR_INVALID_ARGUMENT (out NULL, bytes 0; *out is then NULL), IVF_ERR_OUT_OF_HOST_MEMORY.
 *  Thread-safe. */
IVF_API IVF_NODISCARD ivf_status ivf_host_alloc(size_t bytes, void** out);
/** Frees memory from ivf_host_alloc. NULL: IVF_OK, nothing done. A pointer ivf_host_alloc did
 *  not return, or returned and was freed already: IVF_ERR_INVALID_ARGUMENT, nothing freed.
 *  The memory must not be in use by a search. Thread-safe. */
IVF_API ivf_status ivf_host_free(void* p);
/** Page-locks the caller's memory [p, p + bytes) in place, for every CUDA device, until
 *  ivf_host_unregister(p). It costs about as much as copying the range once from pageable
 *  memory: worth it for buffers that are reused. IVF_ERR_INVALID_ARGUMENT: p NULL, bytes 0, or
 *  a range that overlaps one registered here or allocated by ivf_host_alloc, or that the
 *  driver refuses (e.g. already page-locked by other code); IVF_ERR_OUT_OF_HOST_MEMORY where
 *  the system will not lock that much (e.g. RLIMIT_MEMLOCK). Thread-safe. */
IVF_API IVF_NODISCARD ivf_status ivf_host_register(void* p, size_t bytes);
/** Ends a registration: p is the pointer given to ivf_host_register (else
 *  IVF_ERR_INVALID_ARGUMENT, nothing changed). Unregister before freeing the memory; the memory
 *  must not be in use by a search. Thread-safe. */
IVF_API ivf_status ivf_host_unregister(void* p);

/* ------------------------------------------------------------------------------------------ */
/* Persistence (docs/file-format.md)                                                          */
/* ------------------------------------------------------------------------------------------ */

/** Write the index to path atomically (a temporary file in the same directory, flushed, then
 *  renamed over path). On failure path is untouched and no temporary file is left.
 *  Returns IVF_OK, IVF_ERR_INVALID_ARGUMENT, IVF_ERR_IO, IVF_ERR_OUT_OF_HOST_MEMORY.
 *  Thread-safe (reads only). */
IVF_API IVF_NODISCARD ivf_status ivf_save(const ivf_index* index, const char* path);

/** Read an index written by ivf_save or a FAISS IndexIVFFlat file (detected by its magic).
 *  params chooses the backend/device (build keys other than backend, device and threads are
 *  taken from the file). *out receives a new handle only on success. Returns IVF_OK,
 *  IVF_ERR_IO, IVF_ERR_CORRUPT_DATA (also for rows an add refuses: NaN/Inf, or under L2 and
 *  inner product a squared norm beyond FLT_MAX / 8), IVF_ERR_VERSION_MISMATCH,
 *  IVF_ERR_UNSUPPORTED, memory errors. Thread-safe. */
IVF_API IVF_NODISCARD ivf_status ivf_load(const char* path, const ivf_params* params,
                                          ivf_index** out);

/** Serialise into a caller buffer. Ask the size first: with buffer NULL (capacity ignored)
 *  *size receives the bytes needed. With a buffer shorter than that: IVF_ERR_BUFFER_TOO_SMALL
 *  and *size the bytes needed. Otherwise the bytes are written and *size says how many. */
IVF_API IVF_NODISCARD ivf_status ivf_serialize(const ivf_index* index, void* buffer,
                                               size_t capacity, size_t* size);

/** Build a new index from bytes written by ivf_serialize (or a FAISS IndexIVFFlat file image). */
IVF_API IVF_NODISCARD ivf_status ivf_deserialize(const void* buffer, size_t size,
                                                 const ivf_params* params, ivf_index** out);

/** Write the index as a FAISS IndexIVFFlat file that faiss::read_index accepts (metrics L2
 *  and inner product). Atomic like ivf_save. */
IVF_API IVF_NODISCARD ivf_status ivf_save_faiss(const ivf_index* index, const char* path);

/* ------------------------------------------------------------------------------------------ */
/* dlopen entry point: a versioned, append-only function table                               */
/* ------------------------------------------------------------------------------------------ */

/** Version 1 of the function table. Fields are only ever appended; a host checks
 *  struct_size before touching a field beyond those it knows. */
typedef struct ivf_api_v1 {
  uint32_t struct_size;  /**< sizeof the table the library filled                        */
  uint32_t abi_version;  /**< the version that was asked for                              */
  const char* (*version)(void);
  const char* (*status_string)(ivf_status);
  const char* (*last_error_message)(void);
  ivf_status (*params_create)(ivf_params**);
  void (*params_free)(ivf_params*);
  ivf_status (*params_set_int)(ivf_params*, ivf_param_key, int64_t);
  ivf_status (*params_get_int)(const ivf_params*, ivf_param_key, int64_t*);
  ivf_status (*params_set_ptr)(ivf_params*, ivf_param_key, void*);
  ivf_status (*create)(ivf_index**, int64_t, const ivf_params*);
  void (*free)(ivf_index*);
  ivf_status (*train)(ivf_index*, const void*, ivf_dtype, int64_t, int64_t);
  ivf_status (*add)(ivf_index*, const void*, ivf_dtype, int64_t, int64_t, const int64_t*);
  ivf_status (*reset)(ivf_index*);
  ivf_status (*search)(const ivf_index*, const ivf_params*, const void*, ivf_dtype, int64_t,
                       int64_t, int64_t, int64_t*, float*);
  ivf_status (*ntotal)(const ivf_index*, int64_t*);
  ivf_status (*index_info)(const ivf_index*, ivf_info_key, int64_t*);
  ivf_status (*save)(const ivf_index*, const char*);
  ivf_status (*load)(const char*, const ivf_params*, ivf_index**);
  ivf_status (*serialize)(const ivf_index*, void*, size_t, size_t*);
  ivf_status (*deserialize)(const void*, size_t, const ivf_params*, ivf_index**);
  ivf_status (*save_faiss)(const ivf_index*, const char*);
  ivf_status (*cuda_device_count)(int32_t*);
  ivf_status (*param_bounds)(ivf_param_key, int64_t*, int64_t*);
  uint32_t (*abi_version_fn)(void);
  /* appended in 0.2 */
  ivf_status (*train_ex)(ivf_index*, const ivf_params*, const void*, ivf_dtype, int64_t, int64_t);
  ivf_status (*add_ex)(ivf_index*, const ivf_params*, const void*, ivf_dtype, int64_t, int64_t,
                       const int64_t*);
  ivf_status (*remove)(ivf_index*, const ivf_params*, const int64_t*, int64_t, int64_t*);
  ivf_status (*update)(ivf_index*, const ivf_params*, const void*, ivf_dtype, int64_t, int64_t,
                       const int64_t*);
  ivf_status (*get)(const ivf_index*, const ivf_params*, const int64_t*, int64_t, void*, ivf_dtype,
                    int64_t, uint8_t*);
  ivf_status (*count_ids)(const ivf_index*, const int64_t*, int64_t, int64_t*);
  ivf_status (*filter_create)(ivf_filter**, const int64_t*, int64_t, ivf_filter_mode);
  void (*filter_free)(ivf_filter*);
  ivf_status (*filter_bytes)(const ivf_filter*, int64_t*, int64_t*);
  ivf_status (*params_set_progress)(ivf_params*, ivf_progress_fn, void*);
  /* appended after 0.2.0: page-locked host memory */
  ivf_status (*host_alloc)(size_t, void**);
  ivf_status (*host_free)(void*);
  ivf_status (*host_register)(void*, size_t);
  ivf_status (*host_unregister)(void*);
} ivf_api_v1;

/** The function table for abi_version (1 today), or NULL for a version this library does not
 *  know. The table is static: never free it. The only symbol a dlopen host needs. */
IVF_API const ivf_api_v1* ivf_get_api(uint32_t abi_version);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* IVFGPU_IVFGPU_H */
