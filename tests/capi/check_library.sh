#!/bin/sh
# Checks the shared library's surface: only ivf_* symbols exported, the SONAME carries the ABI
# major, and no C++ runtime is needed at load time (it is linked in statically).
set -eu
lib="$1"; abi="$2"
extra=$(nm -D --defined-only "$lib" | awk '{print $3}' | grep -v '^ivf_' || true)
if [ -n "$extra" ]; then echo "FAIL: symbols exported besides ivf_*:"; echo "$extra" | head -20; exit 1; fi
count=$(nm -D --defined-only "$lib" | awk '{print $3}' | grep -c '^ivf_')
soname=$(readelf -d "$lib" | sed -n 's/.*SONAME.*\[\(.*\)\]/\1/p')
if [ "$soname" != "libivfgpu.so.$abi" ]; then echo "FAIL: SONAME is '$soname', want libivfgpu.so.$abi"; exit 1; fi
if readelf -d "$lib" | grep -E 'NEEDED.*(libstdc\+\+|libgcc_s|libcudart)'; then
  echo "FAIL: the library needs a C++ or CUDA runtime at load time"; exit 1; fi
echo "PASS: $count ivf_* symbols exported and nothing else; SONAME $soname; C++/CUDA runtimes static"
