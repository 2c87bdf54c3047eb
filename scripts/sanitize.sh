#!/usr/bin/env bash
# The CPU-only library and its C ABI tests under a sanitizer (no nvcc: the sanitizers see C and
# C++ only), in a build directory of its own:
#   scripts/sanitize.sh            # AddressSanitizer + UndefinedBehaviorSanitizer
#   scripts/sanitize.sh thread     # ThreadSanitizer (the tests run 5-20x slower)
# Arguments after the kind go to ctest (default: -R '^capi_'), e.g. -R capi_concurrency_test.
# Under ThreadSanitizer, scripts/tsan.supp hides OpenBLAS's worker threads, which synchronise
# through spin-waits the sanitizer cannot see (every race reported without it has an OpenBLAS
# thread on one side); OPENBLAS_NUM_THREADS=1 under the address sanitizer keeps its runs short.
set -euo pipefail
source "$(dirname "$0")/env.sh"
kind="${1:-address}"
[ $# -gt 0 ] && shift
case "$kind" in
  address) flags="-fsanitize=address,undefined;-fno-sanitize-recover=undefined;-fno-omit-frame-pointer"
           link="-fsanitize=address,undefined" ;;
  thread)  flags="-fsanitize=thread;-fno-omit-frame-pointer"; link="-fsanitize=thread" ;;
  *) echo "usage: $0 [address|thread] [ctest arguments]" >&2; exit 2 ;;
esac
dir="${IVFGPU_SANITIZE_BUILD_DIR:-$root/build-$kind}"
cmake -S "$root" -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DIVFGPU_CUDA=OFF -DIVFGPU_SANITIZE=ON \
  -DIVFGPU_SANITIZE_FLAGS="$flags" -DIVFGPU_SANITIZE_LINK_FLAGS="$link" -DIVFGPU_BUILD_EXAMPLES=OFF
cmake --build "$dir" -j "$jobs"
export TSAN_OPTIONS="suppressions=$root/scripts/tsan.supp halt_on_error=1 ${TSAN_OPTIONS:-}"
export UBSAN_OPTIONS="print_stacktrace=1 ${UBSAN_OPTIONS:-}"
[ "$kind" = address ] && export OPENBLAS_NUM_THREADS=1
cd "$dir"
if [ $# -eq 0 ]; then set -- -R '^capi_'; fi
ctest --output-on-failure --timeout 3600 "$@"
