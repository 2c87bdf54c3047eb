#include "stream_hold.hpp"

namespace ivftest {

namespace {

__device__ unsigned long long now_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__global__ void spin_until_set(const volatile int* flag, unsigned long long limit_ns) {
  const unsigned long long start = now_ns();
  while (*flag == 0 && now_ns() - start < limit_ns) __nanosleep(1000);
}

}  // namespace

cudaError_t hold_stream_on_device(cudaStream_t stream, volatile int* flag, double seconds) {
  void* device_flag = nullptr;
  const cudaError_t e = cudaHostGetDevicePointer(&device_flag, const_cast<int*>(flag), 0);
  if (e != cudaSuccess) return e;
  spin_until_set<<<1, 1, 0, stream>>>(static_cast<const volatile int*>(device_flag),
                                      static_cast<unsigned long long>(seconds * 1e9));
  return cudaGetLastError();
}

}  // namespace ivftest
