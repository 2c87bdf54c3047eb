#!/usr/bin/env bash
# The whole test suite: install what is missing, build, run every CTest test (GPU tests run
# when a CUDA device is usable and are reported as skipped otherwise). The Python bindings'
# test (python_pytest) makes a venv in the build tree with `/usr/bin/python3 -m venv
# --system-site-packages`, installs bindings/python into it with `pip install
# --no-build-isolation` (offline) and runs pytest there.
set -euo pipefail
source "$(dirname "$0")/env.sh"
"$root/scripts/deps.sh"
configure_and_build
cd "$build"
rc=0
ctest --output-on-failure -j "$jobs" "$@" || rc=$?
# What was skipped and why. IVFGPU_STRICT_SKIPS=1 (CI): anything skipped but the GPU tests fails.
strict=""
[ "${IVFGPU_STRICT_SKIPS:-0}" = 1 ] && strict=--strict
sh "$root/scripts/skip_report.sh" "$build" $strict || rc=1
exit "$rc"
