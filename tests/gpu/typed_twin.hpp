// The CUDA index of a storage type and its CPU twin, and the results contract between them
// (../shared/docs/results-contract.md), through the C ABI only: the helpers of
// storage_types_gpu_test.cpp (whose head comment gives the argument) shared with
// random_shapes_gpu_test.cpp.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "common/dtypes.hpp"
#include "common/id_workload.hpp"
#include "common/test_util.hpp"

namespace ivftest::typed {

using Bytes = std::vector<unsigned char>;

// ---------------------------------------------------------------------------------------------
// Element types

inline const char* metric_name(int32_t m) {
  return m == IVF_METRIC_L2 ? "L2" : m == IVF_METRIC_INNER_PRODUCT ? "IP" : "cosine";
}
inline uint32_t bits_of(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
inline float float_of(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// binary16, round to nearest, ties to even (finite inputs; beyond the range gives infinity).
inline uint16_t to_f16(float f) {
  const uint32_t x = bits_of(f);
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
  const uint32_t ax = x & 0x7fffffffu;
  if (ax >= 0x7f800000u) return static_cast<uint16_t>(sign | 0x7c00u | (ax > 0x7f800000u ? 0x200u : 0u));
  if (ax >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // >= 65520: rounds to infinity
  if (ax < 0x38800000u) {  // below 2^-14: a subnormal (or zero); the scaling by 2^24 is exact
    const float scaled = float_of(ax) * 16777216.0f;
    return static_cast<uint16_t>(sign | static_cast<uint16_t>(std::nearbyint(scaled)));
  }
  const uint32_t mant = ax & 0x7fffffu;
  uint32_t h = ((((ax >> 23) & 0xffu) - 127u + 15u) << 10) | (mant >> 13);
  const uint32_t rest = mant & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) ++h;  // a carry into the exponent is right
  return static_cast<uint16_t>(sign | h);
}
inline float from_f16(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
  if (e == 0) {
    const float v = static_cast<float>(m) * (1.0f / 16777216.0f);
    return sign ? -v : v;
  }
  if (e == 31) return float_of(sign | 0x7f800000u | (m << 13));
  return float_of(sign | ((e - 15u + 127u) << 23) | (m << 13));
}
// bfloat16: the top 16 bits of the f32, rounded to nearest even (finite inputs).
inline uint16_t to_bf16(float f) {
  const uint32_t x = bits_of(f);
  return static_cast<uint16_t>((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}
inline float from_bf16(uint16_t b) { return float_of(static_cast<uint32_t>(b) << 16); }

// f32 values (integers in range for the integer types) as the type's bytes, and back.
inline Bytes encode(const std::vector<float>& x, ivf_dtype t) {
  Bytes out(x.size() * elem_size(t));
  for (std::size_t i = 0; i < x.size(); ++i) {
    switch (t) {
      case IVF_DTYPE_F32: std::memcpy(&out[4 * i], &x[i], 4); break;
      case IVF_DTYPE_F16: {
        const uint16_t h = to_f16(x[i]);
        std::memcpy(&out[2 * i], &h, 2);
        break;
      }
      case IVF_DTYPE_BF16: {
        const uint16_t b = to_bf16(x[i]);
        std::memcpy(&out[2 * i], &b, 2);
        break;
      }
      case IVF_DTYPE_U8: out[i] = static_cast<unsigned char>(static_cast<int>(x[i])); break;
      case IVF_DTYPE_I8: out[i] = static_cast<unsigned char>(static_cast<int8_t>(static_cast<int>(x[i]))); break;
    }
  }
  return out;
}
inline std::vector<float> decode(const Bytes& b, ivf_dtype t) {
  std::vector<float> out(b.size() / elem_size(t));
  for (std::size_t i = 0; i < out.size(); ++i) {
    uint16_t h = 0;
    switch (t) {
      case IVF_DTYPE_F32: std::memcpy(&out[i], &b[4 * i], 4); break;
      case IVF_DTYPE_F16: std::memcpy(&h, &b[2 * i], 2); out[i] = from_f16(h); break;
      case IVF_DTYPE_BF16: std::memcpy(&h, &b[2 * i], 2); out[i] = from_bf16(h); break;
      case IVF_DTYPE_U8: out[i] = static_cast<float>(b[i]); break;
      case IVF_DTYPE_I8: out[i] = static_cast<float>(static_cast<int8_t>(b[i])); break;
    }
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// Data

// f32 queries need not be integers, even against integer rows: the integers moved by up to 0.45.
inline std::vector<float> jittered(const std::vector<float>& x, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> u(-0.45f, 0.45f);
  std::vector<float> y(x);
  for (auto& v : y) v += u(rng);
  return y;
}

// ---------------------------------------------------------------------------------------------
// Indexes

inline bool ok(ivf_status s, const std::string& what) {
  if (s == IVF_OK) return true;
  ADD_FAILURE() << what << ": " << ivf_status_string(s) << ": " << ivf_last_error_message();
  return false;
}

inline int64_t info(const ivf_index* idx, ivf_info_key key) {
  int64_t v = -1;
  EXPECT_EQ(ivf_index_info(idx, key, &v), IVF_OK) << ivf_last_error_message();
  return v;
}

inline IndexPtr typed_index(int32_t backend, ivf_dtype t, int32_t metric, int64_t dim, int64_t nlist) {
  auto p = make_params({{IVF_PARAM_BACKEND, backend}, {IVF_PARAM_NLIST, nlist}, {IVF_PARAM_METRIC, metric},
                        {IVF_PARAM_STORAGE_TYPE, t}});
  return make_index(dim, p.get());
}

// An index read from bytes of ivf_serialize; storage < 0 leaves IVF_PARAM_STORAGE_TYPE unset (a
// compact file keeps its type).
inline IndexPtr open_bytes(const Bytes& bytes, int32_t backend, int64_t storage = -1, int64_t budget = 0) {
  auto p = make_params({{IVF_PARAM_BACKEND, backend}, {IVF_PARAM_DEVICE_BUDGET, budget}});
  if (storage >= 0) {
    EXPECT_EQ(ivf_params_set_int(p.get(), IVF_PARAM_STORAGE_TYPE, storage), IVF_OK);
  }
  ivf_index* raw = nullptr;
  EXPECT_EQ(ivf_deserialize(bytes.data(), bytes.size(), p.get(), &raw), IVF_OK) << ivf_last_error_message();
  return IndexPtr(raw);
}

// The centroids of a serialized trained index (docs/file-format.md §2: the 128-byte header,
// then the CENT section: a 24-byte section header and nlist x dim f32, row-major).
inline std::vector<float> centroids_of(const Bytes& file, int64_t nlist, int64_t dim) {
  const std::size_t at = 128 + 24, len = static_cast<std::size_t>(nlist * dim) * 4;
  std::vector<float> c(static_cast<std::size_t>(nlist * dim));
  if (file.size() < at + len || std::memcmp(file.data() + 128, "CENT", 4) != 0) {
    ADD_FAILURE() << "no CENT section where docs/file-format.md puts it";
    return c;
  }
  std::memcpy(c.data(), file.data() + at, len);
  return c;
}

inline std::vector<int64_t> iota_ids(int64_t n, int64_t first = 0) {
  std::vector<int64_t> ids(static_cast<std::size_t>(n));
  std::iota(ids.begin(), ids.end(), first);
  return ids;
}

// ivf_get of ids in `dtype`; every id must be found.
inline Bytes get_rows(const ivf_index* idx, const std::vector<int64_t>& ids, ivf_dtype dtype, int64_t dim) {
  const int64_t n = static_cast<int64_t>(ids.size());
  Bytes out(static_cast<std::size_t>(n * dim) * elem_size(dtype));
  std::vector<uint8_t> found(ids.size(), 7);
  EXPECT_EQ(ivf_get(idx, nullptr, ids.data(), n, out.data(), dtype, dim, found.data()), IVF_OK)
      << ivf_last_error_message();
  EXPECT_EQ(std::count(found.begin(), found.end(), uint8_t{1}), n) << "ivf_get found only some ids";
  return out;
}

inline Searched search_as(const ivf_index* idx, const void* q, ivf_dtype dtype, int64_t nq, int64_t dim, int64_t k,
                          int64_t nprobe) {
  Searched r;
  r.ids.assign(static_cast<std::size_t>(nq * k), -7);
  r.dists.assign(r.ids.size(), std::numeric_limits<float>::quiet_NaN());
  auto p = make_params({{IVF_PARAM_NPROBE, nprobe}});
  EXPECT_EQ(ivf_search(idx, p.get(), q, dtype, nq, dim, k, r.ids.data(), r.dists.data()), IVF_OK)
      << type_name(dtype) << " queries: " << ivf_last_error_message();
  return r;
}

inline bool identical(const Searched& a, const Searched& b) {
  return a.ids == b.ids && a.dists.size() == b.dists.size() &&
         std::memcmp(a.dists.data(), b.dists.data(), a.dists.size() * sizeof(float)) == 0;
}

// ---------------------------------------------------------------------------------------------
// The CPU and CUDA indexes of one case, and what the test knows of them.

struct Model {
  ivf_dtype type = IVF_DTYPE_F32;
  int32_t metric = IVF_METRIC_L2;
  int64_t n = 0, dim = 0, nlist = 0;
  std::vector<float> rows;       // the stored rows, decoded (ivf_get in f32), row = id
  std::vector<float> centroids;  // nlist x dim, as the file holds them
  double max_row_norm2 = 0, max_centroid_norm = 0;
};

struct Twin {
  IndexPtr gpu, cpu;
  Model m;
};

// The CPU index trains; its trained, empty file opens as the CUDA index (same centroids), which
// adds x with ids 0..n-1; its filled file opens on the CPU (same lists).
inline bool make_twin(ivf_dtype t, int32_t metric, int64_t dim, int64_t nlist, const std::vector<float>& x, int64_t n,
                      Twin& tw) {
  IndexPtr trainer = typed_index(IVF_BACKEND_CPU, t, metric, dim, nlist);
  if (!trainer || !ok(ivf_train(trainer.get(), x.data(), IVF_DTYPE_F32, n, dim), "CPU train")) return false;
  const Bytes trained = bytes_of(trainer.get());
  tw.gpu = open_bytes(trained, IVF_BACKEND_CUDA);
  if (!tw.gpu) return false;
  EXPECT_EQ(info(tw.gpu.get(), IVF_INFO_BACKEND), IVF_BACKEND_CUDA);
  EXPECT_EQ(info(tw.gpu.get(), IVF_INFO_STORAGE_TYPE), t);
  EXPECT_EQ(info(tw.gpu.get(), IVF_INFO_METRIC), metric);
  if (!ok(ivf_add(tw.gpu.get(), x.data(), IVF_DTYPE_F32, n, dim, nullptr), "CUDA add")) return false;
  EXPECT_EQ(info(tw.gpu.get(), IVF_INFO_NTOTAL), n);
  tw.cpu = open_bytes(bytes_of(tw.gpu.get()), IVF_BACKEND_CPU);
  if (!tw.cpu) return false;
  EXPECT_EQ(info(tw.cpu.get(), IVF_INFO_STORAGE_TYPE), t);
  Model& m = tw.m;
  m.type = t;
  m.metric = metric;
  m.n = n;
  m.dim = dim;
  m.nlist = nlist;
  const auto ids = iota_ids(n);
  m.rows = decode(get_rows(tw.cpu.get(), ids, IVF_DTYPE_F32, dim), IVF_DTYPE_F32);
  // The CUDA index holds the same values.
  const Bytes stored = get_rows(tw.gpu.get(), ids, t, dim);
  EXPECT_TRUE(stored == get_rows(tw.cpu.get(), ids, t, dim)) << "stored rows differ";
  if (metric != IVF_METRIC_COSINE) {
    EXPECT_TRUE(stored == encode(x, t)) << "the stored rows are not the input's";
  }
  m.centroids = centroids_of(trained, nlist, dim);
  for (int64_t i = 0; i < n; ++i) {
    double s = 0;
    for (int64_t j = 0; j < dim; ++j) s += double(m.rows[i * dim + j]) * m.rows[i * dim + j];
    m.max_row_norm2 = std::max(m.max_row_norm2, s);
  }
  for (int64_t l = 0; l < nlist; ++l) {
    double s = 0;
    for (int64_t j = 0; j < dim; ++j) s += double(m.centroids[l * dim + j]) * m.centroids[l * dim + j];
    m.max_centroid_norm = std::max(m.max_centroid_norm, std::sqrt(s));
  }
  return true;
}

// ---------------------------------------------------------------------------------------------
// The results contract

// A query as the metric sees it (cosine: unit length), in double.
inline std::vector<double> as_searched(const float* q, int64_t dim, int32_t metric) {
  std::vector<double> v(q, q + dim);
  if (metric == IVF_METRIC_COSINE) {
    double s = 0;
    for (double a : v) s += a * a;
    const double inv = s > 0 ? 1.0 / std::sqrt(s) : 0.0;
    for (double& a : v) a *= inv;
  }
  return v;
}

inline double true_distance(const std::vector<double>& q, const float* x, int32_t metric) {
  double s = 0;
  for (std::size_t j = 0; j < q.size(); ++j) s += metric == IVF_METRIC_L2 ? (q[j] - x[j]) * (q[j] - x[j]) : q[j] * x[j];
  return s;
}

// Integer query against an integer row: the exact integer, rounded once to float.
inline float integer_distance(const float* q, const float* x, int64_t dim, int32_t metric) {
  int64_t s = 0;
  for (int64_t j = 0; j < dim; ++j) {
    const int64_t a = static_cast<int64_t>(q[j]), b = static_cast<int64_t>(x[j]);
    s += metric == IVF_METRIC_L2 ? (a - b) * (a - b) : a * b;
  }
  return static_cast<float>(s);
}

// Whether the query's nprobe-th and (nprobe+1)-th centroid scores (the CPU's: ||c||^2 - 2 q.c
// for L2, -q.c otherwise) are within fp32 rounding of each other.
inline bool coarse_near_tie(const Model& m, const std::vector<double>& q, int64_t nprobe) {
  if (nprobe >= m.nlist) return false;
  double qn = 0;
  for (double a : q) qn += a * a;
  qn = std::sqrt(qn);
  std::vector<double> s(static_cast<std::size_t>(m.nlist));
  for (int64_t l = 0; l < m.nlist; ++l) {
    double dot = 0, c2 = 0;
    for (int64_t j = 0; j < m.dim; ++j) {
      const double c = m.centroids[l * m.dim + j];
      dot += q[j] * c;
      c2 += c * c;
    }
    s[l] = m.metric == IVF_METRIC_L2 ? c2 - 2 * dot : -dot;
  }
  std::nth_element(s.begin(), s.begin() + nprobe, s.end());
  const double next = s[nprobe];
  const double last = *std::max_element(s.begin(), s.begin() + nprobe);
  // fp32 rounding of a dot product over dim terms, with room for either backend's summation
  // order (and for an L2 GEMM that also folds in ||q||^2).
  const double scale = m.metric == IVF_METRIC_L2 ? (qn + m.max_centroid_norm) * (qn + m.max_centroid_norm)
                                                 : qn * m.max_centroid_norm;
  return next - last <= 1e-6 * (4.0 + std::sqrt(double(m.dim))) * scale + 1e-30;
}

struct Tally {
  int64_t rows = 0, skipped = 0;
};

// The CUDA results g against the CPU results c for nq queries (`decoded`: the queries as the
// library reads them, f32). exact: integer queries against integer rows.
inline void expect_same(const Model& m, const Searched& g, const Searched& c, const std::vector<float>& decoded,
                        int64_t nq, int64_t k, int64_t nprobe, bool exact, Tally& tally, const std::string& what) {
  const bool larger = m.metric != IVF_METRIC_L2;
  const float pad = larger ? -std::numeric_limits<float>::infinity() : std::numeric_limits<float>::infinity();
  auto better = [larger](double a, double b) { return larger ? a > b : a < b; };
  int64_t bad = 0, skipped = 0;
  std::string first;
  for (int64_t q = 0; q < nq; ++q) {
    const std::vector<double> qv = as_searched(decoded.data() + q * m.dim, m.dim, m.metric);
    double qn2 = 0;
    for (double a : qv) qn2 += a * a;
    const double tol = exact ? 0.0 : 2e-5 * (qn2 + m.max_row_norm2) + 1e-30;
    const int64_t* gi = g.ids.data() + q * k;
    const float* gd = g.dists.data() + q * k;
    const int64_t* ci = c.ids.data() + q * k;
    const float* cd = c.dists.data() + q * k;
    // 1. The CUDA row on its own: never excused.
    std::string own;
    std::vector<int64_t> seen;
    for (int64_t j = 0; j < k && own.empty(); ++j) {
      if (gi[j] == -1) {
        if (gd[j] != pad) own = "padding distance " + std::to_string(gd[j]) + " at rank " + std::to_string(j);
        else if (j + 1 < k && gi[j + 1] != -1) own = "a result after padding at rank " + std::to_string(j + 1);
        continue;
      }
      if (gi[j] < 0 || gi[j] >= m.n) {
        own = "id " + std::to_string(gi[j]) + " out of range at rank " + std::to_string(j);
        break;
      }
      seen.push_back(gi[j]);
      const float* row = m.rows.data() + gi[j] * m.dim;
      if (exact) {
        const float want = integer_distance(decoded.data() + q * m.dim, row, m.dim, m.metric);
        if (bits_of(gd[j]) != bits_of(want))
          own = "rank " + std::to_string(j) + " id " + std::to_string(gi[j]) + ": distance " + std::to_string(gd[j]) +
                ", the exact integer is " + std::to_string(want);
      } else {
        const double want = true_distance(qv, row, m.metric);
        if (!(std::abs(want - gd[j]) <= tol))
          own = "rank " + std::to_string(j) + " id " + std::to_string(gi[j]) + ": distance " + std::to_string(gd[j]) +
                ", true " + std::to_string(want) + " (tolerance " + std::to_string(tol) + ")";
      }
      if (j > 0 && gi[j - 1] != -1 && better(gd[j], gd[j - 1])) own = "unsorted at rank " + std::to_string(j);
    }
    std::sort(seen.begin(), seen.end());
    if (own.empty() && std::adjacent_find(seen.begin(), seen.end()) != seen.end()) own = "an id returned twice";
    // 2. Against the CPU: excused only at a coarse near-tie.
    std::string diff;
    int64_t last = -1;  // the CPU's last non-padded rank
    for (int64_t j = 0; j < k && diff.empty(); ++j) {
      if ((gi[j] == -1) != (ci[j] == -1)) diff = "padding differs at rank " + std::to_string(j);
      else if (ci[j] != -1) {
        last = j;
        if (!(std::abs(double(gd[j]) - double(cd[j])) <= tol))
          diff = "rank " + std::to_string(j) + ": distance " + std::to_string(gd[j]) + " vs the CPU's " +
                 std::to_string(cd[j]);
      }
    }
    if (diff.empty() && last >= 0) {
      // Ids: every id clearly better than the k-th distance (by more than twice the rounding)
      // is in the other row too; nearer the k-th distance, tied ids may differ.
      const double kth = cd[last];
      auto clearly = [&](float d) { return better(double(d) + (larger ? -2 * tol : 2 * tol), kth); };
      std::vector<int64_t> gs(gi, gi + last + 1), cs(ci, ci + last + 1);
      std::sort(gs.begin(), gs.end());
      std::sort(cs.begin(), cs.end());
      for (int64_t j = 0; j <= last && diff.empty(); ++j) {
        if (clearly(cd[j]) && !std::binary_search(gs.begin(), gs.end(), ci[j]))
          diff = "the CPU's id " + std::to_string(ci[j]) + " (rank " + std::to_string(j) + ") is missing";
        else if (clearly(gd[j]) && !std::binary_search(cs.begin(), cs.end(), gi[j]))
          diff = "id " + std::to_string(gi[j]) + " (rank " + std::to_string(j) + ") is not in the CPU's row";
      }
    }
    ++tally.rows;
    if (!own.empty() || (!diff.empty() && !coarse_near_tie(m, qv, nprobe))) {
      if (bad++ == 0) first = "query " + std::to_string(q) + ": " + (own.empty() ? diff : own);
    } else if (!diff.empty()) {
      ++skipped;
    }
  }
  tally.skipped += skipped;
  EXPECT_EQ(bad, 0) << what << ": " << bad << " of " << nq << " rows wrong; first: " << first;
}

// The f32 and storage-type queries of a case, searched on both indexes and compared. The data
// depend on dim and data_seed.
inline void check_case(ivf_dtype t, int32_t metric, int64_t dim, int64_t n, int64_t nlist, int64_t nq,
                       const std::vector<int64_t>& ks, const std::vector<int64_t>& nprobes, Tally& tally,
                       uint64_t data_seed = 0) {
  const std::string what = std::string(type_name(t)) + " " + metric_name(metric) + " dim " + std::to_string(dim);
  SCOPED_TRACE(what);
  const uint64_t cs = 7 + static_cast<uint64_t>(dim) + 1000 * data_seed;
  const std::vector<float> x = data_for(t, n, dim, 2 * nlist, cs, cs + 93);
  const std::vector<float> qbase = data_for(t, nq, dim, 2 * nlist, cs, cs + 193);
  Twin tw;
  if (!make_twin(t, metric, dim, nlist, x, n, tw)) return;
  // f32 queries: reals (also against integer rows). Storage-type queries: the integers, or the
  // RNE rounding of the reals (decoded by the library exactly as `decode` does).
  const std::vector<float> qf = is_int(t) ? jittered(qbase, cs + 293) : qbase;
  const Bytes qs = encode(qbase, t);
  const std::vector<float> qs_decoded = decode(qs, t);
  for (int64_t nprobe : nprobes) {
    for (int64_t k : ks) {
      const std::string at = what + " nprobe " + std::to_string(nprobe) + " k " + std::to_string(k);
      {
        const Searched g = search_as(tw.gpu.get(), qf.data(), IVF_DTYPE_F32, nq, dim, k, nprobe);
        const Searched c = search_as(tw.cpu.get(), qf.data(), IVF_DTYPE_F32, nq, dim, k, nprobe);
        expect_same(tw.m, g, c, qf, nq, k, nprobe, false, tally, at + ", f32 queries");
      }
      if (t != IVF_DTYPE_F32) {
        const Searched g = search_as(tw.gpu.get(), qs.data(), t, nq, dim, k, nprobe);
        const Searched c = search_as(tw.cpu.get(), qs.data(), t, nq, dim, k, nprobe);
        expect_same(tw.m, g, c, qs_decoded, nq, k, nprobe, is_int(t), tally,
                    at + ", " + type_name(t) + " queries");
      }
    }
  }
}

inline void report(const Tally& t, const char* test) {
  std::printf("%s: %lld rows compared, %lld skipped as coarse near-ties\n", test, static_cast<long long>(t.rows),
              static_cast<long long>(t.skipped));
  // More than a few skips would mean the near-tie test no longer means anything.
  EXPECT_LE(t.skipped, std::max<int64_t>(5, t.rows / 50)) << test;
}

}  // namespace ivftest::typed
