// The CPU scans' four-row distance kernels (core/cpu/row_distances.hpp) against exact_distance,
// one row at a time: the same bits for every storage type, both metrics and dimensions around
// the lane widths (8 and 16) and the unroll, whichever kernel the CPU gets (SSE2 baseline, and
// AVX2 where the CPU has it: this test says so when it cannot run the AVX2 kernel).
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <type_traits>
#include <utility>
#include <vector>

#include "core/cpu/distances.hpp"
#include "core/cpu/row_distances.hpp"
#include "core/element_codec.hpp"

namespace {

using ivfgpu::BFloat16;
using ivfgpu::Half;
using ivfgpu::Metric;
using ivfgpu::cpu::RowKernel;

template <class T>
T encode(float v) {
  if constexpr (std::is_same_v<T, float>) return v;
  else if constexpr (std::is_same_v<T, Half>) return ivfgpu::to_half(v);
  else if constexpr (std::is_same_v<T, BFloat16>) return ivfgpu::to_bfloat16(v);
  else return static_cast<T>(static_cast<int>(v * 40.0f) % 100);  // integers in range
}

uint32_t bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

template <class T>
void expect_same_bits(RowKernel which) {
  std::mt19937 rng(11);
  std::normal_distribution<float> g(0.0f, 2.0f);
  for (int64_t dim : {1, 3, 7, 8, 9, 15, 16, 17, 31, 32, 33, 64, 100, 128, 129, 200, 960}) {
    const auto kernel_l2 = ivfgpu::cpu::row_distances<T>(Metric::L2, which);
    const auto kernel_ip = ivfgpu::cpu::row_distances<T>(Metric::InnerProduct, which);
    ASSERT_NE(kernel_l2, nullptr);
    ASSERT_NE(kernel_ip, nullptr);
    std::vector<float> q(static_cast<std::size_t>(dim));
    // One spare element past the four rows: a kernel reading past its rows would read it.
    std::vector<T> rows(static_cast<std::size_t>(4 * dim + 1));
    for (float& v : q) v = g(rng);
    for (T& v : rows) v = encode<T>(g(rng));
    for (auto [m, fn] : {std::pair{Metric::L2, kernel_l2}, std::pair{Metric::InnerProduct, kernel_ip}}) {
      float got[ivfgpu::cpu::kScanRows];
      fn(q.data(), rows.data(), dim, got);
      for (int r = 0; r < ivfgpu::cpu::kScanRows; ++r) {
        const float want = ivfgpu::cpu::exact_distance(q.data(), rows.data() + r * dim, dim, m);
        EXPECT_EQ(bits(got[r]), bits(want)) << "dim " << dim << " row " << r << " metric " << static_cast<int>(m)
                                            << ": " << got[r] << " vs " << want;
      }
    }
  }
}

template <class T>
void both_kernels() {
  expect_same_bits<T>(RowKernel::Baseline);
  if (ivfgpu::cpu::row_distances<T>(Metric::L2, RowKernel::Auto) != nullptr) expect_same_bits<T>(RowKernel::Auto);
  if (ivfgpu::cpu::row_distances<T>(Metric::L2, RowKernel::Avx2) == nullptr) {
    std::printf("NOTE: this CPU has no AVX2 (or, for f16, no F16C): only the baseline kernel was checked\n");
    return;
  }
  expect_same_bits<T>(RowKernel::Avx2);
}

}  // namespace

TEST(RowDistances, F32KernelsGiveExactDistanceBits) { both_kernels<float>(); }
TEST(RowDistances, F16KernelsGiveExactDistanceBits) { both_kernels<Half>(); }
TEST(RowDistances, Bf16KernelsGiveExactDistanceBits) { both_kernels<BFloat16>(); }
TEST(RowDistances, Uint8KernelsGiveExactDistanceBits) { both_kernels<uint8_t>(); }
TEST(RowDistances, Int8KernelsGiveExactDistanceBits) { both_kernels<int8_t>(); }
