#!/usr/bin/env bash
# One call on a GPU machine: configure, build, GPU tests, sanitizers, benchmark. Logs go to
# $OUT (or ./device-out). Phases are chosen by arguments:
#   build test sanitize profile bench bench960 concurrency tier tiertest shards dtype prev ab ptxas
#   (tier reads TIER_N, TIER_DTYPE, TIER_PARTS, TIER_BUDGETS and ZIPF_BUDGETS)
#   bash bench/device_run.sh build test bench
# `prev` builds the tree in $PREV_SRC (default .prev: e.g. `git archive <commit> | tar -x -C .prev`)
# and `ab` runs its benchmark and this tree's interleaved, $AB_REPS times (median: bench/ab.py).
set -u -o pipefail
OUT=${OUT:-$PWD/device-out}
mkdir -p "$OUT"
B=${BUILD_DIR:-/tmp/ivfgpu-build}
DATA=${IVFGPU_DATA:-$PWD/../data}
has() { for p in "${@:2}"; do [ "$p" = "$1" ] && return 0; done; return 1; }
t0=$(date +%s)
stamp() { echo "[$(( $(date +%s) - t0 ))s] $*"; }
nvidia-smi --query-gpu=name,driver_version,memory.used,memory.total --format=csv,noheader
if has build "$@"; then
  stamp configure
  cmake -S . -B "$B" -G Ninja -DIVFGPU_CUDA=ON -DIVFGPU_BUILD_EXAMPLES=OFF -DCMAKE_BUILD_TYPE=Release \
    -DIVFGPU_DATA_DIR="$DATA" ${IVFGPU_XXHASH:+-DIVFGPU_XXHASH_INCLUDE_DIR=$IVFGPU_XXHASH} \
    ${IVFGPU_PREFIX:+-DCMAKE_PREFIX_PATH=$IVFGPU_PREFIX} > "$OUT/cmake.log" 2>&1 || { tail -40 "$OUT/cmake.log"; exit 1; }
  stamp build
  ninja -C "$B" -j16 > "$OUT/build.log" 2>&1 || { grep -E "error|Error" -A4 "$OUT/build.log" | head -80; exit 1; }
  stamp built
fi
if has test "$@"; then
  stamp ctest
  (cd "$B" && timeout 400 ctest -L gpu --output-on-failure --timeout 390) > "$OUT/ctest.log" 2>&1
  grep -E "tests passed|tests failed|Passed|Failed|Skipped|\*\*\*" "$OUT/ctest.log" | tail -15
  grep -E "FAILED|Failure|error|Expected|Which is|siftsmall|Value of|Actual" "$OUT/ctest.log" | head -60
  stamp ctest done
fi
if has sanitize "$@"; then
  F='Gpu/Dims.*/2:Gpu/Dims.*/8:GpuCorrectness.Pads*:GpuCorrectness.Identical*:GpuBehaviour.AddingInPieces*:GpuBehaviour.DeviceMemory*:GpuBehaviour.Training*'
  for tool in memcheck racecheck; do
    stamp "compute-sanitizer $tool"
    IVFGPU_DISABLE_MEMPOOL=1 timeout 150 compute-sanitizer --tool $tool --error-exitcode 9 \
      "$B/tests/gpu/gpu_backend_test" --gtest_filter="$F" > "$OUT/sanitizer_$tool.log" 2>&1
    echo "$tool exit $?"
    grep -E "ERROR SUMMARY|RACECHECK SUMMARY|PASSED|FAILED" "$OUT/sanitizer_$tool.log" | tail -4
  done
  # The ids, filters and the id map (memcheck; the stress tests are too slow under it).
  stamp "compute-sanitizer memcheck: ids, filters, id map, asynchronous searches"
  IVFGPU_DISABLE_MEMPOOL=1 timeout 200 compute-sanitizer --tool memcheck --error-exitcode 9 \
    "$B/tests/gpu/gpu_ids_test" --gtest_filter='GpuIds.*:GpuFilters.HugeSparse*' > "$OUT/sanitizer_ids.log" 2>&1
  echo "ids memcheck exit $?"; grep -E "ERROR SUMMARY|PASSED|FAILED" "$OUT/sanitizer_ids.log" | tail -3
  IVFGPU_DISABLE_MEMPOOL=1 timeout 120 compute-sanitizer --tool memcheck --error-exitcode 9 \
    "$B/tests/gpu/gpu_id_map_test" --gtest_filter='-*OutOfMemory*:*OutOfDeviceMemory*:*100M*' > "$OUT/sanitizer_idmap.log" 2>&1
  echo "id map memcheck exit $?"; grep -E "ERROR SUMMARY|PASSED|FAILED" "$OUT/sanitizer_idmap.log" | tail -3
  IVFGPU_DISABLE_MEMPOOL=1 timeout 120 compute-sanitizer --tool memcheck --error-exitcode 9 \
    "$B/tests/gpu/gpu_concurrency_test" --gtest_filter='GpuConcurrency.Asynchronous*:GpuMutationsEx.*' \
    > "$OUT/sanitizer_async.log" 2>&1
  echo "async memcheck exit $?"; grep -E "ERROR SUMMARY|PASSED|FAILED" "$OUT/sanitizer_async.log" | tail -3
