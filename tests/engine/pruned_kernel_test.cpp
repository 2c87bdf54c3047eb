// The pruned tensor-core pass's kernel choice (core/cuda/pruned_kernel.hpp), the one place that
// picks it: int8 tensor cores exactly where integer queries meet integer rows whose dimension
// fits the int8 pass, the resident bf16 pass where its tile and loads fit, the staged bf16 pass
// everywhere else. The GPU tests compare each kernel's results with the SIMT scan; this pins
// which kernel their shapes reach (GpuTensorScan.IntegerPassEqualsTheSimtScan cannot observe it).
#include <gtest/gtest.h>

#include <cstdint>

#include "core/cuda/pruned_kernel.hpp"

using namespace ivfgpu::cuda::scan_detail;

namespace {

PrunedShape shape(int64_t dim, bool integer, bool inner_product = false) {
  PrunedShape s;
  s.dim = dim;
  s.vec4 = dim % 4 == 0;  // aligned pool buffers
  s.integer = integer;
  s.inner_product = inner_product;
  s.centroids = true;
  return s;
}

}  // namespace

TEST(PrunedKernel, IntegerQueriesOnIntegerRowsTakeTheInt8PassWhereItFits) {
  // The shapes of GpuTensorScan.IntegerPassEqualsTheSimtScan and the bench's uint8 runs.
  for (int64_t dim : {16, 64, 96, 128, 208, 784, 1024})
    for (bool ip : {false, true}) EXPECT_EQ(pruned_kernel_for(shape(dim, true, ip)), PrunedKernel::Integer) << dim;
  // Off the 16-element k step (200), or past the int8 tile (1,040): bf16, resident up to 512.
  EXPECT_EQ(pruned_kernel_for(shape(200, true)), PrunedKernel::Bf16Resident);
  EXPECT_EQ(pruned_kernel_for(shape(1040, true)), PrunedKernel::Bf16Staged);
  // Unaligned queries or rows: no four-element loads, so neither tile pass.
  PrunedShape unaligned = shape(128, true);
  unaligned.vec4 = false;
  EXPECT_EQ(pruned_kernel_for(unaligned), PrunedKernel::Bf16Staged);
  // IVFGPU_SCAN=bf16 keeps integer queries on bf16 operands.
  PrunedShape pinned = shape(128, true);
  pinned.bf16_pinned = true;
  EXPECT_EQ(pruned_kernel_for(pinned), PrunedKernel::Bf16Resident);
}

TEST(PrunedKernel, RealValuedQueriesTakeTheBf16Passes) {
  for (int64_t dim : {4, 16, 64, 128, 256, 512})
    EXPECT_EQ(pruned_kernel_for(shape(dim, false)), PrunedKernel::Bf16Resident) << dim;
  for (int64_t dim : {516, 768, 960})
    EXPECT_EQ(pruned_kernel_for(shape(dim, false)), PrunedKernel::Bf16Staged) << dim;
  for (int64_t dim : {1, 3, 31, 129, 201})
    EXPECT_EQ(pruned_kernel_for(shape(dim, false)), PrunedKernel::Bf16Staged) << dim;
  // L2 centres on the lists' centroids: without them only the staged pass runs; inner product
  // needs none.
  PrunedShape l2 = shape(128, false), ip = shape(128, false, true);
  l2.centroids = false;
  ip.centroids = false;
  EXPECT_EQ(pruned_kernel_for(l2), PrunedKernel::Bf16Staged);
  EXPECT_EQ(pruned_kernel_for(ip), PrunedKernel::Bf16Resident);
}

TEST(PrunedKernel, EntriesAreExactOnTheInt8PassAndTheWideResidentPassUpTo256Dimensions) {
  for (bool wide : {false, true}) {
    EXPECT_TRUE(pruned_entries_exact(PrunedKernel::Integer, shape(128, true), wide));
    EXPECT_FALSE(pruned_entries_exact(PrunedKernel::Bf16Staged, shape(130, false), wide));
  }
  // The wide resident pass (k past 128) keeps its fp32 query rows in shared memory to 256
  // dimensions; the k <= 128 pass re-scores in the settle.
  for (int64_t dim : {16, 64, 96, 128, 200, 256}) {
    EXPECT_TRUE(pruned_entries_exact(PrunedKernel::Bf16Resident, shape(dim, false), true)) << dim;
    EXPECT_FALSE(pruned_entries_exact(PrunedKernel::Bf16Resident, shape(dim, false), false)) << dim;
  }
  EXPECT_FALSE(pruned_entries_exact(PrunedKernel::Bf16Resident, shape(260, false), true));
  // Integer queries on integer rows pinned to bf16 operands: the settle's integer arithmetic.
  PrunedShape pinned = shape(128, true);
  pinned.bf16_pinned = true;
  EXPECT_FALSE(pruned_entries_exact(pruned_kernel_for(pinned), pinned, true));
}
