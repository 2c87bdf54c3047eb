// Device-side decoding of stored elements into the fp32 that distances are computed in. A new
// storage type is a new specialisation here plus its case in scan.cu's dispatch
// (element_type.hpp); kernels are written once over T.
#pragma once

#include <cuda_runtime.h>

namespace ivfgpu::cuda {

template <class T>
struct DeviceElement;

template <>
struct DeviceElement<float> {
  // Elements per 16-byte load.
  static constexpr int kPerLoad = 4;
  __device__ static __forceinline__ float4 load4(const float* p) { return *reinterpret_cast<const float4*>(p); }
  __device__ static __forceinline__ float load1(const float* p) { return *p; }
};

}  // namespace ivfgpu::cuda
