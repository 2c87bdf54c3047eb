#!/usr/bin/env bash
# Installs the Debian/Ubuntu packages the build, the tests and the main job need, when missing.
# The CUDA toolkit is not an apt package here: it is used when nvcc is found (PATH or
# /usr/local/cuda), and the library builds CPU-only without it. cargo comes from rustup.
set -euo pipefail
if [ "${IVFGPU_SKIP_DEPS:-0}" = 1 ]; then exit 0; fi  # machines without a package registry
packages=(build-essential cmake ninja-build pkg-config gzip
          libopenblas-dev libgtest-dev googletest libbenchmark-dev libxxhash-dev
          libcli11-dev nlohmann-json3-dev gnuplot-nox jq
          dataset-fashion-mnist golang-go bindgen clang libclang-rt-dev
          python3 python3-venv python3-setuptools python3-numpy python3-pytest
          python3-dask python3-distributed)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then exit 0; fi
echo "installing: ${missing[*]}"
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