fi
if has ptxas "$@"; then  # ptxas's performance-loss advice on the wgmma passes (no GPU needed)
  stamp ptxas
  JOBS=8 sh bench/ptxas_advisories.sh . "$OUT/ptxas" | tail -40
fi
if has profile "$@"; then
  stamp "ncu: per-kernel times and two kernels in detail, nq 10000 nprobe 64 k 10"
  args="--n 1000000 --dim 128 --nlist 1024 --nq 10000 --nprobe 64 --k 10 --batch 10000 --reps 1 --no-recall"
  timeout 120 ncu --metrics gpu__time_duration.sum --print-summary per-kernel "$B/bench/ivfgpu_bench" $args \
    > "$OUT/ncu_summary.log" 2>&1
  for kern in list_tile block_select; do
    timeout 120 ncu -k regex:$kern --launch-skip 1 --launch-count 1 --section SpeedOfLight --section Occupancy \
      --section LaunchStats --section WarpStateStats --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis \
      "$B/bench/ivfgpu_bench" $args > "$OUT/ncu_$kern.log" 2>&1
  done
  grep -A1 -E "list_tile|block_select" "$OUT/ncu_summary.log" | grep -E "Invocations|gpu__time" | head -12
fi
if has bench "$@"; then
  stamp bench 1M x 128
  timeout 300 "$B/bench/ivfgpu_bench" --n 1000000 --dim 128 --nlist 1024 --nq 10000 \
    --json "$OUT/bench_1M_128.json" 2>&1 | tee "$OUT/bench_1M_128.log" | grep -v "^  k" | tail -45
fi
if has bench960 "$@"; then
  stamp bench 1M x 960
  timeout 300 "$B/bench/ivfgpu_bench" --n 1000000 --dim 960 --nlist 1024 --nq 10000 --nprobe 1,16,64 \
    --batch 1,10000 --json "$OUT/bench_1M_960.json" 2>&1 | tee "$OUT/bench_1M_960.log" | grep -v "^  k" | tail -20
fi
if has concurrency "$@"; then
  stamp "concurrency: 32 searchers with and without one writer"
  for b in 1 100; do
    timeout 120 "$B/bench/concurrency_bench" --n 1000000 --dim 128 --nlist 1024 --nprobe 16 --batch $b \
      --threads 32 --seconds 6 --add-rows 10000 --json "$OUT/concurrency_b$b.json" 2>&1 | tee "$OUT/concurrency_b$b.log" | tail -9
  done
fi
if has ids "$@"; then
  stamp "id map lookups (1M and 100M keys)"
  timeout 300 "$B/bench/idmap_bench" > "$OUT/idmap_bench.log" 2>&1; echo "idmap_bench exit $?"
  tail -40 "$OUT/idmap_bench.log"
  stamp "filtered search and id mutations, 1M x 128"
  timeout 200 "$B/bench/filter_bench" --json "$OUT/filter_bench.json" 2>&1 | tee "$OUT/filter_bench.log" | tail -12
  stamp "32 searchers with adds, updates and removes"
  timeout 120 "$B/bench/concurrency_bench" --n 1000000 --dim 128 --nlist 1024 --nprobe 16 --batch 100 --threads 32 \
    --seconds 6 --add-rows 1000 --writer mixed --json "$OUT/concurrency_mixed.json" 2>&1 | tee "$OUT/concurrency_mixed.log" | tail -12
