#!/bin/bash
# scripts/device_ab.sh and scripts/device_eval_ab.sh (docs/gpu.md, "Device runs") without a GPU:
# device_ab's table from two stand-ins for hla_bench_gpu (the rounds' mean, after / before, a new csv
# each call, a failing build leaving nothing that looks complete); device_eval_ab's verdicts from two
# stand-ins for `hla` that run the streaming form on the CPU (equal builds equal with either output
# type, a build that rounds otherwise differs, an older build without --bf16-out compared in float32
# only). Bad usage gets one line and status 2.
# Usage: device_scripts_test.sh SOURCE_DIR HLA
set -u
ab="$1/scripts/device_ab.sh" eval_ab="$1/scripts/device_eval_ab.sh" hla=$2
work=$(mktemp -d) || exit 1
trap 'rm -rf -- "$work"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

# Two benchmark stand-ins: before 1.50 and 1.70 ms in its two rounds, after 1.20 both times.
cat > "$work/before" <<'EOF'
#!/bin/bash
count=$(cat "$0.count" 2>/dev/null || echo 0); echo $((count + 1)) > "$0.count"
echo "variant,precision,method,batch,heads,n,d,dv,chunk,median_ms,spread_ms,pass,options,out,ranks,rank,slice,exchange_bytes,exchange_ms"
[ "$count" = 0 ] && ms=1.50 || ms=1.70
echo "hla2,bf16,fast,8,16,65536,64,64,64,$ms,0.01,forward,plain,bf16,1,0,65536,0,0"
EOF
sed 's/ms=1.50 || ms=1.70/ms=1.20 || ms=1.20/' "$work/before" > "$work/after"
printf '#!/bin/bash\nexit 3\n' > "$work/broken"
chmod +x "$work/before" "$work/after" "$work/broken"
mkdir "$work/out"
table=$(OUT="$work/out" "$ab" 2 "$work/before" "$work/after" --any-arguments) || fail "device_ab: status $?"
echo "$table" | grep -q '| hla2 | fast | 8 | 16 | 65536 | 64 | 64 | forward | plain | bf16 | 1, 0 | 1.600 | 1.200 | 0.750 |' ||
  fail "device_ab's table: $table"
[ "$(grep -c . "$work/out/ab.csv")" = 4 ] || fail "ab.csv holds $(grep -c . "$work/out/ab.csv") lines, not 4"
OUT="$work/out" "$ab" 1 "$work/before" "$work/after" > /dev/null || fail "device_ab's second call: status $?"
[ -f "$work/out/ab2.csv" ] || fail "the second call did not write ab2.csv"
OUT="$work/out" "$ab" 1 "$work/before" "$work/broken" > /dev/null 2>&1 && fail "a failing build passed"
[ -e "$work/out/ab3.csv" ] || [ -e "$work/out/ab3.csv.part" ] && fail "a failing build left its csv"
for usage in "x $work/before $work/after" "1 $work/before" "1 $work/before $work/missing"; do
  # shellcheck disable=SC2086 # the usage is words
  message=$(OUT="$work/out" "$ab" $usage 2>&1)
  [ $? = 2 ] && [ "$(echo "$message" | wc -l)" = 1 ] || fail "device_ab $usage: '$message'"
done
message=$(OUT="" "$ab" 1 "$work/before" "$work/after" 2>&1)
[ $? = 2 ] || fail "device_ab without OUT: '$message'"

# Two `hla` stand-ins: the CPU's streaming form in place of the fast path, in float32 or float64 (their
# --bf16-out outputs the float32 ones); and an older build, whose `eval --help` has no --bf16-out.
for scalar in f32 f64; do
  cat > "$work/hla_$scalar" <<EOF
#!/bin/bash
args=()
for arg in "\$@"; do [ "\$arg" = --bf16-out ] || args+=("\${arg/gpu-fast/streaming}"); done
exec "$hla" "\${args[@]/f32/$scalar}"
EOF
  chmod +x "$work/hla_$scalar"
done
cat > "$work/hla_old" <<EOF
#!/bin/bash
if [ "\$*" = "eval --help" ]; then "$work/hla_f32" eval --help | grep -v -e --bf16-out; exit 0; fi
exec "$work/hla_f32" "\$@"
EOF
chmod +x "$work/hla_old"
report=$("$eval_ab" "$work/hla_f32" "$work/hla_f32") || fail "device_eval_ab, equal builds: status $?: $report"
[ "$(echo "$report" | grep -c 'equal byte for byte')" = 12 ] || fail "device_eval_ab, equal builds: $report"
[ "$(echo "$report" | grep -c -e '--bf16-out: equal byte for byte')" = 6 ] || fail "device_eval_ab, bf16: $report"
report=$("$eval_ab" "$work/hla_f32" "$work/hla_f64") && fail "device_eval_ab passed builds that differ"
[ "$(echo "$report" | grep -c 'the outputs differ')" = 12 ] || fail "device_eval_ab, differing builds: $report"
report=$("$eval_ab" "$work/hla_f32" "$work/hla_f32" 128) || fail "device_eval_ab, d = 128: status $?: $report"
[ "$(echo "$report" | grep -c 'equal byte for byte')" = 12 ] || fail "device_eval_ab, d = 128: $report"
# A build from before hla3's wide heads: refuses hla3 above 64, which is then left out.
cat > "$work/hla_narrow3" <<EOF
#!/bin/bash
if [[ " \$* " == *" hla3 "* ]]; then echo "error: fast path: d and dv must be multiples of 8 up to 64" >&2; exit 1; fi
exec "$work/hla_f32" "\$@"
EOF
chmod +x "$work/hla_narrow3"
report=$("$eval_ab" "$work/hla_narrow3" "$work/hla_f32" 128) || fail "device_eval_ab, hla3 refused: status $?: $report"
[ "$(echo "$report" | grep -c 'equal byte for byte')" = 10 ] && echo "$report" | grep -q "left out" ||
  fail "device_eval_ab, hla3 refused: $report"
report=$("$eval_ab" "$work/hla_old" "$work/hla_f32") || fail "device_eval_ab, an older build: status $?: $report"
[ "$(echo "$report" | grep -c 'equal byte for byte')" = 6 ] && echo "$report" | grep -q "float32 outputs only" ||
  fail "device_eval_ab, an older build: $report"
message=$("$eval_ab" "$work/hla_f32" 2>&1)
[ $? = 2 ] && [ "$(echo "$message" | wc -l)" = 1 ] || fail "device_eval_ab with one build: '$message'"
message=$("$eval_ab" "$work/hla_f32" "$work/hla_f32" 100 2>&1)
[ $? = 2 ] && [ "$(echo "$message" | wc -l)" = 1 ] || fail "device_eval_ab with d = 100: '$message'"
echo "device_ab.sh and device_eval_ab.sh: tables, new files, failures and verdicts as documented"
