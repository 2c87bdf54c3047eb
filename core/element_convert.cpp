#include "element_convert.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <mutex>
#include <string>
#include <vector>

#include "cpu/parallel.hpp"
#include "errors.hpp"
#include "vector_ops.hpp"

namespace ivfgpu {

namespace {

// v as a T in out, or false where T cannot hold it: f16/bf16 round to nearest even and refuse
// what overflows; uint8/int8 take integers in range only.
bool encode_one(float v, float& out) {
  out = v;
  return true;
}
bool encode_one(float v, Half& out) {
  out = to_half(v);
  return (out.bits & 0x7c00u) != 0x7c00u;
}
bool encode_one(float v, BFloat16& out) {
  out = to_bfloat16(v);
  return (out.bits & 0x7f80u) != 0x7f80u;
}
template <class I>
bool encode_integer(float v, I& out) {
  constexpr float lo = std::numeric_limits<I>::min(), hi = std::numeric_limits<I>::max();
  if (!(v >= lo && v <= hi) || v != std::floor(v)) return false;
  out = static_cast<I>(v);
  return true;
}
bool encode_one(float v, uint8_t& out) { return encode_integer(v, out); }
bool encode_one(float v, int8_t& out) { return encode_integer(v, out); }

}  // namespace

void refuse_element(const char* what, int64_t i, int64_t dim, float v, ElementType to) {
  std::string why;
  switch (to) {
    case ElementType::F16: why = "is outside the f16 range (|x| < 65520)"; break;
    case ElementType::BF16: why = "is outside the bf16 range"; break;
    case ElementType::U8: why = "is not an integer in [0, 255] (uint8 storage: no scaling is applied)"; break;
    case ElementType::I8: why = "is not an integer in [-128, 127] (int8 storage: no scaling is applied)"; break;
    case ElementType::F32: why = "is not finite"; break;
  }
  fail(Errc::InvalidArgument, std::string(what) + " row " + std::to_string(i / dim) + ", element " +
                                  std::to_string(i % dim) + ": " + std::to_string(v) + " " + why);
}

std::vector<unsigned char> encode_rows(const MatrixView& x, ElementType to, const char* what) {
  const int64_t count = x.rows * x.dim;
  std::vector<unsigned char> out(static_cast<std::size_t>(count) * element_size(to));
  if (x.type == to) {
    std::memcpy(out.data(), x.data, out.size());
    return out;
  }
  if (x.type != ElementType::F32)
    fail(Errc::InvalidArgument, std::string(what) + " is " + element_name(x.type) + ": pass f32 or the index's storage type (" +
                                    element_name(to) + ")");
  const float* src = x.as<float>();
  dispatch_element_type(to, [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* o = reinterpret_cast<T*>(out.data());
    for (int64_t i = 0; i < count; ++i)
      if (!encode_one(src[i], o[i])) refuse_element(what, i, x.dim, src[i], to);
  });
  return out;
}

const float* half_table() {
  static const std::vector<float> table = [] {
    std::vector<float> t(65536);
    for (uint32_t b = 0; b < 65536; ++b) {
      Half h;
      h.bits = static_cast<uint16_t>(b);
      t[b] = static_cast<float>(h);
    }
    return t;
  }();
  return table.data();
}

void decode_into(const void* rows, ElementType type, int64_t count, float* out) {
  dispatch_element_type(type, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* src = static_cast<const T*>(rows);
    const HostDecoder<T> decode;
    for (int64_t i = 0; i < count; ++i) out[i] = decode(src[i]);
  });
}

std::vector<float> decode_rows(const void* rows, ElementType type, int64_t n, int64_t dim) {
  std::vector<float> out(static_cast<std::size_t>(n * dim));
  decode_into(rows, type, n * dim, out.data());
  return out;
}

void convert_model(HostModel& m, ElementType to) {
  if (m.type == to) return;
  std::vector<float> f32 = m.type == ElementType::F32 ? std::move(m.vectors)
                                                      : decode_rows(m.packed.data(), m.type, m.ntotal(), m.dim);
  m.vectors.clear();
  m.packed.clear();
  if (to == ElementType::F32) {
    m.vectors = std::move(f32);
  } else {
    m.packed = encode_rows(MatrixView::host_f32(f32.data(), m.ntotal(), m.dim), to, "load: stored");
  }
  m.type = to;
}

