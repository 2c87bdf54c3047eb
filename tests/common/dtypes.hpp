// Element types and device budgets as the tests name and probe them through the C ABI: one copy
// for the CPU storage-type test, its GPU twins and the host-tier test.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

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
