#!/bin/sh
# The main job's command line as a newcomer meets it, on the small TEXMEX files of
# ../shared/data (siftsmall .fvecs, bigann10k .bvecs, their .ivecs ground truth):
#   check_demo.sh PROGRAM DATA_DIR SCRATCH
# Exit 77 (reported by CTest as skipped) when the data is absent.
set -u
prog="$1"; data="${IVFGPU_DATA_DIR:-$2}"; work="$3"
sift="$data/siftsmall"; bigann="$data/bigann10k"
if [ ! -f "$sift/siftsmall_base.fvecs" ] || [ ! -f "$bigann/bigann10k_base.bvecs" ]; then
  echo "SKIPPED: siftsmall/ or bigann10k/ not found under $data (set IVFGPU_DATA_DIR; see ../shared/data/README.md)"
  exit 77
fi
rm -rf "$work"; mkdir -p "$work"
# The exact-neighbour cache lives beside the program: run a copy of it in the scratch folder.
cp "$prog" "$work/fashion_mnist"; prog="$work/fashion_mnist"
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
# run NAME ARGS...: runs the program, stdout in $work/NAME.out, stderr in $work/NAME.err, status in $rc.
run() {
  name="$1"; shift
  "$prog" "$@" > "$work/$name.out" 2> "$work/$name.err"; rc=$?
}
expect_usage_error() {  # NAME WORDS-IN-MESSAGE ARGS...
  name="$1"; words="$2"; shift 2
  run "$name" "$@"
  [ "$rc" -eq 2 ] || fail "$name: exit $rc, not 2 (args: $*)"
  grep -q -- "$words" "$work/$name.err" || fail "$name: stderr does not name '$words': $(cat "$work/$name.err")"
  grep -q "Usage: fashion_mnist" "$work/$name.err" || fail "$name: no usage line on stderr"
  [ ! -s "$work/$name.out" ] || fail "$name: printed to stdout: $(cat "$work/$name.out")"
}
small="--base $sift/siftsmall_base.fvecs --query $sift/siftsmall_query.fvecs --nlist 32"
caches() { ls "$work" | grep -c '^fashion_mnist\.exact-' ; }

run help --help
[ "$rc" -eq 0 ] || fail "--help exits $rc"
for opt in --base --query --groundtruth --nq --queries --nlist --k --nprobe --backend --dir; do
  grep -q -- "$opt" "$work/help.out" || fail "--help does not list $opt"
done

expect_usage_error unknown "--bogus" --bogus
expect_usage_error missing_value "--k" $small --k
expect_usage_error nq_zero "--nq" $small --queries 0
expect_usage_error nq_too_many "--nq 101" $small --nq 101
expect_usage_error k_not_a_number "--k" $small --k ten
expect_usage_error backend_unknown "--backend" $small --backend metal
expect_usage_error base_alone "--query" --base "$sift/siftsmall_base.fvecs"
expect_usage_error no_such_file "--base" --base "$work/absent.fvecs" --query "$sift/siftsmall_query.fvecs"
expect_usage_error ids_as_queries "--query: .*not vectors" --base "$sift/siftsmall_base.fvecs" --query "$sift/siftsmall_groundtruth.ivecs"
printf '\004\000\000\000\001\002\003\004' > "$work/four.bvecs"  # one 4-dimensional uint8 vector
expect_usage_error dims_differ "--query: the queries have 4 dimensions" --base "$sift/siftsmall_base.fvecs" --query "$work/four.bvecs"
expect_usage_error gt_too_narrow "--k 200" $small --groundtruth "$sift/siftsmall_groundtruth.ivecs" --k 200
expect_usage_error no_fashion "--dir" --dir "$work"
[ "$(caches)" -eq 0 ] || fail "a failed run left an exact-neighbour cache behind"

# --backend gpu is --backend cuda: the GPU, or a clear error where none is usable, never the CPU.
run backend_gpu $small --nq 10 --backend gpu
if [ "$rc" -eq 0 ]; then
  grep -q "^backend: GPU" "$work/backend_gpu.out" || fail "--backend gpu ran on: $(grep backend: "$work/backend_gpu.out")"
