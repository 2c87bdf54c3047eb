#!/usr/bin/env bash
# The whole test suite: install what is missing, build, run every CTest test (GPU tests run
# when a CUDA device is usable and are reported as skipped otherwise).
set -euo pipefail
source "$(dirname "$0")/env.sh"
"$root/scripts/deps.sh"
configure_and_build
cd "$build"
ctest --output-on-failure -j "$jobs" "$@"