int64_t first_non_finite(const MatrixView& x) {
  switch (x.type) {
    case ElementType::F32: return first_non_finite_row(x.as<float>(), x.rows, x.dim);
    case ElementType::F16:
    case ElementType::BF16: {
      const std::vector<float> f = decode_rows(x.data, x.type, x.rows, x.dim);
      return first_non_finite_row(f.data(), x.rows, x.dim);
    }
    default: return -1;
  }
}

namespace {

// first_unusable_row over threads in blocks of rows when the rows are many: on one thread the
// check of a 10,000 x 784 batch (31 MB) outlasted its GPU search at low nprobe, and the caller
// waited for it (a host-memory search checks its queries while its first chunk runs:
// search.hpp); on threads the main job's batch at nprobe 1 fell from 2.1-2.6 to 1.4 ms (H200,
// bench/RESULTS.md). Below 8 MiB a thread's start costs more than it saves.
int64_t first_unusable_f32(const float* x, int64_t rows, int64_t dim, bool bounded, bool* non_finite, float bound) {
  constexpr int64_t kBytesPerThread = int64_t{4} << 20;
  constexpr int kMaxThreads = 8;
  const int64_t min_rows = std::max<int64_t>(1, kBytesPerThread / std::max<int64_t>(1, dim * 4));
  if (rows < 2 * min_rows) return first_unusable_row(x, rows, dim, bounded, non_finite, bound);
  std::mutex mutex;
  int64_t first = -1;
  bool first_non_finite = false;
  parallel_for(rows, std::min(resolve_threads(0), kMaxThreads), min_rows, [&](int64_t b, int64_t e) {
    bool nf = false;
    const int64_t at = first_unusable_row(x + b * dim, e - b, dim, bounded, &nf, bound);
    if (at < 0) return;
    std::lock_guard<std::mutex> lock(mutex);
    if (first < 0 || b + at < first) {
      first = b + at;
      first_non_finite = nf;
    }
  });
  if (first >= 0) *non_finite = first_non_finite;
  return first;
}

}  // namespace

int64_t first_unusable(const MatrixView& x, bool bounded, bool* non_finite, float bound) {
  switch (x.type) {
    case ElementType::F32: return first_unusable_f32(x.as<float>(), x.rows, x.dim, bounded, non_finite, bound);
    case ElementType::F16:
    case ElementType::BF16: {
      // In blocks: a compact matrix (a loaded model, a large add) is never decoded whole.
      constexpr int64_t kBlock = 65536;
      const std::size_t row_bytes = static_cast<std::size_t>(x.dim) * element_size(x.type);
      std::vector<float> f;
      for (int64_t r0 = 0; r0 < x.rows; r0 += kBlock) {
        const int64_t m = std::min(kBlock, x.rows - r0);
        f = decode_rows(static_cast<const unsigned char*>(x.data) + static_cast<std::size_t>(r0) * row_bytes, x.type,
                        m, x.dim);
        const int64_t at = first_unusable_row(f.data(), m, x.dim, bounded, non_finite, bound);
        if (at >= 0) return r0 + at;
      }
      return -1;
    }
    default: return -1;
  }
}

void reject_unusable_rows(const MatrixView& x, Metric metric, const char* what) {
  if (!x.on_host()) return;  // device data: checked by the backend (NaN and Inf)
  bool non_finite = false;
  const int64_t row = first_unusable(x, metric != Metric::Cosine, &non_finite);
  if (row >= 0) fail_unusable_row(what, row, non_finite);
}

void fail_unusable_row(const char* what, int64_t row, bool non_finite) {
  if (non_finite)
    fail(Errc::InvalidArgument, std::string(what) + " row " + std::to_string(row) +
                                    " holds NaN or Inf (rejected: no distance is defined for it)");
  fail(Errc::InvalidArgument, std::string(what) + " row " + std::to_string(row) +
                                  " has a squared norm beyond 4.25e37 (elements beyond about 6.5e18): its distances "
                                  "could overflow float (rejected; the cosine metric accepts it)");
}

}  // namespace ivfgpu
