// The scans' distance kernel: one f32 query against four consecutive stored rows, chosen once
// per search for the CPU it runs on. Where the CPU has AVX2 (and F16C, for f16 rows) rows use
// 8-wide AVX vectors; otherwise 4-wide SSE2 ones (the build's baseline). Both run
// distances.hpp's one definition: every lane the same IEEE float operations in the same order,
// no fused multiply-adds, so the two give the same bits and the choice changes only the speed.
// IVFGPU_CPU_SIMD=baseline pins the SSE2 kernel (A/B runs, and a check on AVX2 machines that
// both agree).
#pragma once

#include <cstdint>

#include "../types.hpp"

namespace ivfgpu::cpu {

constexpr int kScanRows = 4;

template <class T>
using RowDistances = void (*)(const float* query, const T* rows, int64_t dim, float* out);

enum class RowKernel { Auto, Baseline, Avx2 };

// The kernel for a scan of rows of type T under `kernel` (L2 or inner product).
// - Auto: AVX2 where the CPU has it, T gains from it and IVFGPU_CPU_SIMD is not "baseline";
//   else the baseline kernel, or nullptr where four rows at a time gain nothing over one at a
//   time (byte rows on SSE2: 16 lanes a row, four SSE registers, spilled when interleaved).
// - Baseline / Avx2: that kernel whatever T; Avx2 is nullptr on a CPU without AVX2 (or, for
//   f16 rows, F16C).
template <class T>
RowDistances<T> row_distances(Metric kernel, RowKernel which = RowKernel::Auto);

// Whether this CPU runs AVX2 code, and F16C's conversions.
bool cpu_has_avx2();
bool cpu_has_f16c();

}  // namespace ivfgpu::cpu
