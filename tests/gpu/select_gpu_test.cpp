// The segmented top-k (core/cuda/select.cu) against a sort on the host: exact positions and
// keys (its contract: the k best, best first, ties by smaller position) for rows shorter and
// longer than a block's buffer, keys that arrive best last (every buffer fill is cut), ties
// everywhere, a handful of distinct values, infinities, -0 and +0, the best keys clustered where
// one block's few threads read them, both orders, and the split path for a few long rows.
#include <gtest/gtest.h>

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "core/backend.hpp"
#include "core/cuda/device_context.hpp"
#include "core/cuda/select.hpp"
#include "gpu_test_util.hpp"

namespace {

using ivfgpu::cuda::DeviceContext;
using ivfgpu::cuda::SelectInput;
using ivfgpu::cuda::SelectOutput;

// The selection's order of float keys (ordered_key.cuh): -0 before +0.
uint32_t ordered(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

// Clustered: the best keys all sit at positions i with i % 256 < 64, so the threads of a
// 256-thread block that read them striped hold every one (the filter select's most candidates).
// OneLane: the best keys all sit at positions i with i % 32 == 0, so one lane of a warp that reads
// the row striped holds them all, and more than 32 entries pass the warp filter's bound at once.
// Periodic: the best keys sit in runs of 8 every 512 positions, which an evenly spaced sample of
// sector-long runs can hit every time (the select's sampled bar then has fewer than k keys below
// it, and the row must be read again).
enum class Pattern { Random, BestLast, BestFirst, AllEqual, FewValues, Signed, Clustered, OneLane, Periodic };

const char* name(Pattern p) {
  switch (p) {
    case Pattern::Random: return "random";
    case Pattern::BestLast: return "best-last";
    case Pattern::BestFirst: return "best-first";
    case Pattern::AllEqual: return "all-equal";
    case Pattern::FewValues: return "few-values";
    case Pattern::Signed: return "signed";
    case Pattern::Clustered: return "clustered";
    case Pattern::OneLane: return "one-lane";
    case Pattern::Periodic: return "periodic";
  }
  return "?";
}

std::vector<float> make_row(Pattern p, int64_t len, std::mt19937_64& rng) {
  std::vector<float> r(static_cast<std::size_t>(len));
  std::uniform_real_distribution<float> u(0.0f, 100.0f);
  std::uniform_int_distribution<int> few(0, 4);
  for (int64_t i = 0; i < len; ++i) {
    float v = 0.0f;
    switch (p) {
      case Pattern::Random: v = u(rng); break;
      case Pattern::BestLast: v = static_cast<float>(len - i); break;
      case Pattern::BestFirst: v = static_cast<float>(i); break;
      case Pattern::AllEqual: v = 7.0f; break;
      case Pattern::FewValues: v = static_cast<float>(few(rng)); break;
      case Pattern::Signed: {
        const int c = few(rng);
        v = c == 0 ? 0.0f : c == 1 ? -0.0f : c == 2 ? std::numeric_limits<float>::infinity() : u(rng) - 50.0f;
        break;
      }
      case Pattern::Clustered: v = i % 256 < 64 ? static_cast<float>(i % 97) : 100.0f + u(rng); break;
      case Pattern::OneLane: v = i % 32 == 0 ? static_cast<float>(i / 32) : 1000.0f + u(rng); break;
      case Pattern::Periodic: v = i % 512 < 8 ? static_cast<float>(i / 512 % 97) : 1000.0f + u(rng); break;
    }
    r[static_cast<std::size_t>(i)] = v;
  }
  return r;
}

// nseg rows of the pattern in one stride-`stride` array, with the given lengths; selects k on
// the device and compares every row with the host's order. with_addend: a term per position
// added to every row's key there (the coarse stage's centroid norms), -0 and +0 among them.
void check(Pattern p, const std::vector<int64_t>& lens, int64_t k, bool larger, uint64_t seed,
           bool with_addend = false) {
  const int64_t nseg = static_cast<int64_t>(lens.size());
  const int64_t stride = std::max<int64_t>(1, *std::max_element(lens.begin(), lens.end()));
  std::mt19937_64 rng(seed);
  std::vector<float> keys(static_cast<std::size_t>(nseg * stride), 0.0f);
  for (int64_t s = 0; s < nseg; ++s) {
    const std::vector<float> row = make_row(p, lens[s], rng);
    std::copy(row.begin(), row.end(), keys.begin() + s * stride);
  }
  std::vector<float> addend;
  if (with_addend) {
    std::uniform_real_distribution<float> u(-20.0f, 20.0f);
    for (int64_t i = 0; i < stride; ++i) addend.push_back(i % 7 == 0 ? 0.0f : i % 7 == 1 ? -0.0f : u(rng));
  }
  // The key the selection orders position i of row s by (the addend added only where there is one).
  auto key_at = [&](int64_t s, int64_t i) {
    return with_addend ? keys[s * stride + i] + addend[i] : keys[s * stride + i];
  };
  DeviceContext ctx(0);
  DeviceContext::Lease lease(ctx, nullptr);
  cudaStream_t stream = lease.stream();
  float *d_keys = nullptr, *d_out_key = nullptr, *d_addend = nullptr;
  int64_t* d_lens = nullptr;
  int32_t *d_pos = nullptr, *d_count = nullptr;
  IVFGPU_CUDA_OK(cudaMalloc(&d_keys, sizeof(float) * keys.size()));
  IVFGPU_CUDA_OK(cudaMalloc(&d_lens, sizeof(int64_t) * lens.size()));
  IVFGPU_CUDA_OK(cudaMalloc(&d_pos, sizeof(int32_t) * nseg * k));
  IVFGPU_CUDA_OK(cudaMalloc(&d_out_key, sizeof(float) * nseg * k));
  IVFGPU_CUDA_OK(cudaMalloc(&d_count, sizeof(int32_t) * nseg));
  IVFGPU_CUDA_OK(cudaMemcpy(d_keys, keys.data(), sizeof(float) * keys.size(), cudaMemcpyHostToDevice));
  IVFGPU_CUDA_OK(cudaMemcpy(d_lens, lens.data(), sizeof(int64_t) * lens.size(), cudaMemcpyHostToDevice));
  if (with_addend) {
    IVFGPU_CUDA_OK(cudaMalloc(&d_addend, sizeof(float) * addend.size()));
    IVFGPU_CUDA_OK(cudaMemcpy(d_addend, addend.data(), sizeof(float) * addend.size(), cudaMemcpyHostToDevice));
  }
  SelectInput in;
  in.keys = d_keys;
  in.stride = stride;
  in.lens = d_lens;
  in.max_len = stride;
  in.addend = d_addend;
  ivfgpu::cuda::select_topk(ctx, stream, in, nseg, k, larger, SelectOutput{d_pos, d_out_key, d_count});
  IVFGPU_CUDA_OK(cudaStreamSynchronize(stream));
  std::vector<int32_t> pos(static_cast<std::size_t>(nseg * k)), count(static_cast<std::size_t>(nseg));
  std::vector<float> out_key(static_cast<std::size_t>(nseg * k));
  IVFGPU_CUDA_OK(cudaMemcpy(pos.data(), d_pos, sizeof(int32_t) * pos.size(), cudaMemcpyDeviceToHost));
  IVFGPU_CUDA_OK(cudaMemcpy(out_key.data(), d_out_key, sizeof(float) * out_key.size(), cudaMemcpyDeviceToHost));
  IVFGPU_CUDA_OK(cudaMemcpy(count.data(), d_count, sizeof(int32_t) * count.size(), cudaMemcpyDeviceToHost));
  for (void* ptr : {static_cast<void*>(d_keys), static_cast<void*>(d_lens), static_cast<void*>(d_pos),
                    static_cast<void*>(d_out_key), static_cast<void*>(d_count), static_cast<void*>(d_addend)})
    IVFGPU_CUDA_OK(cudaFree(ptr));

  int bad_rows = 0;
  for (int64_t s = 0; s < nseg && bad_rows < 3; ++s) {
    const int64_t len = lens[s], want = std::min(len, k);
    std::vector<uint64_t> order(static_cast<std::size_t>(len));
    for (int64_t i = 0; i < len; ++i) {
      const float f = key_at(s, i);
      order[i] = (static_cast<uint64_t>(ordered(larger ? -f : f)) << 32) | static_cast<uint32_t>(i);
    }
    std::partial_sort(order.begin(), order.begin() + want, order.end());
    const std::string where = std::string(name(p)) + " k " + std::to_string(k) + (larger ? " larger" : " smaller") +
                              " row " + std::to_string(s) + " of length " + std::to_string(len);
    bool ok = count[s] == want;
    EXPECT_EQ(count[s], want) << where;
    for (int64_t j = 0; ok && j < want; ++j) {
      const int32_t expect_pos = static_cast<int32_t>(order[j] & 0xffffffffu);
      const float expect_key = key_at(s, expect_pos);
      const float got_key = out_key[s * k + j];
      if (pos[s * k + j] != expect_pos || std::memcmp(&got_key, &expect_key, sizeof(float)) != 0) {
        ADD_FAILURE() << where << ": rank " << j << " is position " << pos[s * k + j] << " key " << got_key
                      << ", expected position " << expect_pos << " key " << expect_key;
        ok = false;
      }
    }
    if (!ok) ++bad_rows;
  }
}

// Row lengths around the buffer sizes (4,096 keys below k 1,536; 2 * k2 + 1,024 above), steps
// of 1,024, and long rows; enough rows (> 2 per SM) that each row gets a block of its own.
std::vector<int64_t> mixed_lengths(int64_t k, uint64_t seed) {
  std::vector<int64_t> lens = {0, 1, k - 1, k, k + 1, 1023, 1024, 1025, 4095, 4096, 4097, 5120, 5121,
                               2 * k + 1024, 2 * k + 1025, 4 * k + 3000, 40000};
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int64_t> len(0, 40000);
  while (lens.size() < 300) lens.push_back(len(rng));
  for (int64_t& l : lens) l = std::max<int64_t>(0, l);
  return lens;
}

class Select : public ::testing::TestWithParam<int64_t> {};

TEST_P(Select, EveryPatternMatchesTheHostOrder) {
  IVFGPU_REQUIRE_GPU();
  const int64_t k = GetParam();
  for (Pattern p : {Pattern::Random, Pattern::BestLast, Pattern::BestFirst, Pattern::AllEqual, Pattern::FewValues,
                    Pattern::Signed})
    for (bool larger : {false, true}) {
      if (larger && (p == Pattern::AllEqual || p == Pattern::BestFirst)) continue;  // mirrors of others
      check(p, mixed_lengths(k, 17 + k), k, larger, 31 * k + static_cast<uint64_t>(p));
      if (HasFailure()) return;
    }
}

// 1,500 and 3,000: k between powers of two on the radix sort's builds (k 1,025 to 8,192), whose
// rows of fewer than k keys are padded past kk.
INSTANTIATE_TEST_SUITE_P(Gpu, Select, ::testing::Values(1, 10, 100, 1000, 1500, 2048, 3000, 4096));

// k past the streaming limit of the buffer (the in-place radix passes) and near it.
TEST(GpuSelect, LargestKs) {
  IVFGPU_REQUIRE_GPU();
  for (int64_t k : {int64_t{8192}, int64_t{16384}})
    for (Pattern p : {Pattern::Random, Pattern::BestLast, Pattern::FewValues}) {
      std::vector<int64_t> lens = {k - 1, k, k + 1, 3 * k, 60000};
      while (lens.size() < 280) lens.push_back(30000 + static_cast<int64_t>(lens.size()) * 97);
      check(p, lens, k, false, 5 + k);
    }
}

// Rows of tens of thousands of keys at k 256 to 4,096 (a search's rows at nprobe 16): the
// block select's bar from a sample of the row, which must never lose a key, whether the sample
// overstates the best keys (periodic: fewer than k below its bar, the row read again), misses
// them (clustered, best-last) or ties them (few values).
TEST(GpuSelect, LongRowsFromASampledBar) {
  IVFGPU_REQUIRE_GPU();
  for (int64_t k : {int64_t{256}, int64_t{1000}, int64_t{4096}}) {
    std::vector<int64_t> lens = {131072, 90000, 28000, 4096 + 1, 8191, 2 * k + 1025, 0, k};
    std::mt19937_64 rng(3 + k);
    std::uniform_int_distribution<int64_t> len(4097, 131072);
    while (lens.size() < 280) lens.push_back(len(rng));
    for (Pattern p : {Pattern::Random, Pattern::Periodic, Pattern::BestLast, Pattern::Clustered, Pattern::FewValues})
      for (bool larger : {false, true}) {
        if (larger && p != Pattern::Random && p != Pattern::Periodic) continue;
        check(p, lens, k, larger, 61 * k + static_cast<uint64_t>(p));
        if (HasFailure()) return;
      }
  }
}

// Many short rows (a batch's coarse scores): a warp per row for k <= 32. select.cu takes that
// path for at least 1,024 rows whose longest (the stride, max_len here) is at most 2,048 keys
// (kRowWarpMinSegments, kRowWarpMaxLen), so every length stays within 2,048, around the
// warp's 128-key steps.
TEST(GpuSelect, ManyShortRowsTakeAWarpEach) {
  IVFGPU_REQUIRE_GPU();
  for (int64_t k : {int64_t{1}, int64_t{10}, int64_t{16}, int64_t{32}}) {
    std::vector<int64_t> lens = {0, 1, k - 1, k, k + 1, 127, 128, 129, 1023, 1024, 1025, 2047, 2048};
    std::mt19937_64 rng(3 + k);
    std::uniform_int_distribution<int64_t> len(0, 1100);
    while (lens.size() < 2500) lens.push_back(len(rng));
    for (Pattern p : {Pattern::Random, Pattern::BestLast, Pattern::AllEqual, Pattern::FewValues, Pattern::Signed,
                      Pattern::Clustered})
      for (bool larger : {false, true}) {
        check(p, lens, k, larger, 77 + k);
        if (HasFailure()) return;
      }
  }
}

// Many rows of at most 1,024 keys with k <= 16 (the coarse top-nprobe to nprobe 16, nlist <=
// 1,024): a warp a row, the row in registers, only entries at or below the k-th of its lanes'
// least entries offered to the warp's list. select.cu takes that path for at least 1,024 rows
// whose longest (the stride here) is at most 1,024 keys; k 17 and 32 take the unfiltered warp
// list on the same rows. One lane holding every best key (one-lane) makes more than 32 entries
// pass at once (the staged entries' flush); the addend is the coarse stage's centroid norms.
TEST(GpuSelect, ManyRowsOfAtMost1024KeysAreFilteredByAWarp) {
  IVFGPU_REQUIRE_GPU();
  for (int64_t k : {int64_t{1}, int64_t{2}, int64_t{10}, int64_t{15}, int64_t{16}, int64_t{17}, int64_t{32}}) {
    std::vector<int64_t> lens = {0, 1, k - 1, k, k + 1, 31, 32, 33, 511, 512, 1023, 1024};
    std::mt19937_64 rng(5 + k);
    std::uniform_int_distribution<int64_t> len(0, 1024);
    while (lens.size() < 1500) lens.push_back(len(rng));
    for (Pattern p : {Pattern::Random, Pattern::BestLast, Pattern::BestFirst, Pattern::AllEqual, Pattern::FewValues,
                      Pattern::Signed, Pattern::Clustered, Pattern::OneLane})
      for (bool larger : {false, true})
        for (bool with_addend : {false, true}) {
          check(p, lens, k, larger, 53 + k + static_cast<uint64_t>(p), with_addend);
          if (HasFailure()) return;
        }
  }
}

// Rows of at most 4,096 keys and k <= 64 (a batch's coarse scores up to nprobe 64, nlist 4,096):
// a block a row, the row in registers, filtered by the k-th of its threads' least entries.
// select.cu takes that path for every such row set but many (>= 1,024) rows of at most 2,048
// keys with k <= 32 (a warp each, above), so these sets have 600 rows. Strides of 1,024, 2,048
// and 4,096 keys are its three builds (4, 8 and 16 keys a thread).
TEST(GpuSelect, RowsOfAtMost4096KeysAreFiltered) {
  IVFGPU_REQUIRE_GPU();
  for (int64_t stride : {int64_t{1024}, int64_t{2048}, int64_t{4096}})
    for (int64_t k : {int64_t{1}, int64_t{10}, int64_t{32}, int64_t{33}, int64_t{50}, int64_t{64}}) {
      std::vector<int64_t> lens = {0, 1, k - 1, k, k + 1, 255, 256, 257, stride - 1, stride};
      std::mt19937_64 rng(11 + k + stride);
      std::uniform_int_distribution<int64_t> len(0, stride);
      while (lens.size() < 600) lens.push_back(len(rng));
      for (Pattern p : {Pattern::Random, Pattern::BestLast, Pattern::BestFirst, Pattern::AllEqual, Pattern::FewValues,
                        Pattern::Signed, Pattern::Clustered})
        for (bool larger : {false, true}) {
          check(p, lens, k, larger, 41 * k + stride + static_cast<uint64_t>(p));
          if (HasFailure()) return;
        }
    }
}

// Few long rows: split into pieces whose bests a second pass merges.
TEST(GpuSelect, FewLongRowsAreSplit) {
  IVFGPU_REQUIRE_GPU();
  for (int64_t k : {int64_t{1}, int64_t{10}, int64_t{1000}})
    for (Pattern p : {Pattern::Random, Pattern::BestLast, Pattern::AllEqual, Pattern::FewValues})
      check(p, {300000, 123457, 8191, 0, 1}, k, false, 9 + k);
}

// select_rank_key (the wide pass's sampled bound): each row's rank-th ordered key, the one the
// host's order puts at rank - 1, and 0xffffffff for a row shorter than rank; rows of a stride of
// up to 2,048 keys (a warp's registers) and of longer ones, where rows past 2,048 take a block
// each (one of 20,000 keys: past the 8,192 a block holds in registers).
TEST(GpuSelect, RankKeyIsTheHostOrdersRankThKey) {
  IVFGPU_REQUIRE_GPU();
  DeviceContext ctx(0);
  DeviceContext::Lease lease(ctx, nullptr);
  cudaStream_t stream = lease.stream();
  for (int64_t longest : {int64_t{2048}, int64_t{20000}})
    for (int64_t rank : {int64_t{1}, int64_t{7}, int64_t{102}, int64_t{1000}}) {
      std::vector<int64_t> lens = {0, 1, rank - 1, rank, rank + 1, 31, 32, 33, 2047, longest};
      std::mt19937_64 rng(77 + rank + longest);
      std::uniform_int_distribution<int64_t> len(0, std::min<int64_t>(longest, 3000));
      while (lens.size() < 400) lens.push_back(len(rng));
      const int64_t nseg = static_cast<int64_t>(lens.size());
      const int64_t stride = *std::max_element(lens.begin(), lens.end());
      for (Pattern p : {Pattern::Random, Pattern::BestLast, Pattern::AllEqual, Pattern::FewValues, Pattern::Signed,
                        Pattern::OneLane})
        for (bool larger : {false, true}) {
          std::vector<float> keys(static_cast<std::size_t>(nseg * stride), 0.0f);
          for (int64_t s = 0; s < nseg; ++s) {
            const std::vector<float> row = make_row(p, lens[s], rng);
            std::copy(row.begin(), row.end(), keys.begin() + s * stride);
          }
          float* d_keys = nullptr;
          int64_t* d_lens = nullptr;
          uint32_t* d_out = nullptr;
          IVFGPU_CUDA_OK(cudaMalloc(&d_keys, sizeof(float) * keys.size()));
          IVFGPU_CUDA_OK(cudaMalloc(&d_lens, sizeof(int64_t) * lens.size()));
          IVFGPU_CUDA_OK(cudaMalloc(&d_out, sizeof(uint32_t) * lens.size()));
          IVFGPU_CUDA_OK(cudaMemcpy(d_keys, keys.data(), sizeof(float) * keys.size(), cudaMemcpyHostToDevice));
          IVFGPU_CUDA_OK(cudaMemcpy(d_lens, lens.data(), sizeof(int64_t) * lens.size(), cudaMemcpyHostToDevice));
          ivfgpu::cuda::select_rank_key(ctx, stream, d_keys, stride, d_lens, nseg, rank, larger, d_out);
          IVFGPU_CUDA_OK(cudaStreamSynchronize(stream));
          std::vector<uint32_t> got(lens.size());
          IVFGPU_CUDA_OK(cudaMemcpy(got.data(), d_out, sizeof(uint32_t) * got.size(), cudaMemcpyDeviceToHost));
          for (void* ptr : {static_cast<void*>(d_keys), static_cast<void*>(d_lens), static_cast<void*>(d_out)})
            IVFGPU_CUDA_OK(cudaFree(ptr));
          for (int64_t s = 0; s < nseg; ++s) {
            uint32_t want = 0xffffffffu;
            if (lens[s] >= rank) {
              std::vector<uint32_t> row(static_cast<std::size_t>(lens[s]));
              for (int64_t i = 0; i < lens[s]; ++i) {
                const float f = keys[static_cast<std::size_t>(s * stride + i)];
                row[static_cast<std::size_t>(i)] = ordered(larger ? -f : f);
              }
              std::nth_element(row.begin(), row.begin() + (rank - 1), row.end());
              want = row[static_cast<std::size_t>(rank - 1)];
            }
            ASSERT_EQ(got[static_cast<std::size_t>(s)], want)
                << name(p) << (larger ? " larger" : " smaller") << " rank " << rank << " row " << s << " of length "
                << lens[s] << ", stride " << stride;
          }
        }
    }
}

}  // namespace
