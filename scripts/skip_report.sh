#!/bin/sh
# After a CTest run: which tests, and which GoogleTest cases inside tests that passed, were
# skipped, how many, and why (the message each printed). CTest's own summary names only the
# tests that skipped as a whole.
#   scripts/skip_report.sh BUILD_DIR [--strict]
# --strict (CI): exit 1 when anything skipped that is not labelled `gpu`; CPU tests must run
# where ../shared/data is present, as on CI.
set -eu
build="$1"; strict="${2:-}"
log="$build/Testing/Temporary/LastTest.log"
[ -f "$log" ] || { echo "skip_report: no $log (run ctest first)"; exit 1; }
# Each test's labels, from the CTestTestfile.cmake files (ctest --show-only would rewrite the log).
labels="$build/Testing/Temporary/skip_report_labels.txt"
find "$build" -name CTestTestfile.cmake -exec grep -h '^set_tests_properties' {} + |
  sed -n 's/^set_tests_properties(\[=\[\([^]]*\)\]=\].*LABELS "\([^"]*\)".*/\1	\2/p' > "$labels"
echo "-	-" >> "$labels"  # never empty: awk tells the two files apart by it
awk -v strict="$strict" -F'\t' '
  FNR == NR { lab[$1] = $2; next }
  /^[0-9]+\/[0-9]+ Test: / { sub(/^[0-9]+\/[0-9]+ Test: /, ""); t = $0; reason = ""; next }
  / Skipped$/ { want = 1; next }                          # GoogleTest: file:line: Skipped, then the message
  want { reason = $0; want = 0; next }
  /^SKIPPED/ { reason = $0; why[t] = $0; whole[t] = 1 }                # scripts that exit 77 (SKIP_RETURN_CODE) say why first
  /^\[  SKIPPED \] [^ ]+ \(/ { key = t SUBSEP (reason == "" ? "(no message)" : reason); cases[key]++; ncases[t]++; next }
  /^Skip regular expression found/ { whole[t] = 1 }
  END {
    ntests = 0; total = 0; bad = 0
    for (t in whole) ntests++
    for (t in ncases) total += ncases[t]
    for (t in whole) if (!(t in ncases)) { cases[t SUBSEP (t in why ? why[t] : "(see its output)")] = 1 }
    if (ntests == 0 && total == 0) { print "Skipped: nothing"; exit 0 }
    printf "Skipped: %d test(s) as a whole; %d GoogleTest case(s)\n", ntests, total
    for (k in cases) {
      split(k, p, SUBSEP); t = p[1]
      allowed = (lab[t] ~ /(^|;)gpu(;|$)/)
      if (!allowed) bad++
      printf "  %-28s %-10s %s%s: %s%s\n", t, "[" lab[t] "]", (t in whole) ? "whole test" : "inside a passing test",
             (cases[k] > 1 || !(t in whole)) ? ", " cases[k] " case(s)" : "", p[2], allowed ? "" : "  <- not a GPU test"
    }
    if (strict == "--strict" && bad > 0) {
      print "skip_report: tests that should run here were skipped (data under ../shared/data missing?)"
      exit 1
    }
  }' "$labels" "$log"
