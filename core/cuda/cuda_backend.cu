// The CUDA backend: owns the device copy of the index and runs every operation under one
// failure policy. Out-of-memory and ordinary CUDA errors leave the index as it was; the first
// sticky error marks the backend lost, and every later call fails with Errc::DeviceLost.
#include "cuda_backend.hpp"

#include <atomic>
#include <new>
#include <string>
#include <utility>
#include <vector>

#include "../errors.hpp"
#include "assign.hpp"
#include "check.hpp"
#include "device_buffer.hpp"
#include "device_context.hpp"
#include "kmeans.hpp"
#include "list_store.hpp"
#include "search.hpp"

namespace ivfgpu::cuda {

int usable_device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return n;
}

namespace {

class CudaBackend final : public Backend {
 public:
  CudaBackend(int64_t dim, const BuildParams& params)
      : params_(params), dim_(dim), ctx_(static_cast<int>(params.device)) {
    DeviceGuard guard(ctx_.device());
    IVF_CUDA_CHECK(cudaStreamCreateWithFlags(&main_, cudaStreamNonBlocking));
    try {
      lists_ = make_empty_store(ctx_, main_, dim_, params_.nlist);
    } catch (...) {
      (void)cudaStreamDestroy(main_);
      throw;
    }
  }

  ~CudaBackend() override {
    (void)cudaSetDevice(ctx_.device());
    (void)cudaDeviceSynchronize();  // searches on callers' streams may still read the lists
    lists_ = ListStore{};
    centroids_.reset();
    norms_.reset();
    (void)cudaStreamSynchronize(main_);
    (void)cudaStreamDestroy(main_);
  }

  void train(const float* x, int64_t n) override {
    guarded([&] {
      std::vector<float> centroids(static_cast<std::size_t>(params_.nlist * dim_));
      DeviceContext::Lease lease(ctx_, main_);
      kmeans_train(ctx_, main_, lease.blas(), x, n, dim_, params_.nlist, params_.metric, params_.kmeans_iters,
                   static_cast<uint64_t>(params_.seed), centroids.data());
      set_centroids(std::move(centroids));
    });
  }

  void add(const float* x, const int64_t* ids, int64_t n) override {
    guarded([&] {
      if (n == 0) return;
      IVF_CUDA_CHECK(cudaDeviceSynchronize());
      DeviceContext::Lease lease(ctx_, main_);
      DeviceBuffer<float> d_x(ctx_, static_cast<std::size_t>(n * dim_), main_);
      DeviceBuffer<int64_t> d_ids(ctx_, static_cast<std::size_t>(n), main_);
      DeviceBuffer<int32_t> assign(ctx_, static_cast<std::size_t>(n), main_);
      IVF_CUDA_CHECK(cudaMemcpyAsync(d_x.data(), x, d_x.bytes(), cudaMemcpyHostToDevice, main_));
      IVF_CUDA_CHECK(cudaMemcpyAsync(d_ids.data(), ids, d_ids.bytes(), cudaMemcpyHostToDevice, main_));
      assign_nearest(ctx_, main_, lease.blas(), d_x.data(), n, dim_, centroids_.data(), norms_.data(),
                     params_.nlist, params_.metric, assign.data());
      store_append(ctx_, main_, lists_, d_x.data(), d_ids.data(), assign.data(), n);
    });
  }

  void reset() override {
    guarded([&] {
      IVF_CUDA_CHECK(cudaDeviceSynchronize());
      ListStore empty = make_empty_store(ctx_, main_, dim_, params_.nlist);
      lists_ = std::move(empty);
      IVF_CUDA_CHECK(cudaStreamSynchronize(main_));
    });
  }

  void search(const SearchRequest& req) const override {
    guarded([&] {
      SearchIndexView view;
      view.dim = dim_;
      view.nlist = params_.nlist;
      view.metric = params_.metric;
      view.centroids = centroids_.data();
      view.centroid_norms = norms_.data();
      view.lists = &lists_;
      run_search(ctx_, view, req);
    });
  }

  int64_t ntotal() const override { return lists_.ntotal; }
  bool is_trained() const override { return trained_; }

  BackendInfo info() const override {
    BackendInfo info;
    info.kind = BackendKind::Cuda;
    info.device = ctx_.device();
    info.device_memory_bytes = lists_.device_bytes() + centroids_.bytes() + norms_.bytes();
    info.host_memory_bytes = (host_centroids_.size() + host_norms_.size()) * sizeof(float) +
                             (lists_.start.size() + lists_.size.size() + lists_.cap.size() +
                              lists_.largest_prefix.size()) * sizeof(int64_t);
    return info;
  }

  HostModel snapshot() const override {
    HostModel m = HostModel::empty(dim_, params_.metric, params_.nlist);
    guarded([&] {
      m.trained = trained_;
      if (trained_) {
        m.centroids = host_centroids_;
        m.centroid_norms = host_norms_;
      }
      store_to_model(main_, lists_, m);
    });
    return m;
  }

  void restore(HostModel model) override {
    guarded([&] {
      IVF_CUDA_CHECK(cudaDeviceSynchronize());
      // Build the whole new state aside, then swap.
      DeviceBuffer<float> c, nrm;
      if (model.trained) {
        c = upload(model.centroids);
        nrm = upload(model.centroid_norms);
      }
      ListStore store = store_from_model(ctx_, main_, model);
      IVF_CUDA_CHECK(cudaStreamSynchronize(main_));
      centroids_ = std::move(c);
      norms_ = std::move(nrm);
      host_centroids_ = model.centroids;
      host_norms_ = model.centroid_norms;
      lists_ = std::move(store);
      trained_ = model.trained;
    });
  }

 private:
  template <typename F>
  void guarded(F&& f) const {
    if (lost_.load()) fail(Errc::DeviceLost, "the CUDA device of this index was lost after an earlier error");
    try {
      DeviceGuard guard(ctx_.device());
      f();
    } catch (const Error& e) {
      if (e.code() == Errc::DeviceLost) lost_.store(true);
      throw;
    }
  }

  DeviceBuffer<float> upload(const std::vector<float>& v) {
    DeviceBuffer<float> b(ctx_, v.size(), main_);
    IVF_CUDA_CHECK(cudaMemcpyAsync(b.data(), v.data(), b.bytes(), cudaMemcpyHostToDevice, main_));
    return b;
  }

  void set_centroids(std::vector<float> centroids) {
    HostModel tmp = HostModel::empty(dim_, params_.metric, params_.nlist);
    tmp.centroids = std::move(centroids);
    tmp.compute_centroid_norms();
    DeviceBuffer<float> c = upload(tmp.centroids);
    DeviceBuffer<float> nrm = upload(tmp.centroid_norms);
    IVF_CUDA_CHECK(cudaStreamSynchronize(main_));
    IVF_CUDA_CHECK(cudaDeviceSynchronize());
    centroids_ = std::move(c);
    norms_ = std::move(nrm);
    host_centroids_ = std::move(tmp.centroids);
    host_norms_ = std::move(tmp.centroid_norms);
    trained_ = true;
  }

  BuildParams params_;
  int64_t dim_;
  DeviceContext ctx_;
  cudaStream_t main_ = nullptr;  // mutations and snapshots
  ListStore lists_;
  DeviceBuffer<float> centroids_, norms_;
  std::vector<float> host_centroids_, host_norms_;
  bool trained_ = false;
  mutable std::atomic<bool> lost_{false};
};

}  // namespace

std::unique_ptr<Backend> make_cuda_backend(int64_t dim, const BuildParams& params) {
  return std::make_unique<CudaBackend>(dim, params);
}

}  // namespace ivfgpu::cuda
