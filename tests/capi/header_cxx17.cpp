// The public header compiles as C++17 (no C++20 needed by users), included twice.
#include "ivfgpu/ivfgpu.h"
#include "ivfgpu/ivfgpu.h"

#include <cstdio>

int main() {
  static_assert(sizeof(ivf_status) == 4 && sizeof(ivf_metric) == 4, "enums travel as int32_t");
  std::printf("C++17 header check passed (libivfgpu %s)\n", ivf_version());
  return ivf_abi_version() == IVF_ABI_VERSION ? 0 : 1;
}
