// Returns what the statically linked C++ runtime keeps for the life of the process, when the
// library is unloaded. libstdc++ allocates an emergency exception-handling pool (~71 KiB) in
// a static constructor and never frees it: with the runtime linked into this .so, every
// dlopen/dlclose cycle of a plugin host would leak one pool. __gnu_cxx::__freeres() is
// libstdc++'s own hook for releasing it (the one valgrind calls).
namespace __gnu_cxx {
void __freeres() noexcept;
}

namespace {
__attribute__((destructor)) void release_cxx_runtime_pools() { __gnu_cxx::__freeres(); }
}  // namespace
