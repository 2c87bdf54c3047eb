#!/usr/bin/env bash
# The main job: install what is missing, build, then index Fashion-MNIST and print
# nprobe -> recall@10 and QPS (GPU when usable, else CPU). Extra arguments go to the program,
# e.g. scripts/demo.sh --backend cpu --nlist 256.
set -euo pipefail
source "$(dirname "$0")/env.sh"
"$root/scripts/deps.sh"
configure_and_build
exec "$build/examples/fashion_mnist/fashion_mnist" "$@"
