#!/bin/sh
# ptxas's advice on the wgmma passes, without a GPU: compiles each scan_tiles_*.cu for sm_90a
# with -Xptxas -v and fails if ptxas reports a "Potential Performance Loss" (C75xx: e.g. C7520,
# wgmma instructions serialized, a wait after every one, which cost the resident pass 3-9% until
# session 53: bench/RESULTS.md). Prints the wgmma builds' registers and spills.
#   bench/ptxas_advisories.sh [SOURCE_DIR] [SCRATCH]    (NVCC: the compiler, default nvcc on PATH
#   or /usr/local/cuda/bin/nvcc; JOBS: files compiled at once, default 2)
set -u
src="${1:-.}"; work="${2:-/tmp/ivfgpu-ptxas}"
nvcc="${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}"
jobs="${JOBS:-2}"
rm -rf "$work"; mkdir -p "$work"
flags="-std=c++17 -O3 -lineinfo --expt-relaxed-constexpr -gencode arch=compute_90a,code=sm_90a -DIVFGPU_CUDA_SM90A"
n=0
for f in "$src"/core/cuda/scan_tiles_*.cu; do
  name=$(basename "$f" .cu)
  "$nvcc" $flags -Xptxas -v -I"$src" -I"$src/core" -c "$f" -o "$work/$name.o" > "$work/$name.log" 2>&1 &
  n=$((n + 1))
  [ $((n % jobs)) -eq 0 ] && wait
done
wait
failures=0
for log in "$work"/*.log; do
  name=$(basename "$log" .log)
  if grep -q -E "error" "$log"; then
    echo "FAIL: $name does not compile"; grep -E "error" "$log" | head -5; failures=$((failures + 1)); continue
  fi
  loss=$(grep -c "Potential Performance Loss" "$log")
  [ "$loss" -gt 0 ] && { echo "FAIL: $name: $loss performance-loss advisories"; failures=$((failures + 1)); }
  grep "Potential Performance Loss" "$log" | sed -E 's/ in (the )?function.*//' | sort | uniq -c | head -5
  # The passes' wgmma builds (template flag WG last: "Lb1EEEv"; list_pair_tile_kernel and
  # list_tf32_ring_kernel have only wgmma builds), one line each: registers, spills.
  awk -v file="$name" '
    /Compiling entry function/ { fn = $0; sub(/.*function ./, "", fn); sub(/. for .*/, "", fn) }
    !((fn ~ /Lb1EEEv/ && fn ~ /list_(resident|imma|mma)_kernel/) || fn ~ /list_(pair_tile|tf32_ring)_kernel/) { next }
    /Used [0-9]+ registers/ { for (i = 1; i <= NF; i++) if ($i == "Used") regs[fn] = $(i + 1) }
    /bytes spill stores/ { for (i = 2; i <= NF; i++) if ($i == "spill" && $(i + 1) == "stores,") s[fn] = $(i - 2) }
    END { for (k in regs) printf "  %s %s: %s registers, %s bytes spilled\n", file, k, regs[k], (k in s ? s[k] : "?") }
  ' "$log" | { command -v c++filt > /dev/null && c++filt || cat; } |
    sed -E 's/\(ivfgpu::[^)]*\)//; s/ivfgpu::(cuda::scan_detail::)?//g' | sort
done
[ "$failures" -eq 0 ] && echo "ptxas advisories: none" || exit 1
