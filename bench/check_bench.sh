#!/bin/sh
# The benchmark as a newcomer meets it: --help, strict options, a small synthetic run writing
# JSON and CSV, bench/plot.sh drawing it, and every document the README and the bench name
# existing in the repository.
#   check_bench.sh PROGRAM SOURCE_DIR SCRATCH
set -u
prog="$1"; src="$2"; work="$3"
rm -rf "$work"; mkdir -p "$work"
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

"$prog" --help > "$work/help.out" 2>&1 || fail "--help exits $?"
for opt in --base --query --groundtruth --nq --nlist --k --nprobe --batch --backend --json --csv --dtype --query-dtype \
  --integer-data; do
  grep -q -- "$opt" "$work/help.out" || fail "--help does not list $opt"
done
"$prog" --bogus > /dev/null 2> "$work/bogus.err"; rc=$?
[ "$rc" -eq 2 ] && grep -q -- "--bogus" "$work/bogus.err" || fail "unknown option: exit $rc, $(cat "$work/bogus.err")"
"$prog" --nq 0 > /dev/null 2> "$work/nq.err"; rc=$?
[ "$rc" -eq 2 ] && grep -q -- "--nq" "$work/nq.err" || fail "--nq 0: exit $rc, $(cat "$work/nq.err")"

"$prog" --n 4000 --dim 16 --nlist 32 --nq 200 --k 5,10 --nprobe 1,4,32 --batch 200 --reps 1 --backend cpu \
  --json "$work/run.json" --csv "$work/run.csv" > "$work/run.out" 2>&1 || fail "synthetic run: $(tail -3 "$work/run.out")"
grep -q '"results"' "$work/run.json" || fail "no results in the JSON"
[ "$(wc -l < "$work/run.csv")" -eq 7 ] || fail "the CSV should have a header and 6 rows: $(cat "$work/run.csv")"
head -1 "$work/run.csv" | grep -q '^library,data,backend,n,dim,nlist,nq,nprobe,k,batch,qps,recall' || fail "CSV header"
# A compact storage type (the CPU backend takes every one): u8 quantises the synthetic data, and
# the queries go in as u8.
"$prog" --n 4000 --dim 16 --nlist 32 --nq 200 --k 10 --nprobe 4 --batch 200 --reps 1 --backend cpu --dtype u8 \
  --query-dtype storage --json "$work/u8.json" > "$work/u8.out" 2>&1 || fail "--dtype u8: $(tail -3 "$work/u8.out")"
grep -q '"dtype": "u8"' "$work/u8.json" || fail "--dtype u8: no dtype in the JSON"
grep -q 'dtype u8 (queries u8)' "$work/u8.out" || fail "--dtype u8: the dtype is not printed"
if command -v gnuplot > /dev/null && command -v jq > /dev/null; then
  jq -e '.results | length == 6' "$work/run.json" > /dev/null || fail "the JSON should hold 6 rows"
  sh "$src/bench/plot.sh" -o "$work/curves.png" -k 10 "$work/run.json" "$work/run.json" > "$work/plot.out" 2>&1 ||
    fail "plot.sh: $(cat "$work/plot.out")"
  head -c 4 "$work/curves.png" | grep -q PNG || fail "plot.sh wrote no PNG"
else
  echo "NOTE: gnuplot or jq missing: plot.sh not checked (scripts/deps.sh installs both)"
fi

# Every document named by the README, the bench's sources and help, and docs/ exists.
for f in "$src/README.md" "$src/bench/ivfgpu_bench.cpp" "$src/tools/datasets.hpp" "$src"/docs/*.md "$work/help.out"; do
  for doc in $(grep -o '[A-Za-z0-9_./-]*\.md' "$f" | sort -u); do
    case "$doc" in ../shared/*|*/shared/*) continue ;; esac
    [ -f "$src/$doc" ] || [ -f "$(dirname "$f")/$doc" ] || fail "$(basename "$f") names $doc, which does not exist"
  done
done
[ "$failures" -eq 0 ] || exit 1
echo "PASS: --help, strict options, JSON, CSV, plot.sh and the documents named"