else
  [ "$rc" -eq 2 ] && grep -q -- "--backend gpu: no usable CUDA device" "$work/backend_gpu.err" ||
    fail "--backend gpu without a GPU: exit $rc, $(cat "$work/backend_gpu.err")"
fi

# The last row's recall (nprobe = nlist: exhaustive) against the files' own ground truth.
last_recall() { awk '$1 ~ /^[0-9]+$/ { r = $2 } END { print r }' "$1"; }
at_least() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a >= b) }'; }
run sift_gt $small --nprobe 1,8,32 --k 5 --backend cpu --groundtruth "$sift/siftsmall_groundtruth.ivecs"
[ "$rc" -eq 0 ] || fail "siftsmall with --groundtruth: exit $rc: $(cat "$work/sift_gt.err")"
grep -q "recall@5" "$work/sift_gt.out" || fail "the header does not say recall@5: $(grep nprobe "$work/sift_gt.out")"
at_least "$(last_recall "$work/sift_gt.out")" 0.99 || fail "siftsmall recall@5 at nprobe = nlist: $(last_recall "$work/sift_gt.out")"
[ ! -s "$work/sift_gt.err" ] || fail "output not to a terminal, yet stderr says: $(cat "$work/sift_gt.err")"
[ "$(caches)" -eq 0 ] || fail "--groundtruth given, yet an exact-neighbour cache was written"

run bigann_gt --base "$bigann/bigann10k_base.bvecs" --query "$bigann/bigann10k_query.bvecs" --groundtruth \
  "$bigann/bigann10k_groundtruth.ivecs" --nlist 32 --nprobe 32
[ "$rc" -eq 0 ] || fail "bigann10k .bvecs: exit $rc: $(cat "$work/bigann_gt.err")"
at_least "$(last_recall "$work/bigann_gt.out")" 0.99 || fail "bigann10k recall@10 at nprobe = nlist: $(last_recall "$work/bigann_gt.out")"

# The cache is keyed by the data: siftsmall, then bigann10k with the same k and query count,
# each against exact neighbours computed here (no --groundtruth), must both be right.
run sift_cache $small --nprobe 32 --nq 100
run bigann_cache --base "$bigann/bigann10k_base.bvecs" --query "$bigann/bigann10k_query.bvecs" --nlist 32 --nprobe 32 --nq 100
at_least "$(last_recall "$work/sift_cache.out")" 0.99 || fail "siftsmall, own exact neighbours: recall $(last_recall "$work/sift_cache.out")"
at_least "$(last_recall "$work/bigann_cache.out")" 0.99 ||
  fail "bigann10k after siftsmall with the same k and nq: recall $(last_recall "$work/bigann_cache.out") (stale cache?)"
[ "$(caches)" -eq 2 ] || fail "expected 2 cache files (one per data set), found $(caches)"
run sift_cached $small --nprobe 32 --nq 100
cmp -s "$work/sift_cache.out" "$work/sift_cached.out" ||
  [ "$(last_recall "$work/sift_cache.out")" = "$(last_recall "$work/sift_cached.out")" ] || fail "the cached run differs"

# On a terminal (script(1) gives it one): progress for the exact neighbours, the training and the
# adding.
if command -v script > /dev/null; then
  IVFGPU_PROGRESS_DELAY_MS=0 script -qec "'$prog' $small --nq 100 --k 7 --nprobe 32" "$work/tty.log" > /dev/null 2>&1 ||
    fail "the run on a terminal failed: $(tail -3 "$work/tty.log")"
  grep -q "exact neighbours (once, cached): 100 / 100" "$work/tty.log" || fail "no progress for the exact neighbours on a terminal"
  grep -q "training (%): 100 / 100" "$work/tty.log" || fail "no progress for the training on a terminal"
  grep -q "adding: 10000 / 10000" "$work/tty.log" || fail "no progress for the adding on a terminal"
fi

[ "$failures" -eq 0 ] || exit 1
echo "PASS: options, errors, .fvecs/.bvecs/.ivecs, the content-keyed cache and progress"
