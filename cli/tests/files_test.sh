#!/usr/bin/env bash
# What hla promises about files (README, "Bad input, and your files"), tried as a careless user
# would, each in a fresh temporary directory: nothing it did not create is deleted or replaced,
# every option is checked before anything on disk changes, and a bad value gets one line and a
# non-zero exit, never a crash or a hang.
#   files_test.sh HLA CLASS   (CLASS: outputs, report, limits, answers, signals, device)
set -uo pipefail
hla="$1"
class="$2"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cd "$work" || exit 1
fail() { echo "FAIL: $*"; exit 1; }
ok() { echo "ok: $*"; }

# npy NAME ROWS COLS: a float64 .npy of small integers (no numpy needed).
npy() {
  python3 - "$@" <<'EOF'
import struct, sys
name, rows, cols = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
head = "{'descr': '<f8', 'fortran_order': False, 'shape': (%d, %d), }" % (rows, cols)
head += " " * ((64 - (10 + len(head) + 1) % 64) % 64) + "\n"
with open(name, "wb") as f:
    f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(head)) + head.encode())
    f.write(b"".join(struct.pack("<d", float((i * 7919) % 5 - 2)) for i in range(rows * cols)))
EOF
}

# refused WHAT CMD...: exit non-zero, one line on stderr, within 20 s.
refused() {
  local what="$1"
  shift
  timeout 20 "$@" > "$work/stdout" 2> "$work/stderr"
  local code=$?
  [ $code -eq 124 ] && fail "$what: still running after 20 s"
  [ $code -eq 0 ] && fail "$what: exit 0"
  [ $code -ge 128 ] && fail "$what: killed by a signal (exit $code): $(cat "$work/stderr")"
  [ "$(wc -l < "$work/stderr")" -eq 1 ] || fail "$what: not one line on stderr: $(cat "$work/stderr")"
  ok "$what -> $(cat "$work/stderr")"
}

# interrupt SIGNAL CONDITION CMD...: starts CMD in a process group of its own (stdout to out,
# stderr to err), waits at most 30 s for the shell condition CONDITION to hold, sends SIGNAL to
# the group as a terminal would, and sets `code` to CMD's exit status and `child` to its pid.
interrupt() {
  local signal="$1" condition="$2"
  shift 2
  set -m  # job control: the background job leads a process group of its own, with $! its leader
  "$@" > out 2> err &
  child=$!
  set +m
  for _ in $(seq 1 600); do eval "$condition" && break; sleep 0.05; done
  kill -"$signal" -- "-$child"
  wait "$child"
  code=$?
}

npy q.npy 8 2
npy k.npy 8 2
npy v.npy 8 3
eval_to=("$hla" eval --variant hla2 --impl streaming --scalar f64 --q q.npy --k k.npy --v v.npy --out)

case "$class" in
outputs)
  # A FIFO, a directory, a dangling symlink, an input: refused, and left as they were.
  mkfifo fifo
  refused "--out FIFO" "${eval_to[@]}" fifo
  [ -p fifo ] || fail "the FIFO was replaced"
  mkdir dir && echo keep > dir/notes
  refused "--out DIR" "${eval_to[@]}" dir
  [ "$(cat dir/notes)" = keep ] || fail "the directory was touched"
  refused "--out DIR/" "${eval_to[@]}" dir/
  ln -s missing.npy dangling
  refused "--out to a dangling symlink" "${eval_to[@]}" dangling
  [ -L dangling ] || fail "the dangling symlink was replaced"
  cp q.npy q.before
  refused "--out naming --q" "${eval_to[@]}" q.npy
  refused "--out naming --q by another path" "${eval_to[@]}" ./sub/../q.npy
  cmp -s q.npy q.before || fail "the input was overwritten"
  refused "--out in a missing directory" "${eval_to[@]}" nowhere/o.npy
  refused "--out /dev/stdout on a pipe" bash -c 'set -o pipefail; "$@" | cat > /dev/null' _ "${eval_to[@]}" /dev/stdout
  # A symlink to a file: the file it names is written, the link stays a link.
  echo old > real.npy && ln -s real.npy link.npy
  "${eval_to[@]}" link.npy 2> err || fail "--out through a symlink: $(cat err)"
  [ -L link.npy ] || fail "the symlink was replaced by a file"
  head -c 6 real.npy | grep -q NUMPY || fail "the file behind the symlink was not written"
  ok "--out through a symlink writes the file it names"
  # An existing output keeps its permissions; no temporary is left beside it.
  chmod 600 real.npy && "${eval_to[@]}" real.npy 2> err || fail "rewrite: $(cat err)"
  [ "$(stat -c %a real.npy)" = 600 ] || fail "the output's permissions changed"
  ls -a | grep -q 'hla-' && fail "a temporary is left: $(ls -a)"
  # hla proofs: outputs checked before the long run.
  refused "proofs --json DIR" "$hla" proofs --json dir --cases 1
  refused "proofs --json and --markdown one file" "$hla" proofs --json l.out --markdown ./l.out --cases 1
  refused "proofs --json in a missing directory" "$hla" proofs --json nowhere/l.json --cases 1
  [ -e l.out ] && fail "proofs wrote a refused output"
  ;;