fi
if has tiertest "$@"; then
  stamp "host tier tests (and memcheck of the streaming path)"
  timeout 300 "$B/tests/gpu/gpu_host_tier_test" > "$OUT/tier_test.log" 2>&1; echo "host tier test exit $?"
  grep -E "OK \]|FAILED|Failure|budget .* bytes|hit rate" "$OUT/tier_test.log" | head -40
  IVFGPU_DISABLE_MEMPOOL=1 timeout 200 compute-sanitizer --tool memcheck --error-exitcode 9 \
    "$B/tests/gpu/gpu_host_tier_test" --gtest_filter='*Pieces*:*Open*:*FilteredSearch*' > "$OUT/sanitizer_tier.log" 2>&1
  echo "tier memcheck exit $?"; grep -E "ERROR SUMMARY|PASSED|FAILED" "$OUT/sanitizer_tier.log" | tail -3
fi
if has tier "$@"; then
  # Issue 13's benchmark: TIER_N x 128 (default 50M: 25.6 GB) stored as TIER_DTYPE (default f32;
  # u8 moves 4x fewer bytes), nlist 4096, 10,000 queries, an 8 GiB budget next to the
  # all-resident index ("main"); a Zipf(1.1) stream as the budget shrinks ("zipf"); opening a
  # saved 10M x 96 index into the host tier next to loading it onto the device ("open").
  # TIER_PARTS picks among them (default: all three).
  TN=${TIER_N:-50000000}
  TD=${TIER_DTYPE:-f32}
  TP=${TIER_PARTS:-main zipf open}
  if has main $TP; then
    for budget in ${TIER_BUDGETS:-8G 0}; do
      stamp "tier: $TN x 128 $TD nlist 4096 budget $budget"
      timeout 420 "$B/bench/ivfgpu_bench" --n $TN --dim 128 --dtype $TD --nlist 4096 --nq 10000 --nprobe 1,4,16 \
        --k 10 --batch 10000 --reps 3 --no-recall --add-batch 10000000 --device-budget $budget \
        --json "$OUT/tier_${TD}_${budget}.json" 2>&1 \
        | tee "$OUT/tier_${TD}_${budget}.log" | grep -vE "^  k" | tail -14
    done
  fi
  if has zipf $TP; then
    for budget in ${ZIPF_BUDGETS:-5G 2560M 1280M 512M}; do
      stamp "tier zipf 1.1: 10M x 128 nlist 4096 budget $budget"
      timeout 200 "$B/bench/ivfgpu_bench" --n 10000000 --dim 128 --nlist 4096 --nq 10000 --nprobe 16 --k 10 \
        --batch 10000 --reps 5 --no-recall --zipf 1.1 --device-budget $budget --json "$OUT/zipf_${budget}.json" 2>&1 \
        | tee "$OUT/zipf_${budget}.log" | grep -vE "^  k" | tail -6
    done
  fi
  if has open $TP; then
    stamp "tier open: 10M x 96 saved, loaded onto the device vs opened into the host tier"
    "$B/bench/load_bench" --phase save --n 10000000 --dim 96 --nlist 4096 --file /tmp/tier_open.ivf > "$OUT/open.log" 2>&1
    "$B/bench/load_bench" --phase load --n 10000000 --dim 96 --nlist 4096 --file /tmp/tier_open.ivf \
      --device-budget 1G >> "$OUT/open.log" 2>&1
    grep -E "load|open" "$OUT/open.log" | tail -6
  fi
fi
if has shards "$@"; then
  # Issue 15's benchmark (nvidia-h200-x2): 10M x 96, nlist 4096, nq 10,000, nprobe 64, k 10 on
  # 1 part, 2 parts split and 2 replicated (one per GPU; with one GPU they share it), host and
  # device memory, and 2 split parts on one GPU (CUDA_VISIBLE_DEVICES=0) for comparison.
  for run in "1 split host all" "2 split host all" "2 replicate host all" "2 split device all" \
             "2 replicate device all" "2 split host 0"; do
    set -- $run
    vis=""; [ "$4" = all ] || vis="CUDA_VISIBLE_DEVICES=$4"
    tag="$1_$2_$3${vis:+_gpu$4}"
    stamp "shards: $1 part(s), $2, $3 memory${vis:+, GPU $4 only}"
    env $vis timeout 300 "$B/bench/ivfgpu_bench" --n 10000000 --dim 96 --nlist 4096 --nq 10000 --nprobe 64 --k 10 \
      --batch 1,100,10000 --reps 3 --no-recall --devices $1 --shard-mode $2 --memory $3 --json "$OUT/shards_$tag.json" 2>&1 \
      | tee "$OUT/shards_$tag.log" | grep -E "^backend|^part|cross|merge:|^\| [0-9]|failed|error"
  done
