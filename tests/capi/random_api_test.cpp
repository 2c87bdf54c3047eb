// Random sequences of C calls with hostile arguments on the CPU backend (wrong dimensions, NULL
// pointers, NaN rows, garbage element bytes, -1 and INT64_MAX ids, k and nprobe out of range,
// truncated and damaged serialisations, unknown keys, progress callbacks that cancel or answer
// garbage codes; indexes in several parts or with dynamic batching). Every call must return a documented
// status (never IVF_ERR_INTERNAL), a failed mutation must leave the index as it was, and a
// successful search must be well formed: rows best first, padding only at the end with the
// metric's padding distance, every returned id held. Run under ASan/UBSan (IVFGPU_SANITIZE) it
// is also a memory-safety check; it found an overflow of sequential ids past INT64_MAX.
#include <gtest/gtest.h>
#include <ivfgpu/ivfgpu.h>

#include <stdexcept>
#include <string>
#include <thread>

#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "common/test_util.hpp"

thread_local std::mt19937_64 rng;
int64_t pick(int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); }
bool coin(double p = 0.5) { return std::uniform_real_distribution<double>(0, 1)(rng) < p; }

namespace {

// Per thread: the sequence generator and where a failure happened, with how the sequence's index
// was made (random_index: the calls' randomness also follows timing, such as progress reports and
// batching windows, so a seed alone may not reproduce a failure).
thread_local int iter = 0, op = 0;
thread_local std::string made;

// Keys set with values that may be refused on purpose: the status is not the point.
void ignore(ivf_status) {}

[[noreturn]] void fail_with(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
void fail_with(const char* fmt, ...) {
  char msg[512];
  va_list args;
  va_start(args, fmt);
  std::vsnprintf(msg, sizeof msg, fmt, args);
  va_end(args);
  throw std::runtime_error("sequence " + std::to_string(iter) + ", call " + std::to_string(op) + " (index " + made +
                           "): " + msg);
}
#define FAIL_CALL(...) fail_with(__VA_ARGS__)

void check_status(ivf_status s, const char* what) {
  if (s > 0 || s < -13 || s == IVF_ERR_INTERNAL) FAIL_CALL("%s: status %d (%s)", what, (int)s, ivf_last_error_message());
  if (s != IVF_OK && (ivf_last_error_message() == nullptr)) FAIL_CALL("%s: no message", what);
}

std::vector<float> data(int64_t n, int64_t dim, bool integer, bool poison) {
  std::vector<float> v(static_cast<std::size_t>(std::max<int64_t>(n * dim, 1)));
  for (auto& x : v) x = integer ? static_cast<float>(pick(0, 127)) : static_cast<float>(std::normal_distribution<double>(0, 1)(rng));
  if (poison && n * dim > 0) v[pick(0, n * dim - 1)] = coin() ? NAN : INFINITY;
  return v;
}

// What a sequence's index was made with.
struct Shape {
  int64_t dim = 0, nlist = 0;
  int32_t metric = 0;
  bool integer_storage = false;
};

// A progress callback that usually goes on and sometimes answers a cancel or a garbage code
// (every non-zero value cancels: the call fails with IVF_ERR_CANCELLED and changes nothing).
int32_t random_progress(ivf_progress_stage, double, void*) {
  if (!coin(0.02)) return 0;
  const int32_t answers[] = {1, -1, 42, std::numeric_limits<int32_t>::min()};
  return answers[pick(0, 3)];
}

// Parameters for one call: sometimes NULL, sometimes with the progress callback, a host
// memory kind, or (hostile on the CPU backend) device memory.
struct CallParams {
  ivf_params* p = nullptr;
  CallParams() {
    if (coin(0.5)) return;
    check_status(ivf_params_create(&p), "call params");
    if (coin(0.5)) check_status(ivf_params_set_progress(p, random_progress, nullptr), "progress");
    if (coin(0.05)) ignore(ivf_params_set_int(p, IVF_PARAM_MEMORY_KIND, pick(0, 2)));
  }
  ~CallParams() { ivf_params_free(p); }
  CallParams(const CallParams&) = delete;
  CallParams& operator=(const CallParams&) = delete;
};

const int32_t kTypes[] = {IVF_DTYPE_F32, IVF_DTYPE_F16, IVF_DTYPE_BF16, IVF_DTYPE_U8, IVF_DTYPE_I8};

// One random call on idx. concurrent: other threads call too, so the checks that compare with
// an earlier read of the index (ntotal, held ids) are left out.
void one_call(ivf_index* idx, const Shape& shape, bool concurrent) {
  const int64_t dim = shape.dim, nlist = shape.nlist;
  const int32_t metric = shape.metric;
  ivf_status s = IVF_OK;
  int64_t before = -1;
  check_status(ivf_ntotal(idx, &before), "ntotal");
  const int kind = static_cast<int>(pick(0, 11));
  const int64_t d = coin(0.05) ? dim + pick(-1, 1) : dim;
  const bool integer = shape.integer_storage ? !coin(0.1) : coin(0.3);
  const bool poison = coin(0.05);
  bool mutation = false;
  if (kind == 0) {  // train
    const int64_t n = coin(0.1) ? pick(0, nlist) : pick(nlist, nlist * 4 + 50);
    auto x = data(n, dim, integer, poison);
    CallParams cp;
    s = ivf_train_ex(idx, cp.p, x.data(), IVF_DTYPE_F32, n, d);
    check_status(s, "train");
    mutation = true;
  } else if (kind <= 3) {  // add
    const int64_t n = pick(0, 300);
    auto x = data(n, dim, integer, poison);
    std::vector<int64_t> ids(static_cast<std::size_t>(std::max<int64_t>(n, 1)));
    for (auto& v : ids) v = coin(0.02) ? -1 : (coin(0.05) ? std::numeric_limits<int64_t>::max() : pick(-1000, 1000));
    const int32_t t = coin(0.9) ? IVF_DTYPE_F32 : kTypes[pick(0, 4)];
    std::vector<unsigned char> raw;
    const void* src = x.data();
    if (t != IVF_DTYPE_F32) {  // hand over the bytes raw (garbage for the type is allowed)
      raw.resize(static_cast<std::size_t>(std::max<int64_t>(n * dim * 4, 1)));
      std::memcpy(raw.data(), x.data(), raw.size());
      src = raw.data();
    }
    CallParams cp;
    s = ivf_add_ex(idx, cp.p, coin(0.02) ? nullptr : src, t, n, d, coin(0.5) ? nullptr : ids.data());
    check_status(s, "add");
    mutation = true;
  } else if (kind <= 6) {  // search
    const int64_t n = coin(0.05) ? pick(-2, 0) : pick(1, 40);
    const int64_t k = coin(0.05) ? pick(-2, 0) : (coin(0.05) ? pick(1000, 5000) : pick(1, 50));
    auto q = data(std::max<int64_t>(n, 0), dim, integer, poison);
    ivf_params* sp = nullptr;
    check_status(ivf_params_create(&sp), "sp");
    if (coin(0.3)) check_status(ivf_params_set_progress(sp, random_progress, nullptr), "progress");
    if (coin(0.1)) ignore(ivf_params_set_int(sp, IVF_PARAM_BATCH_WINDOW_US, pick(-5, 300)));
    ignore(ivf_params_set_int(sp, IVF_PARAM_NPROBE, pick(-3, 60)));
    ivf_filter* f = nullptr;
    if (coin(0.2)) {
      std::vector<int64_t> fids(static_cast<std::size_t>(pick(0, 50)));
      for (auto& v : fids) v = pick(-5, 1000);
      check_status(ivf_filter_create(&f, fids.data(), static_cast<int64_t>(fids.size()), static_cast<ivf_filter_mode>(pick(0, 1))), "filter");
      if (f) ignore(ivf_params_set_ptr(sp, IVF_PARAM_FILTER, f));
    }
    const std::size_t cells = static_cast<std::size_t>(std::max<int64_t>(n, 0) * std::max<int64_t>(k, 0));
    std::vector<int64_t> ids(std::max<std::size_t>(cells, 1));
    std::vector<float> dist(std::max<std::size_t>(cells, 1));
    s = ivf_search(idx, coin(0.2) ? nullptr : sp, q.data(), IVF_DTYPE_F32, n, d, k, coin(0.02) ? nullptr : ids.data(), dist.data());
    check_status(s, "search");
    if (s == IVF_OK) {
      const bool larger = metric != IVF_METRIC_L2;
      for (int64_t i = 0; i < n; ++i) {
        bool padded = false;
        for (int64_t j = 0; j < k; ++j) {
          const int64_t id = ids[i * k + j];
          const float dv = dist[i * k + j];
          if (id == -1) {
            if (dv != (larger ? -INFINITY : INFINITY))
              FAIL_CALL("padding distance %g (n %lld, k %lld, row %lld, position %lld, ntotal %lld)", dv, (long long)n,
                        (long long)k, (long long)i, (long long)j, (long long)before);
            padded = true;
            continue;
          }
          if (padded) FAIL_CALL("a result after padding");
          if (std::isnan(dv)) FAIL_CALL("NaN distance (dim %lld nlist %lld metric %d, query row %lld, k %lld, position %lld, id %lld)", (long long)dim, (long long)nlist, (int)metric, (long long)i, (long long)k, (long long)j, (long long)id);
          if (j > 0 && ids[i * k + j - 1] != -1) {
            const float prev = dist[i * k + j - 1];
            if (larger ? dv > prev : dv < prev) FAIL_CALL("unsorted row %lld: %g then %g", (long long)i, prev, dv);
          }
          int64_t c = 0;
          check_status(ivf_count_ids(idx, &id, 1, &c), "count");
          if (!concurrent && c < 1) FAIL_CALL("result id %lld not held", (long long)id);
        }
      }
    }
    ivf_params_free(sp);
    ivf_filter_free(f);
  } else if (kind == 7) {  // remove
    std::vector<int64_t> ids(static_cast<std::size_t>(pick(0, 100)));
    for (auto& v : ids) v = pick(-10, 1000);
    int64_t removed = -1;
    s = ivf_remove(idx, nullptr, ids.empty() && coin(0.5) ? nullptr : ids.data(), static_cast<int64_t>(ids.size()), &removed);
    check_status(s, "remove");
    int64_t after = 0;
    check_status(ivf_ntotal(idx, &after), "ntotal");
    if (!concurrent && s == IVF_OK && after != before - removed) FAIL_CALL("remove: %lld - %lld != %lld", (long long)before, (long long)removed, (long long)after);
    return;
  } else if (kind == 8) {  // update
    const int64_t n = pick(0, 50);
    auto x = data(n, dim, integer, poison);
    std::vector<int64_t> ids(static_cast<std::size_t>(std::max<int64_t>(n, 1)));
    for (auto& v : ids) v = pick(-1, 200);
    s = ivf_update(idx, nullptr, x.data(), IVF_DTYPE_F32, n, d, ids.data());
    check_status(s, "update");
    mutation = true;
  } else if (kind == 9) {  // get
    const int64_t n = pick(0, 20);
    std::vector<int64_t> ids(static_cast<std::size_t>(std::max<int64_t>(n, 1)));
    for (auto& v : ids) v = pick(-5, 300);
    std::vector<float> out(static_cast<std::size_t>(std::max<int64_t>(n * dim, 1)));
    std::vector<uint8_t> found(static_cast<std::size_t>(std::max<int64_t>(n, 1)));
    s = ivf_get(idx, nullptr, ids.data(), n, out.data(), IVF_DTYPE_F32, d, found.data());
    check_status(s, "get");
  } else if (kind == 10) {  // serialize round trip, sometimes damaged
    size_t need = 0;
    s = ivf_serialize(idx, nullptr, 0, &need);
    check_status(s, "serialize size");
    if (need > 0 && need < (size_t{64} << 20)) {
      std::vector<unsigned char> buf(need);
      size_t wrote = 0;
      s = ivf_serialize(idx, buf.data(), buf.size(), &wrote);
      check_status(s, "serialize");
      if (s == IVF_OK) {
        size_t size = wrote;
        if (coin(0.3)) size = static_cast<size_t>(pick(0, static_cast<int64_t>(wrote)));
        if (coin(0.3) && size > 0) buf[static_cast<size_t>(pick(0, static_cast<int64_t>(size) - 1))] ^= static_cast<unsigned char>(pick(1, 255));
        ivf_index* other = nullptr;
        CallParams cp;
        s = ivf_deserialize(buf.data(), size, cp.p, &other);
        check_status(s, "deserialize");
        if (s == IVF_OK) {
          int64_t nt = -1;
          check_status(ivf_ntotal(other, &nt), "ntotal other");
        } else if (other != nullptr) {
          FAIL_CALL("deserialize failed but set *out");
        }
        ivf_free(other);
      }
    }
    return;
  } else {  // reset or info
    if (coin(0.2)) {
      s = ivf_reset(idx);
      check_status(s, "reset");
      return;
    }
    int64_t v = 0;
    check_status(ivf_index_info(idx, static_cast<ivf_info_key>(pick(-3, 40)), &v), "info");
    return;
  }
  const std::string why = s != IVF_OK ? ivf_last_error_message() : "";  // before the next call resets it
  int64_t after = -1;
  check_status(ivf_ntotal(idx, &after), "ntotal");
  if (!concurrent && mutation && s != IVF_OK && after != before)
    FAIL_CALL("failed mutation (%d: %s) changed ntotal %lld -> %lld", (int)s, why.c_str(), (long long)before,
              (long long)after);
}

// Makes an index of a random shape; nullptr when creation was (rightly) refused.
ivf_index* random_index(Shape& shape) {
  const int64_t dims[] = {1, 2, 3, 7, 16, 33, 130};
  shape.dim = dims[pick(0, 6)];
  shape.nlist = coin(0.2) ? 1 : pick(1, 40);
  shape.metric = static_cast<int32_t>(pick(0, 2));
  const int32_t storage = kTypes[pick(0, 4)];
  shape.integer_storage = storage == IVF_DTYPE_U8 || storage == IVF_DTYPE_I8;
  ivf_params* p = nullptr;
  check_status(ivf_params_create(&p), "params");
  ignore(ivf_params_set_int(p, IVF_PARAM_NLIST, shape.nlist));
  ignore(ivf_params_set_int(p, IVF_PARAM_METRIC, shape.metric));
  ignore(ivf_params_set_int(p, IVF_PARAM_STORAGE_TYPE, storage));
  ignore(ivf_params_set_int(p, IVF_PARAM_BACKEND, IVF_BACKEND_CPU));
  ignore(ivf_params_set_int(p, IVF_PARAM_UNIQUE_IDS, coin(0.3)));
  ignore(ivf_params_set_int(p, IVF_PARAM_KMEANS_ITERS, pick(1, 5)));
  std::string extras;  // for `made`
  if (coin(0.2)) {
    const int64_t shards = pick(1, 3), mode = pick(0, 1);
    ignore(ivf_params_set_int(p, IVF_PARAM_SHARDS, shards));
    ignore(ivf_params_set_int(p, IVF_PARAM_SHARD_MODE, mode));
    extras += " shards " + std::to_string(shards) + " mode " + std::to_string(mode);
  }
  if (coin(0.2)) {
    ignore(ivf_params_set_int(p, IVF_PARAM_DYNAMIC_BATCHING, 1));
    extras += " dynamic batching";
  }
  if (coin(0.1)) {
    const int64_t key = pick(-5, 200), value = pick(-10, 10);
    check_status(ivf_params_set_int(p, static_cast<ivf_param_key>(key), value), "set junk");
    extras += " key " + std::to_string(key) + " = " + std::to_string(value);
  }
  ivf_index* idx = nullptr;
  const ivf_status s = ivf_create(&idx, coin(0.05) ? pick(-3, 0) : shape.dim, p);
  check_status(s, "create");
  ivf_params_free(p);
  if (s != IVF_OK) return nullptr;
  // The junk key above may have been a real one (the metric, nlist or storage type, with a value
  // the library accepts): the checks go by what the index is, read back.
  int64_t metric = -1, nlist = -1, type = -1;
  check_status(ivf_index_info(idx, IVF_INFO_METRIC, &metric), "info metric");
  check_status(ivf_index_info(idx, IVF_INFO_NLIST, &nlist), "info nlist");
  check_status(ivf_index_info(idx, IVF_INFO_STORAGE_TYPE, &type), "info storage type");
  shape.metric = static_cast<int32_t>(metric);
  shape.nlist = nlist;
  shape.integer_storage = type == IVF_DTYPE_U8 || type == IVF_DTYPE_I8;
  made = "dim " + std::to_string(shape.dim) + " nlist " + std::to_string(nlist) + " metric " + std::to_string(metric) +
         " storage " + std::to_string(type) + extras;
  return idx;
}

void run_sequences(int iters, uint64_t seed) {
  rng.seed(seed);
  for (iter = 0; iter < iters; ++iter) {
    op = 0;
    Shape shape;
    ivf_index* idx = random_index(shape);
    if (idx == nullptr) continue;
    for (op = 0; op < 40; ++op) one_call(idx, shape, false);
    ivf_free(idx);
  }
}

}  // namespace

TEST(RandomApi, HostileCallSequencesKeepTheContract) {
  const auto [first, count] = ivftest::soak_seeds(4);
  for (uint64_t seed = first; seed < first + count; ++seed) {
    try {
      run_sequences(120, seed);
    } catch (const std::exception& e) {
      FAIL() << "seed " << seed << ", " << e.what();
    }
  }
}

// Eight threads make random calls on one index at once (mutations serialise, searches read one
// published state each): no crash, no undocumented status, every search well formed.
TEST(RandomApi, ConcurrentHostileCallsOnOneIndex) {
  const auto [first, count] = ivftest::soak_seeds(6);
  for (uint64_t seed = first; seed < first + count; ++seed) {
    rng.seed(1000 + seed);
    Shape shape;
    ivf_index* idx = nullptr;
    while (idx == nullptr) idx = random_index(shape);
    std::vector<std::string> errors(8);
    std::vector<std::thread> threads;
    for (int t = 0; t < 8; ++t)
      threads.emplace_back([&, t] {
        rng.seed(seed * 100 + static_cast<uint64_t>(t));
        iter = static_cast<int>(seed);
        try {
          for (op = 0; op < 60; ++op) one_call(idx, shape, true);
        } catch (const std::exception& e) {
          errors[static_cast<std::size_t>(t)] = e.what();
        }
      });
    for (auto& th : threads) th.join();
    ivf_free(idx);
    for (int t = 0; t < 8; ++t) EXPECT_EQ(errors[static_cast<std::size_t>(t)], "") << "seed " << seed << ", thread " << t;
  }
}
