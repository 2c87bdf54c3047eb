// Shapes the grids of storage_types_gpu_test.cpp do not reach, on CUDA against the CPU twin
// (typed_twin.hpp: same centroids, same lists, the results contract). Those grids search 16-32
// queries, so they meet the SIMT scan and the small-batch passes; the tensor-core passes are
// chosen from the batch's shape (core/cuda/scan_dispatch.hpp, pruned_kernel.hpp): queries a
// probed list, k, dimensions, four-element rows. Here each pass's regime is named once (the
// targeted cases), then shapes are drawn at random over type x metric x dim x rows x nlist x
// batch x k x nprobe, capped so that the CPU side stays within seconds a case.
//
// IVFTEST_RANDOM_CASES (default 24) and IVFTEST_RANDOM_SEED (default 1) widen the search for a
// longer run; every case prints its shape, which reproduces it.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <initializer_list>
#include <random>
#include <string>
#include <vector>

#include "common/dtypes.hpp"
#include "common/test_util.hpp"
#include "typed_twin.hpp"

using namespace ivftest;
using namespace ivftest::typed;

namespace {

struct Shape {
  ivf_dtype type;
  int32_t metric;
  int64_t dim, n, nlist, nq, k, nprobe;
};

std::string describe(const Shape& s) {
  char buf[256];
  std::snprintf(buf, sizeof buf, "%s %s dim %lld n %lld nlist %lld nq %lld k %lld nprobe %lld", type_name(s.type),
                metric_name(s.metric), static_cast<long long>(s.dim), static_cast<long long>(s.n),
                static_cast<long long>(s.nlist), static_cast<long long>(s.nq), static_cast<long long>(s.k),
                static_cast<long long>(s.nprobe));
  return buf;
}

// The batches' work on the CPU side (its scan, and the check of every returned distance in
// double), bounded by shrinking the batch.
Shape capped(Shape s) {
  const auto scan = [&] { return double(s.nq) * double(s.n) * double(s.dim) * double(s.nprobe) / double(s.nlist); };
  while (s.nq > 1 && (scan() > 3e9 || double(s.nq) * double(s.k) * double(s.dim) > 1e9)) s.nq = (s.nq + 1) / 2;
  return s;
}

// Each pass's regime once (the rules in scan_dispatch.hpp and pruned_kernel.hpp pick them). Each
// is within capped()'s bounds as it stands: a shrunk batch would leave its regime (the wide pass
// needs 8,192 queries), which TargetedShapesAreNotShrunk checks.
const Shape kTargeted[] = {
    // fp32 rows from 144 dimensions: the tf32 ring, units of two query tiles (many queries a
    // list) and of one.
    {IVF_DTYPE_F32, IVF_METRIC_L2, 160, 20000, 32, 3000, 10, 8},
    {IVF_DTYPE_F32, IVF_METRIC_INNER_PRODUCT, 144, 12000, 64, 1000, 10, 4},
    {IVF_DTYPE_F32, IVF_METRIC_COSINE, 512, 5000, 16, 1000, 16, 16},
    // the resident pass (to 128 dimensions), and rows of a dimension off four elements
    {IVF_DTYPE_F32, IVF_METRIC_L2, 128, 20000, 32, 3000, 10, 8},
    {IVF_DTYPE_F32, IVF_METRIC_L2, 130, 12000, 32, 3000, 10, 8},
    {IVF_DTYPE_F32, IVF_METRIC_INNER_PRODUCT, 97, 12000, 32, 3000, 5, 8},
    // k 33-128 (the narrow pass with its seed), k 129-1024 (the wide pass: 8,192 queries or
    // more at nprobe 16 or more, 128-256 dimensions)
    {IVF_DTYPE_F32, IVF_METRIC_L2, 128, 16000, 32, 3000, 100, 8},
    {IVF_DTYPE_F32, IVF_METRIC_L2, 128, 10000, 64, 9000, 256, 16},
    {IVF_DTYPE_U8, IVF_METRIC_L2, 128, 10000, 64, 9000, 200, 16},
    // f16 / bf16 rows: the resident pass, the 128-row steps (pair tiles), the staged pass
    {IVF_DTYPE_F16, IVF_METRIC_L2, 128, 20000, 32, 3000, 10, 8},
    {IVF_DTYPE_F16, IVF_METRIC_INNER_PRODUCT, 256, 12000, 32, 3000, 10, 8},
    {IVF_DTYPE_BF16, IVF_METRIC_COSINE, 200, 12000, 32, 3000, 32, 8},
    {IVF_DTYPE_BF16, IVF_METRIC_L2, 768, 5000, 16, 1500, 10, 4},
    // integer rows: the int8 pass (integer queries) and fp32 queries on integer rows
    {IVF_DTYPE_U8, IVF_METRIC_L2, 128, 20000, 32, 3000, 10, 8},
    {IVF_DTYPE_I8, IVF_METRIC_INNER_PRODUCT, 192, 12000, 32, 3000, 64, 8},
    // large k on the exact scan
    {IVF_DTYPE_F32, IVF_METRIC_L2, 64, 12000, 16, 2000, 1000, 8},
};

int64_t env_int(const char* name, int64_t fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? std::atoll(v) : fallback;
}

Shape draw(std::mt19937_64& rng) {
  const auto pick = [&](std::initializer_list<int64_t> v) { return *(v.begin() + rng() % v.size()); };
  Shape s{};
  s.type = static_cast<ivf_dtype>(pick({IVF_DTYPE_F32, IVF_DTYPE_F32, IVF_DTYPE_F16, IVF_DTYPE_BF16, IVF_DTYPE_U8,
                                        IVF_DTYPE_I8}));
  s.metric = static_cast<int32_t>(pick({IVF_METRIC_L2, IVF_METRIC_INNER_PRODUCT, IVF_METRIC_COSINE}));
  if (is_int(s.type) && s.metric == IVF_METRIC_COSINE) s.metric = IVF_METRIC_L2;  // refused (TypeGrid's test)
  s.dim = pick({4, 8, 17, 32, 63, 64, 96, 100, 128, 131, 144, 160, 192, 200, 256, 300, 384, 512, 768});
  s.nlist = pick({4, 16, 32, 64});
  const int64_t most = std::max<int64_t>(s.nlist * 40, std::min<int64_t>(30000, 4000000 / s.dim));
  s.n = s.nlist * 20 + static_cast<int64_t>(rng() % static_cast<uint64_t>(most - s.nlist * 20 + 1));
  s.nq = pick({1, 33, 400, 1500, 4000, 9000});
  s.k = pick({1, 5, 10, 16, 32, 50, 100, 128, 200, 1000});
  s.nprobe = std::min(s.nlist, pick({1, 2, 4, 16, 64}));
  return capped(s);
}

void run(const Shape& s, uint64_t data_seed, Tally& tally) {
  std::printf("case: %s (data seed %llu)\n", describe(s).c_str(), static_cast<unsigned long long>(data_seed));
  std::fflush(stdout);
  check_case(s.type, s.metric, s.dim, s.n, s.nlist, s.nq, {s.k}, {s.nprobe}, tally, data_seed);
}

}  // namespace

// Runs everywhere (no GPU needed): the targeted shapes keep the batch that puts them in their regime.
TEST(GpuRandomShapes, TargetedShapesAreNotShrunk) {
  for (const Shape& s : kTargeted) EXPECT_EQ(capped(s).nq, s.nq) << describe(s);
}

TEST(GpuRandomShapes, TargetedPassesMatchTheCpu) {
  IVFTEST_REQUIRE_GPU();
  Tally tally;
  uint64_t i = 0;
  for (const Shape& s : kTargeted) {
    run(s, ++i, tally);
    if (HasFailure()) break;  // the first failing shape's messages are the useful ones
  }
  report(tally, "targeted");
}

TEST(GpuRandomShapes, RandomShapesMatchTheCpu) {
  IVFTEST_REQUIRE_GPU();
  const int64_t cases = env_int("IVFTEST_RANDOM_CASES", 24);
  const uint64_t seed = static_cast<uint64_t>(env_int("IVFTEST_RANDOM_SEED", 1));
  std::mt19937_64 rng(seed * 7919);
  Tally tally;
  for (int64_t c = 0; c < cases && !HasFailure(); ++c) run(draw(rng), seed * 100000 + static_cast<uint64_t>(c), tally);
  report(tally, "random");
}