report)
  tiny=(--max-n 64 --seeds 1 --operator linear)
  # A folder of the user's data, with names a report also uses, is refused and survives.
  mkdir data && echo '{"mine": 1}' > data/data.json && echo notes > data/notes.md && mkdir data/sub &&
    echo x > data/sub/file
  refused "report --out a folder with a data.json" "$hla" report "${tiny[@]}" --out data
  [ -f data/data.json ] && [ -f data/notes.md ] && [ -f data/sub/file ] || fail "user files were removed"
  # The current directory, even an empty one.
  mkdir empty && (cd empty && refused "report --out ." "$hla" report "${tiny[@]}" --out .) || exit 1
  [ -d empty ] || fail "--out . removed the current directory"
  # A report, then the same directory again, with a trailing slash: replaced, complete.
  "$hla" report "${tiny[@]}" --out r > /dev/null 2> err || fail "a first report: $(cat err)"
  [ -f r/.hla-output ] || fail "no marker in the report directory"
  "$hla" report "${tiny[@]}" --seed 2 --out r/ > /dev/null 2> err || fail "--out r/ over a report: $(cat err)"
  [ -f r/report.md ] && [ -f r/data.csv ] || fail "--out r/ left no complete report"
  cp r/data.csv before.csv
  # Bad options and a typo touch nothing.
  refused "report --operator typo" "$hla" report --max-n 64 --operator lineer --out r
  refused "report --max-n 100" "$hla" report --max-n 100 --out r
  refused "report --ledger missing" "$hla" report "${tiny[@]}" --ledger missing.md --out r
  cmp -s r/data.csv before.csv || fail "a refused run changed the previous report"
  # A file the user put into a report directory makes it theirs.
  echo mine > r/mine.txt
  refused "report --out a report holding a user file" "$hla" report "${tiny[@]}" --out r
  [ -f r/mine.txt ] || fail "the user's file in the report was removed"
  rm r/mine.txt
  # Through a symlink: the directory it names receives the report; the link stays.
  mkdir real && ln -s real link
  "$hla" report "${tiny[@]}" --out link > /dev/null 2> err || fail "--out through a symlink: $(cat err)"
  [ -L link ] && [ -f real/report.md ] || fail "--out link: the link was replaced or real/ has no report"
  # An interrupted re-run leaves the previous report as it was, and no staging directory.
  interrupt TERM "sleep 2" "$hla" report --max-n 4096 --operator hla3 --out r
  [ $code -eq 143 ] || fail "an interrupted report exits $code, not 143: $(cat err)"
  grep -q "interrupted by SIGTERM" err || fail "no word of the interruption: $(cat err)"
  cmp -s r/data.csv before.csv && [ -f r/report.md ] || fail "the interrupted run changed the previous report"
  ls -a | grep -q staging && fail "a staging directory is left: $(ls -a)"
  ok "an interrupted re-run keeps the previous report"
  # Ctrl-C while the plots are drawn (SIGINT to the whole process group, as a terminal sends it):
  # no Python traceback, one word of the interruption, the previous report kept.
  # (Operators without the wide heads' cells, so that the plots come within the 30 s waited.)
  interrupt INT 'grep -q "drawing the plots" err' "$hla" report "${tiny[@]}" --operator hla2/unmasked --operator hla2/ridge --out r
  grep -q "drawing the plots" err || fail "the report never reached its plots: $(cat err)"
  [ $code -eq 130 ] || fail "Ctrl-C during the plots exits $code, not 130: $(cat err)"
  grep -q Traceback err && fail "Ctrl-C during the plots printed a traceback: $(cat err)"
  grep -q "interrupted by SIGINT" err || fail "no word of the interruption: $(cat err)"
  cmp -s r/data.csv before.csv || fail "Ctrl-C during the plots changed the previous report"
  ok "Ctrl-C while the plots are drawn -> $(tail -1 err)"
  ;;
