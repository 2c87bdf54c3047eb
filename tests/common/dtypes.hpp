// Element types and device budgets as the tests name and probe them through the C ABI: one copy
// for the CPU storage-type test, its GPU twins and the host-tier test.
#pragma once

#include <cstddef>
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "common/test_util.hpp"

namespace ivftest {

inline const char* type_name(ivf_dtype t) {
  switch (t) {
    case IVF_DTYPE_F32: return "f32";
    case IVF_DTYPE_F16: return "f16";
    case IVF_DTYPE_BF16: return "bf16";
    case IVF_DTYPE_U8: return "uint8";
    case IVF_DTYPE_I8: return "int8";
  }
  return "?";
}
inline bool is_int(ivf_dtype t) { return t == IVF_DTYPE_U8 || t == IVF_DTYPE_I8; }
inline std::size_t elem_size(ivf_dtype t) {
  return t == IVF_DTYPE_F32 ? 4 : (t == IVF_DTYPE_F16 || t == IVF_DTYPE_BF16) ? 2 : 1;
}

// A clustered mixture each type can hold: `centres` centres uniform in [0, 1]^dim (drawn from
// centre_seed, so base and queries share them), each row a centre plus N(0, 0.08) noise, then
// mapped: uint8 round(255 x) clamped to [0, 255], int8 the same minus 128, floating types
// 3 x - 1.5 (reals in about [-1.5, 1.5]).
inline std::vector<float> data_for(ivf_dtype t, int64_t n, int64_t dim, int64_t centres, uint64_t centre_seed, uint64_t seed) {
  std::vector<float> c(static_cast<std::size_t>(centres * dim));
  {
    std::mt19937_64 crng(centre_seed);
    std::uniform_real_distribution<float> u(0.0f, 1.0f);
    for (auto& v : c) v = u(crng);
  }
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> noise(0.0f, 0.08f);
  std::vector<float> x(static_cast<std::size_t>(n * dim));
  for (int64_t i = 0; i < n; ++i) {
    const int64_t k = static_cast<int64_t>(rng() % static_cast<uint64_t>(centres));
    for (int64_t j = 0; j < dim; ++j) {
      const float v = c[k * dim + j] + noise(rng);
      float& o = x[i * dim + j];
      if (t == IVF_DTYPE_U8) o = std::clamp(std::round(v * 255.0f), 0.0f, 255.0f);
      else if (t == IVF_DTYPE_I8) o = std::clamp(std::round(v * 255.0f) - 128.0f, -128.0f, 127.0f);
      else o = v * 3.0f - 1.5f;
    }
  }
  return x;
}

// The smallest device budget a CUDA index of this shape takes, read from the error a
// too-small one gets (so tests do not restate the library's arithmetic).
inline int64_t minimum_budget(int64_t nlist, int64_t dim, ivf_dtype storage = IVF_DTYPE_F32) {
  auto p = make_params({{IVF_PARAM_BACKEND, IVF_BACKEND_CUDA}, {IVF_PARAM_NLIST, nlist}, {IVF_PARAM_DEVICE_BUDGET, 1},
                        {IVF_PARAM_STORAGE_TYPE, storage}});
  ivf_index* raw = nullptr;
  EXPECT_EQ(ivf_create(&raw, dim, p.get()), IVF_ERR_INVALID_ARGUMENT);
  ivf_free(raw);
  const std::string msg = ivf_last_error_message();
  const auto at = msg.find("at least ");
  EXPECT_NE(at, std::string::npos) << msg;
  return at == std::string::npos ? 0 : std::stoll(msg.substr(at + 9));
}

}  // namespace ivftest
