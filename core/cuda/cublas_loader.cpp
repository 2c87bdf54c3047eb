#include "cublas_loader.hpp"

#include <dlfcn.h>

#include <mutex>

#include "../errors.hpp"

namespace ivfgpu::cuda::blas {

namespace {

#define IVF_STR2(x) #x
#define IVF_STR(x) IVF_STR2(x)
// The SONAME carries the toolkit's major version (the one the headers came from).
constexpr const char* kLibrary = "libcublas.so." IVF_STR(CUBLAS_VER_MAJOR);

struct Api {
  cublasStatus_t (*create)(cublasHandle_t*) = nullptr;
  cublasStatus_t (*destroy)(cublasHandle_t) = nullptr;
  cublasStatus_t (*set_stream)(cublasHandle_t, cudaStream_t) = nullptr;
  cublasStatus_t (*set_math_mode)(cublasHandle_t, cublasMath_t) = nullptr;
  cublasStatus_t (*set_workspace)(cublasHandle_t, void*, size_t) = nullptr;
  cublasStatus_t (*sgemm)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int, const float*,
                          const float*, int, const float*, int, const float*, float*, int) = nullptr;
  const char* (*status_name)(cublasStatus_t) = nullptr;
  std::string error;  // empty when loaded
};

template <class F>
bool resolve(void* lib, const char* name, F& fn, std::string& error) {
  fn = reinterpret_cast<F>(dlsym(lib, name));
  if (fn == nullptr && error.empty()) error = std::string(kLibrary) + " has no symbol " + name;
  return fn != nullptr;
}

const Api& api() {
  static Api a;
  static std::once_flag once;
  std::call_once(once, [] {
    void* lib = dlopen(kLibrary, RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
    if (lib == nullptr) {
      const char* why = dlerror();
      a.error = std::string(kLibrary) + " could not be loaded (" + (why ? why : "unknown reason") +
                "): the CUDA backend needs the CUDA toolkit's cuBLAS; the CPU backend works without it";
      return;
    }
    // The _v2 names are what cublas_v2.h maps the plain names to.
    resolve(lib, "cublasCreate_v2", a.create, a.error);
    resolve(lib, "cublasDestroy_v2", a.destroy, a.error);
    resolve(lib, "cublasSetStream_v2", a.set_stream, a.error);
    resolve(lib, "cublasSetMathMode", a.set_math_mode, a.error);
    resolve(lib, "cublasSetWorkspace_v2", a.set_workspace, a.error);
    resolve(lib, "cublasSgemm_v2", a.sgemm, a.error);
    resolve(lib, "cublasGetStatusName", a.status_name, a.error);
  });
  return a;
}

const Api& loaded() {
  const Api& a = api();
  if (!a.error.empty()) fail(Errc::Unsupported, a.error);
  return a;
}

}  // namespace

bool available(std::string* why) {
  const Api& a = api();
  if (why) *why = a.error;
  return a.error.empty();
}

cublasStatus_t create(cublasHandle_t* handle) { return loaded().create(handle); }

cublasStatus_t destroy(cublasHandle_t handle) noexcept {
  const Api& a = api();
  return a.destroy ? a.destroy(handle) : CUBLAS_STATUS_NOT_INITIALIZED;
}

cublasStatus_t set_stream(cublasHandle_t handle, cudaStream_t stream) { return loaded().set_stream(handle, stream); }

cublasStatus_t set_math_mode(cublasHandle_t handle, cublasMath_t mode) { return loaded().set_math_mode(handle, mode); }
cublasStatus_t set_workspace(cublasHandle_t handle, void* workspace, std::size_t bytes) {
  return loaded().set_workspace(handle, workspace, bytes);
}

cublasStatus_t sgemm(cublasHandle_t handle, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                     const float* alpha, const float* a, int lda, const float* b, int ldb, const float* beta, float* c,
                     int ldc) {
  return loaded().sgemm(handle, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

const char* status_name(cublasStatus_t status) noexcept {
  const Api& a = api();
  return a.status_name ? a.status_name(status) : "cuBLAS status (library not loaded)";
}

}  // namespace ivfgpu::cuda::blas
