#include "element_rows.hpp"

#include <type_traits>

#include "../element_convert.hpp"
#include "check.hpp"
#include "device_buffer.hpp"
#include "element_traits.cuh"
#include "launch.cuh"

namespace ivfgpu::cuda {

namespace {

template <class T>
__global__ void decode_kernel(const T* in, int64_t count, float* out) {
  for (int64_t e = global_thread(); e < count; e += thread_stride()) out[e] = DeviceElement<T>::load1(in + e);
}

// Four elements a thread (one load of their 4 * sizeof(T) bytes, one 16-byte store) where both
// buffers are aligned for it, the last count % 4 one a thread. A batch's f16 queries to f32 for
// the coarse stage (10,000 x 128) took 6.2 us an element a thread (ncu, H100).
template <class T>
__global__ void decode4_kernel(const T* in, int64_t count, float* out) {
  const int64_t groups = count / 4;
  for (int64_t g = global_thread(); g < groups; g += thread_stride())
    reinterpret_cast<float4*>(out)[g] = DeviceElement<T>::load4(in + 4 * g);
  const int64_t tail = groups * 4 + global_thread();
  if (tail < count) out[tail] = DeviceElement<T>::load1(in + tail);
}

// Each element is checked as the host's encode_rows checks it; the first refused one (lowest
// index) is reported.
template <class T>
__global__ void encode_kernel(const float* in, int64_t count, T* out, unsigned long long* first_bad) {
  for (int64_t e = global_thread(); e < count; e += thread_stride()) {
    const float v = in[e];
    bool ok = true;
    if constexpr (std::is_same_v<T, uint8_t>) ok = v >= 0.0f && v <= 255.0f && v == floorf(v);
    else if constexpr (std::is_same_v<T, int8_t>) ok = v >= -128.0f && v <= 127.0f && v == floorf(v);
    const T r = DeviceElement<T>::encode(ok ? v : 0.0f);
    if constexpr (!DeviceElement<T>::kInteger) ok = isfinite(DeviceElement<T>::load1(&r));  // no overflow
    if (ok) out[e] = r;
    else atomicMin(first_bad, static_cast<unsigned long long>(e));
  }
}

}  // namespace

void decode_rows_on_device(cudaStream_t stream, ElementType type, const void* in, int64_t n, int64_t dim, float* out) {
  const int64_t count = n * dim;
  if (count == 0) return;
  dispatch_element_type(type, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const bool aligned = reinterpret_cast<uintptr_t>(in) % (4 * sizeof(T)) == 0 &&
                         reinterpret_cast<uintptr_t>(out) % sizeof(float4) == 0;
    if (aligned)
      decode4_kernel<T><<<grid_for(count / 4 + 1), kDefaultThreads, 0, stream>>>(static_cast<const T*>(in), count, out);
    else
      decode_kernel<T><<<grid_for(count), kDefaultThreads, 0, stream>>>(static_cast<const T*>(in), count, out);
  });
  IVF_CUDA_CHECK_LAUNCH();
}

void encode_rows_on_device(const DeviceContext& ctx, cudaStream_t stream, const float* in, int64_t n, int64_t dim,
                           ElementType to, void* out, const char* what) {
  const int64_t count = n * dim;
  if (count == 0) return;
  if (to == ElementType::F32) {
    IVF_CUDA_CHECK(cudaMemcpyAsync(out, in, sizeof(float) * count, cudaMemcpyDeviceToDevice, stream));
    return;
  }
  DeviceBuffer<unsigned long long> first(ctx, 1, stream);
  IVF_CUDA_CHECK(cudaMemsetAsync(first.data(), 0xff, sizeof(unsigned long long), stream));
  dispatch_element_type(to, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if constexpr (!std::is_same_v<T, float>)
      encode_kernel<T><<<grid_for(count), kDefaultThreads, 0, stream>>>(in, count, static_cast<T*>(out), first.data());
  });
  IVF_CUDA_CHECK_LAUNCH();
  unsigned long long bad = 0;
  IVF_CUDA_CHECK(cudaMemcpyAsync(&bad, first.data(), sizeof bad, cudaMemcpyDeviceToHost, stream));
  IVF_CUDA_CHECK(cudaStreamSynchronize(stream));
  if (bad == ~0ull) return;
  float v = 0.0f;
  IVF_CUDA_CHECK(cudaMemcpyAsync(&v, in + bad, sizeof v, cudaMemcpyDeviceToHost, stream));
  IVF_CUDA_CHECK(cudaStreamSynchronize(stream));
  refuse_element(what, static_cast<int64_t>(bad), dim, v, to);
}

}  // namespace ivfgpu::cuda