fi
if has dtype "$@"; then
  # Compact storage types on CUDA: the storage types test (every type against the CPU, memory,
  # files, a budget, bigann10k), then 1M x 128, nlist 1024, nq 10,000, k 10, nprobe 16 and 64 for
  # each --dtype. All on the same data (--integer-data: integers in [0, 255], which f16 and bf16
  # hold exactly too), so the runs differ only in the element type; u8 once more with u8 queries.
  stamp "storage types test"
  timeout 400 "$B/tests/gpu/gpu_storage_types_test" > "$OUT/storage_types_test.log" 2>&1
  echo "storage types test exit $?"
  grep -E "OK \]|FAILED|Failure|skipped as coarse|bigann10k on CUDA|list bytes|SKIPPED" "$OUT/storage_types_test.log" | head -60
  for run in f32 f16 bf16 u8 u8:storage; do
    dt=${run%%:*}; qd=f32; [ "$run" = "$dt" ] || qd=${run#*:}
    stamp "dtype $dt (queries $qd): 1M x 128 nlist 1024"
    timeout 240 "$B/bench/ivfgpu_bench" --n 1000000 --dim 128 --nlist 1024 --nq 10000 --nprobe 16,64 --k 10 \
      --batch 1,10000 --reps 3 --integer-data --dtype $dt --query-dtype $qd --json "$OUT/dtype_${dt}_q$qd.json" 2>&1 \
      | tee "$OUT/dtype_${dt}_q$qd.log" | grep -E "^backend|failed|^\| [0-9]" | tail -6
  done
fi
if has load "$@"; then
  stamp "peak device memory of loading 1M x 128 (nvidia-smi every 10 ms)"
  "$B/bench/load_bench" --phase save > /dev/null || echo "save failed"
  peak_of() {  # peak MiB used on the device while "$@" runs
    nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -lms 10 > /tmp/mem.log 2>/dev/null &
    local smi=$!; sleep 0.5; "$@" >> "$OUT/load_bench.log" 2>&1; sleep 0.2; kill $smi 2>/dev/null; wait $smi 2>/dev/null
    awk 'NF { if ($1 + 0 > p) p = $1 + 0 } END { print p + 0 }' /tmp/mem.log
  }
  empty=$(peak_of "$B/bench/load_bench" --phase empty)
  loaded=$(peak_of "$B/bench/load_bench" --phase load)
  index=$(awk '/^index_mib/ { print $2 }' "$OUT/load_bench.log")
  grep "load end" "$OUT/load_bench.log"
  awk -v e="$empty" -v l="$loaded" -v i="$index" 'BEGIN { printf "load peak %d MiB, empty-index baseline %d MiB, index %.1f MiB: peak = %.3f x the index\n", l, e, i, (l - e) / i }'
fi
PB=/tmp/ivfgpu-prev-build
if has prev "$@"; then
  stamp "build previous tree ${PREV_SRC:-.prev}"
  cmake -S "${PREV_SRC:-.prev}" -B "$PB" -G Ninja -DIVFGPU_CUDA=ON -DIVFGPU_BUILD_EXAMPLES=OFF -DIVFGPU_BUILD_TESTS=OFF \
    -DCMAKE_BUILD_TYPE=Release ${IVFGPU_XXHASH:+-DIVFGPU_XXHASH_INCLUDE_DIR=$IVFGPU_XXHASH} > "$OUT/prev_cmake.log" 2>&1 &&
    ninja -C "$PB" -j16 ivfgpu_bench > "$OUT/prev_build.log" 2>&1 || { tail -30 "$OUT/prev_build.log"; exit 1; }
fi
if has ab "$@"; then
  stamp "A/B: previous vs this tree, interleaved, ${AB_REPS:-5} reps"
  args="--n 1000000 --dim 128 --nlist 1024 --nq 10000 --nprobe 1,16,64 --k 10 --batch 1,10000 --reps 1 --no-recall"
  for r in $(seq 1 ${AB_REPS:-5}); do
    timeout 120 "$PB/bench/ivfgpu_bench" $args --json "$OUT/ab_prev_$r.json" > /dev/null 2>&1 || echo "prev rep $r failed"
    timeout 120 "$B/bench/ivfgpu_bench" $args --json "$OUT/ab_new_$r.json" > /dev/null 2>&1 || echo "new rep $r failed"
  done
  python3 bench/ab.py "$OUT" | tee "$OUT/ab_summary.txt"
fi
stamp end
# Everything in one archive as well: the device tool brings back only a few files.
(cd "$OUT" && tar czf /tmp/logs.tgz --exclude=logs.tgz . && mv /tmp/logs.tgz "$OUT/logs.tgz")
