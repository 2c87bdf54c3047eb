#!/bin/sh
# Recall-QPS curves from one or several ivfgpu_bench --json runs, drawn by gnuplot to a PNG:
# one curve a run, one point an nprobe (labelled). A run of another library written in the same
# layout (e.g. FAISS, with "library": "FAISS GPU 1.15") is drawn next to ours.
#
#   bench/plot.sh [-o curves.png] [-k K] [-b BATCH] [-t TITLE] RUN.json [RUN.json ...]
#
# -k: the k to draw (default: the smallest in the first run); -b: the batch size (default: the
# largest in the first run). Needs gnuplot (Debian: gnuplot-nox) and jq.
set -eu
usage() {
  echo "usage: $0 [-o curves.png] [-k K] [-b BATCH] [-t TITLE] RUN.json [RUN.json ...]" >&2
  exit 2
}
out=curves.png; k=""; batch=""; title="recall@k against QPS"
while getopts "o:k:b:t:h" opt; do
  case "$opt" in
    o) out="$OPTARG" ;;
    k) k="$OPTARG" ;;
    b) batch="$OPTARG" ;;
    t) title="$OPTARG" ;;
    *) usage ;;
  esac
done
shift $((OPTIND - 1))
[ $# -ge 1 ] || usage
for tool in gnuplot jq; do
  command -v "$tool" > /dev/null || { echo "$0: needs $tool (apt-get install gnuplot-nox jq)" >&2; exit 1; }
done
for run in "$@"; do
  jq -e '.results | length > 0' "$run" > /dev/null 2>&1 || { echo "$0: $run: not an ivfgpu_bench --json run" >&2; exit 1; }
done
[ -n "$k" ] || k=$(jq '[.results[].k] | min' "$1")
[ -n "$batch" ] || batch=$(jq '[.results[].batch] | max' "$1")

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT INT TERM
plots=""; i=0
for run in "$@"; do
  i=$((i + 1))
  jq -r --argjson k "$k" --argjson b "$batch" \
    '.results[] | select(.k == $k and .batch == $b and .recall >= 0) | "\(.recall) \(.qps) \(.nprobe)"' \
    "$run" > "$tmp/$i.dat"
  if [ ! -s "$tmp/$i.dat" ]; then
    echo "$0: $run has no rows with k = $k, batch = $batch and a measured recall (see -k, -b)" >&2
    exit 1
  fi
  label=$(jq -r '.label // "\(.library // "libivfgpu"), \(.backend // "?"), \(.data // "?") \(.n // "")x\(.dim // "")"' "$run" |
    sed 's/"/\\"/g')
  plots="$plots${plots:+, }'$tmp/$i.dat' using 1:2 with linespoints lw 2 pt 7 title \"$label\""
  plots="$plots, '' using 1:2:(sprintf(\"%d\", \$3)) with labels offset 0.8,0.6 font ',8' notitle"
done
gnuplot <<GP
set terminal pngcairo noenhanced size 1000,650 font ',11'
set output '$out'
set title "$title (k = $k, batch = $batch; labels: nprobe)"
set xlabel 'recall@$k'
set ylabel 'queries per second'
set logscale y
set grid
set key bottom left
plot $plots
GP
echo "wrote $out"
