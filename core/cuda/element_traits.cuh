// Device-side decoding and encoding of stored elements (issue 11). Distances are computed on
// decoded values: fp32 for every type, or int32 (summed into int64) when integer rows meet
// integer queries. Encoding matches the host codec (element_codec.hpp): round to nearest even
// for f16/bf16, and integers pass through unchanged (range and integrality are checked before).
// A new storage type is a new specialisation here plus its case in dispatch_element_type
// (element_type.hpp); kernels are written once over T.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "../element_codec.hpp"

namespace ivfgpu::cuda {

template <class T>
struct DeviceElement;

// Every type loads four elements at once (4 * sizeof(T) bytes, aligned to that): callers
// check that rows have a multiple of four elements and aligned bases before using load4.
// One element is also loaded as its Bits (load_bits) and decoded apart (decode): a kernel that
// keeps many loads in flight holds the bits and decodes them only when it uses them, so no load
// waits behind an earlier one's decode (rows.cu's check); load1 is the two at once.
template <>
struct DeviceElement<float> {
  static constexpr bool kInteger = false;
  using Bits = float;
  __device__ static __forceinline__ Bits load_bits(const float* p) { return *p; }
  __device__ static __forceinline__ float decode(Bits b) { return b; }
  __device__ static __forceinline__ float4 load4(const float* p) { return *reinterpret_cast<const float4*>(p); }
  __device__ static __forceinline__ float load1(const float* p) { return *p; }
  __device__ static __forceinline__ float encode(float v) { return v; }
};

template <>
struct DeviceElement<Half> {
  static constexpr bool kInteger = false;
  using Bits = uint16_t;
  __device__ static __forceinline__ Bits load_bits(const Half* p) { return *reinterpret_cast<const uint16_t*>(p); }
  __device__ static __forceinline__ float decode(Bits b) { return __half2float(__ushort_as_half(b)); }
  // Four elements from their 8 bytes (the lowest first).
  __device__ static __forceinline__ float4 unpack4(uint2 w) {
    return make_float4(decode(static_cast<uint16_t>(w.x & 0xffffu)), decode(static_cast<uint16_t>(w.x >> 16)),
                       decode(static_cast<uint16_t>(w.y & 0xffffu)), decode(static_cast<uint16_t>(w.y >> 16)));
  }
  __device__ static __forceinline__ float4 load4(const Half* p) { return unpack4(*reinterpret_cast<const uint2*>(p)); }
  __device__ static __forceinline__ float load1(const Half* p) { return decode(load_bits(p)); }
  __device__ static __forceinline__ Half encode(float v) {
    Half h;
    h.bits = __half_as_ushort(__float2half_rn(v));
    return h;
  }
};

template <>
struct DeviceElement<BFloat16> {
  static constexpr bool kInteger = false;
  using Bits = uint16_t;
  __device__ static __forceinline__ Bits load_bits(const BFloat16* p) {
    return *reinterpret_cast<const uint16_t*>(p);
  }
  __device__ static __forceinline__ float decode(Bits b) { return __uint_as_float(uint32_t{b} << 16); }
  __device__ static __forceinline__ float4 unpack4(uint2 w) {
    return make_float4(__uint_as_float(w.x << 16), __uint_as_float(w.x & 0xffff0000u), __uint_as_float(w.y << 16),
                       __uint_as_float(w.y & 0xffff0000u));
  }
  __device__ static __forceinline__ float4 load4(const BFloat16* p) {
    return unpack4(*reinterpret_cast<const uint2*>(p));
  }
  __device__ static __forceinline__ float load1(const BFloat16* p) { return decode(load_bits(p)); }
  __device__ static __forceinline__ BFloat16 encode(float v) {
    BFloat16 b;
    b.bits = __bfloat16_as_ushort(__float2bfloat16_rn(v));
    return b;
  }
};

template <>
struct DeviceElement<uint8_t> {
  static constexpr bool kInteger = true;
  using Bits = uint8_t;
  __device__ static __forceinline__ Bits load_bits(const uint8_t* p) { return *p; }
  __device__ static __forceinline__ float decode(Bits b) { return static_cast<float>(b); }
  __device__ static __forceinline__ float4 load4(const uint8_t* p) {
    const uint32_t w = *reinterpret_cast<const uint32_t*>(p);
    return make_float4(static_cast<float>(w & 0xffu), static_cast<float>((w >> 8) & 0xffu),
                       static_cast<float>((w >> 16) & 0xffu), static_cast<float>(w >> 24));
  }
  __device__ static __forceinline__ float load1(const uint8_t* p) { return static_cast<float>(*p); }
  __device__ static __forceinline__ uint8_t encode(float v) { return static_cast<uint8_t>(v); }
};

template <>
struct DeviceElement<int8_t> {
  static constexpr bool kInteger = true;
  using Bits = int8_t;
  __device__ static __forceinline__ Bits load_bits(const int8_t* p) { return *p; }
  __device__ static __forceinline__ float decode(Bits b) { return static_cast<float>(b); }
  __device__ static __forceinline__ float4 load4(const int8_t* p) {
    const uint32_t w = *reinterpret_cast<const uint32_t*>(p);
    // Each byte moved to the top, then an arithmetic shift sign-extends it.
    return make_float4(static_cast<float>(static_cast<int32_t>(w << 24) >> 24),
                       static_cast<float>(static_cast<int32_t>(w << 16) >> 24),
                       static_cast<float>(static_cast<int32_t>(w << 8) >> 24),
                       static_cast<float>(static_cast<int32_t>(w) >> 24));
  }
  __device__ static __forceinline__ float load1(const int8_t* p) { return static_cast<float>(*p); }
  __device__ static __forceinline__ int8_t encode(float v) { return static_cast<int8_t>(v); }
};

}  // namespace ivfgpu::cuda
