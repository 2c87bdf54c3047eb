// What the library does when a process loads and unloads it. Plugin hosts dlopen and dlclose
// it many times; each cycle must leave nothing behind.
// The statically linked C++ runtime allocates an emergency exception-handling pool (~71 KiB)
// in a static constructor and never frees it: every dlopen/dlclose cycle would leak one pool.
// __gnu_cxx::__freeres() is libstdc++'s own hook for releasing it (the one valgrind calls).
namespace __gnu_cxx {
void __freeres() noexcept;
}

namespace {

// cuBLAS is loaded at first GPU use and pinned there (core/cuda/cublas_loader.cpp): its static
// C++ runtime would leak pools on every unload, and the CUDA runtime does not support being torn
// down and brought back, so later dlopen/dlclose cycles reuse the first load.

__attribute__((destructor)) void release_cxx_runtime_pools() { __gnu_cxx::__freeres(); }

}  // namespace
