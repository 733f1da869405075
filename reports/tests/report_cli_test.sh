#!/usr/bin/env bash
# hla report from the command line: a tiny report has its files and ends by printing report.md's
# path; bad arguments give one line on stderr, a non-zero exit and no report.md.
set -uo pipefail
hla="$1"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

# (Operators without wide-head cells keep it short; reports/tests/report_test.cpp covers those.)
out="$("$hla" report --max-n 64 --seeds 1 --operator linear --operator linear/normalized --out "$work/r" 2> "$work/progress")" \
  || fail "a tiny report exits non-zero: $(cat "$work/progress")"
[ "$out" = "$work/r/report.md" ] || fail "stdout is not the path of report.md: '$out'"
for f in report.md data.csv data.json plots/linear.png plots/linear-normalized.png; do
  [ -s "$work/r/$f" ] || fail "missing $f"
done
grep -q "cases" "$work/progress" || fail "no progress on stderr"
grep -q "ledger.md" "$work/r/report.md" || fail "report.md does not link the ledger"
ls -a "$work" | grep -q staging && fail "a staging directory is left behind"

# The same seed gives the same files.
"$hla" report --max-n 64 --seeds 1 --operator linear --operator linear/normalized --out "$work/s" > /dev/null 2>&1
for f in report.md data.csv data.json; do cmp -s "$work/r/$f" "$work/s/$f" || fail "$f differs between runs"; done

# An interrupted run leaves the previous report as it was (cli/tests/files_test.sh report checks
# the same for every --out form).
cp "$work/r/data.csv" "$work/before.csv"
"$hla" report --max-n 4096 --operator hla3 --out "$work/r" > /dev/null 2>&1 &
pid=$!
sleep 1
kill -TERM "$pid"
wait "$pid" && fail "the run finished within a second; cannot test the interruption"
cmp -s "$work/r/data.csv" "$work/before.csv" || fail "an interrupted run changed the previous report"
ls -a "$work" | grep -q 'staging' && fail "an interrupted run left its staging directory"

bad() {  # bad ARGS...: one line on stderr, non-zero exit, no report.md
  rm -rf "$work/b"
  "$hla" report --out "$work/b" "$@" > /dev/null 2> "$work/err" && fail "exit 0 for: $*"
  [ "$(wc -l < "$work/err")" -eq 1 ] || fail "not one line of error for $*: $(cat "$work/err")"
  [ -e "$work/b/report.md" ] && fail "report.md written for: $*"
  echo "ok: $* -> $(cat "$work/err")"
}
bad --max-n 100
bad --max-n 128
bad --backward-max-n 100
bad --backward-max-n -2
bad --seeds 0
bad --operator nonsense --max-n 64
bad --threads 0
bad --frobnicate
"$hla" report --out "$work/missing/deeper" --max-n 64 --operator linear > /dev/null 2> "$work/err" && fail "exit 0 without a parent directory"
[ "$(wc -l < "$work/err")" -eq 1 ] || fail "not one line of error: $(cat "$work/err")"

# A directory that is not a report is never overwritten.
mkdir -p "$work/precious" && echo keep > "$work/precious/file"
"$hla" report --out "$work/precious" --max-n 64 --operator linear > /dev/null 2>&1 && fail "overwrote a directory that is not a report"
[ -f "$work/precious/file" ] || fail "removed a file of a directory that is not a report"
echo "report cli: ok"