limits)
  refused "--threads 100000" "$hla" eval --variant hla2 --impl scan --threads 100000 --scalar f64 \
    --q q.npy --k k.npy --v v.npy --out o.npy
  refused "--threads 30000" "$hla" eval --variant hla2 --impl chunked --threads 30000 --scalar f64 \
    --q q.npy --k k.npy --v v.npy --out o.npy
  "$hla" eval --variant hla2 --impl chunked --threads 256 --scalar f64 --q q.npy --k k.npy --v v.npy \
    --out o.npy 2> err || fail "--threads 256 on 8 tokens: $(cat err)"
  refused "fuzz --seconds inf" "$hla" fuzz --operator linear --seconds inf
  refused "fuzz --seconds 1e300" "$hla" fuzz --operator linear --seconds 1e300
  refused "fuzz --seconds nan" "$hla" fuzz --operator linear --seconds nan
  refused "fuzz --jobs 100000" "$hla" fuzz --operator linear --jobs 100000
  refused "report --max-n 2^62 + 1" "$hla" report --max-n 4611686018427387905 --out r
  refused "report --max-n 2^63 - 1" "$hla" report --max-n 9223372036854775807 --out r
  refused "bench cpu --n 10^11" "$hla" bench cpu --n 100000000000
  grep -q "GiB" "$work/stderr" || fail "bench: the message does not say how much memory"
  [ -e o.npy ] && rm o.npy
  ;;
answers)
  "$hla" audit --max-n 3 --cases 3 > out 2> err || fail "audit --max-n 3 exits non-zero: $(tail -2 out)"
  grep -q FAILED out && fail "audit --max-n 3 reports a failure: $(tail -1 out)"
  grep -q "did not show" out || fail "audit --max-n 3 does not say that findings did not show"
  ok "audit --max-n 3 -> $(tail -1 out)"
  for decay in 1/3/4 1/3/2 1/2.5 1/; do
    refused "--decay $decay" "$hla" eval --variant hla2 --decay "$decay" --impl streaming --scalar exact \
      --q q.npy --k k.npy --v v.npy --out o.npy
  done
  refused "--q /dev/zero" "$hla" eval --variant hla2 --impl streaming --scalar f64 --q /dev/zero --k k.npy \
    --v v.npy --out o.npy
  grep -q "magic" "$work/stderr" || fail "--q /dev/zero: not the magic string's error"
  for seed in -1 18446744073709551616 1e3 ""; do
    refused "--seed '$seed'" "$hla" audit --seed "$seed" --cases 1
  done
  refused "an unknown subcommand" "$hla" evaluate --variant hla2
  grep -q "'evaluate'" "$work/stderr" || fail "the unknown subcommand is not named"
  [ "$("$hla" --version)" = "hla $(sed -n 's/^project(hla VERSION \([0-9.]*\).*/\1/p' "$3/CMakeLists.txt")" ] ||
    fail "--version: $("$hla" --version)"
  ok "--version -> $("$hla" --version)"
  # The n x n reference, cubic in n, says how long it will take before it starts.
  npy q2.npy 2000 64
  npy k2.npy 2000 64
  npy v2.npy 2000 64
  timeout 60 "$hla" eval --variant hla2 --impl reference --scalar exact --q q2.npy --k k2.npy --v v2.npy \
    --out o2.npy 2> err &
  pid=$!
  for _ in $(seq 1 50); do grep -q "will take about" err && break; sleep 1; done
  kill -INT "$pid" 2> /dev/null
  wait "$pid"
  grep -q "will take about" err || fail "no estimate for the exact reference at n = 2000: $(cat err)"
  grep -q "streaming" err || fail "the estimate does not point to the streaming form"
  [ -e o2.npy ] && fail "an interrupted eval wrote its output"
  ok "reference at n = 2000 -> $(head -1 err)"
  ;;
signals)
  fuzzers="$(dirname "$hla")/fuzzers/hla_fuzz_laws"
  if [ ! -x "$fuzzers" ]; then
    echo "skipped: the fuzzers are not built ($fuzzers)"
    exit 77
  fi
  interrupt INT "sleep 3" "$hla" fuzz --operator linear --seconds 120
  [ $code -eq 130 ] || fail "an interrupted fuzz exits $code, not 130: $(cat out err)"
  grep -q "interrupted by SIGINT" out || fail "the summary does not say it was interrupted: $(cat out)"
  sleep 1
  pgrep -f "hla-fuzz-linear-$child-" > /dev/null && fail "fuzzer processes outlive hla"
  ok "fuzz on SIGINT -> $(tail -1 out)"
  ;;
device)
  # A character device made here (never the real /dev): written in place, never replaced.
  if ! mknod null c 1 3 2> /dev/null; then
    echo "skipped: cannot make a device node here (needs root, or CAP_MKNOD in a container)"
    exit 77
  fi
  if ! (: >> null) 2> /dev/null; then
    echo "skipped: $work is on a file system mounted nodev (its device nodes cannot be opened)"
    exit 77
  fi
  "${eval_to[@]}" null 2> err || fail "--out a character device: $(cat err)"
  [ -c null ] || fail "the character device was replaced by a regular file"
  "$hla" proofs --cases 1 --json null > /dev/null 2> err || fail "proofs --json a device: $(cat err)"
  [ -c null ] || fail "proofs replaced the character device"
  ok "a character device stays one"
  ;;
*)
  fail "unknown class $class"
  ;;
esac
echo "files $class: ok"
