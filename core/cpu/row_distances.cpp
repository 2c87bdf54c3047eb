#include "row_distances.hpp"

#include <cstdlib>
#include <cstring>
#include <type_traits>

#include "distances.hpp"

namespace ivfgpu::cpu {

namespace {

// Byte rows one by one (scans do not ask for them: see row_distances.hpp, but every T has one).
template <class T, bool IP>
void baseline_rows(const float* a, const T* b, int64_t dim, float* out) {
  if constexpr (sizeof(T) == 1) {
    for (int r = 0; r < kScanRows; ++r) distance_detail::exact_distances<T, 1, IP, 16>(a, b + r * dim, dim, out + r);
  } else {
    distance_detail::exact_distances<T, kScanRows, IP, 16>(a, b, dim, out);
  }
}

// Where 8-wide vectors pay: every type, with bytes and f16 widened by instructions (built by
// GCC from scalar inserts, bytes ran 2x slower; f16 by table, no faster). f16 needs F16C,
// which every AVX2 CPU we know has; it is checked all the same.
template <class T>
bool avx2_kernel_for() {
  if constexpr (std::is_same_v<T, Half>) return cpu_has_f16c();
  else return true;
}

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#define IVFGPU_HAVE_AVX2_KERNEL 1
// The same definition compiled for AVX2 (not FMA: the sums must stay separate roundings).
template <class T, bool IP>
__attribute__((target("avx2,f16c"))) void avx2_rows(const float* a, const T* b, int64_t dim, float* out) {
  distance_detail::exact_distances<T, kScanRows, IP, 32>(a, b, dim, out);
}
#else
#define IVFGPU_HAVE_AVX2_KERNEL 0  // other architectures: the baseline kernel only
#endif

bool baseline_pinned() {
  const char* e = std::getenv("IVFGPU_CPU_SIMD");
  return e != nullptr && std::strcmp(e, "baseline") == 0;
}

}  // namespace

namespace {
// The CPU's features, asked once per process.
struct CpuFeatures {
  bool avx2 = false, f16c = false;
};
const CpuFeatures& cpu_features() {
  static const CpuFeatures f = [] {
    CpuFeatures x;
#if IVFGPU_HAVE_AVX2_KERNEL
    x.avx2 = __builtin_cpu_supports("avx2");
    // F16C is CPUID leaf 1, ECX bit 29: clang 14 does not know "f16c" in __builtin_cpu_supports
    // (the fuzz build, fuzz/README.md, failed on it). Its instructions are VEX-encoded, so they
    // also need the OS's AVX state, which the "avx" check includes.
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    x.f16c = __builtin_cpu_supports("avx") && __get_cpuid(1, &eax, &ebx, &ecx, &edx) != 0 && (ecx & bit_F16C) != 0;
#endif
    return x;
  }();
  return f;
}
}  // namespace

bool cpu_has_avx2() { return cpu_features().avx2; }
bool cpu_has_f16c() { return cpu_features().f16c; }

template <class T>
RowDistances<T> row_distances(Metric kernel, RowKernel which) {
  const bool ip = kernel != Metric::L2;
  if (which == RowKernel::Auto) {
    which = cpu_has_avx2() && !baseline_pinned() && avx2_kernel_for<T>() ? RowKernel::Avx2 : RowKernel::Baseline;
    if (which == RowKernel::Baseline && sizeof(T) == 1) return nullptr;  // one row at a time
  }
  if (which == RowKernel::Avx2) {
    if (!cpu_has_avx2() || !avx2_kernel_for<T>()) return nullptr;
#if IVFGPU_HAVE_AVX2_KERNEL
    return ip ? avx2_rows<T, true> : avx2_rows<T, false>;
#endif
  }
  return ip ? baseline_rows<T, true> : baseline_rows<T, false>;
}

template RowDistances<float> row_distances<float>(Metric, RowKernel);
template RowDistances<Half> row_distances<Half>(Metric, RowKernel);
template RowDistances<BFloat16> row_distances<BFloat16>(Metric, RowKernel);
template RowDistances<uint8_t> row_distances<uint8_t>(Metric, RowKernel);
template RowDistances<int8_t> row_distances<int8_t>(Metric, RowKernel);

}  // namespace ivfgpu::cpu
