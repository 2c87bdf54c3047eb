#!/bin/sh
# The library loads and serves on the CPU where the CUDA toolkit's libraries are missing: it
# must not need cuBLAS at load time, and with every directory holding libcublas hidden (an
# empty tmpfs mounted over it in a private mount namespace: the loader's cache would find the
# libraries whatever LD_LIBRARY_PATH says) the probe must pass.
#   no_cuda_libs.sh LIBRARY PROBE
set -eu
lib="$1"; probe="$2"
if readelf -d "$lib" | grep -q 'NEEDED.*cublas'; then
  echo "FAIL: $lib needs cuBLAS at load time"; readelf -d "$lib" | grep NEEDED; exit 1
fi
dirs=$( { ldconfig -p 2>/dev/null | awk '/libcublas/ {print $NF}'
          ls /usr/local/cuda*/lib64/libcublas* /usr/local/cuda*/targets/*/lib/libcublas* 2>/dev/null || true; } |
        while read -r f; do dirname "$(readlink -f "$f")"; done | sort -u)
if [ -z "$dirs" ]; then
  echo "no CUDA libraries on this machine: the probe runs as it is"
  exec "$probe"
fi
if ! unshare -m true 2>/dev/null; then
  echo "SKIPPED: mount namespaces are not allowed here (unshare -m), so the CUDA libraries cannot be hidden"
  exit 77
fi
echo "hiding: $(echo $dirs)"
exec unshare -m sh -c 'for d in $1; do mount -t tmpfs none "$d"; done; exec "$2"' sh "$dirs" "$probe"
