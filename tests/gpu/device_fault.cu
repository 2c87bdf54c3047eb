#include "device_fault.hpp"

#include <cstdint>

namespace ivftest {

namespace {

__global__ void write_to_nowhere(int* p) { *p = 1; }

}  // namespace

cudaError_t fault_the_device() {
  write_to_nowhere<<<1, 1>>>(reinterpret_cast<int*>(uintptr_t{0x10}));
  return cudaDeviceSynchronize();
}

}  // namespace ivftest
