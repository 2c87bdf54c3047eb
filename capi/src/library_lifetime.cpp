// What the library does when a process loads and unloads it. Plugin hosts dlopen and dlclose
// it many times; each cycle must leave nothing behind.
#include <dlfcn.h>

#include <initializer_list>

// The statically linked C++ runtime allocates an emergency exception-handling pool (~71 KiB)
// in a static constructor and never frees it: every dlopen/dlclose cycle would leak one pool.
// __gnu_cxx::__freeres() is libstdc++'s own hook for releasing it (the one valgrind calls).
namespace __gnu_cxx {
void __freeres() noexcept;
}

namespace {

#ifdef IVFGPU_HAVE_CUDA
// cuBLAS (a shared library: the toolkit ships no static one) carries its own static C++
// runtime, whose pools leak the same way each time it is loaded and unloaded with us, and the
// CUDA runtime does not support being torn down and brought back. So the first load pins
// cuBLAS (already mapped as our dependency: RTLD_NOLOAD finds it, RTLD_NODELETE keeps it) for
// the life of the process; later cycles reuse it instead of leaking.
__attribute__((constructor)) void pin_cuda_libraries() {
#define IVF_SONAME2(lib, major) lib ".so." #major
#define IVF_SONAME(lib, major) IVF_SONAME2(lib, major)
  for (const char* name : {IVF_SONAME("libcublas", IVFGPU_CUDA_MAJOR), IVF_SONAME("libcublasLt", IVFGPU_CUDA_MAJOR)}) {
    if (void* handle = dlopen(name, RTLD_NOW | RTLD_NOLOAD | RTLD_NODELETE)) dlclose(handle);
  }
}
#endif

__attribute__((destructor)) void release_cxx_runtime_pools() { __gnu_cxx::__freeres(); }

}  // namespace
