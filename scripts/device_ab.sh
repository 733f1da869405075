#!/bin/bash
# scripts/device_ab.sh ROUNDS BEFORE AFTER [ARGS...]: times two builds of hla_bench_gpu against each
# other in one call, as docs/perf.md compares them: BEFORE ARGS then AFTER ARGS, ROUNDS times
# alternating. Every CSV line goes to a new file, $OUT/ab.csv or, where that exists, ab2.csv, ab3.csv,
# ..., with the round and the build in front; then a table of each configuration's median_ms averaged
# over the rounds, before, after and after / before. OUT must name an existing folder (the device
# machine sets it).
set -u -o pipefail
usage="usage: scripts/device_ab.sh ROUNDS BEFORE AFTER [hla_bench_gpu arguments...] (OUT set to a folder)"
if [ $# -lt 3 ] || ! [[ $1 =~ ^[1-9][0-9]?$ ]]; then
  echo "$usage" >&2
  exit 2
fi
rounds=$1 before=$2 after=$3
shift 3
for binary in "$before" "$after"; do
  [ -x "$binary" ] || { echo "device_ab: $binary is not an executable" >&2; exit 2; }
done
[ -n "${OUT:-}" ] && [ -d "$OUT" ] || { echo "$usage" >&2; exit 2; }
csv="$OUT/ab.csv"
number=2
while [ -e "$csv" ] && [ $number -lt 100 ]; do
  csv="$OUT/ab$number.csv"
  number=$((number + 1))
done
[ -e "$csv" ] && { echo "device_ab: $OUT holds ab.csv to ab99.csv already" >&2; exit 2; }
: > "$csv" || exit 1
for ((round = 1; round <= rounds; round++)); do
  for which in before after; do
    binary=$before
    [ $which = after ] && binary=$after
    if ! "$binary" "$@" > "$csv.part"; then
      rm -f -- "$csv" "$csv.part"
      echo "device_ab: $binary failed in round $round; no table" >&2
      exit 1
    fi
    grep -v '^variant,' "$csv.part" | sed "s/^/$round,$which,/" >> "$csv"
  done
done
rm -f "$csv.part"
echo "device_ab: $csv"
python3 - "$csv" <<'EOF'
import collections, sys
# Columns after round, build: hla_bench_gpu's (variant, precision, method, batch, heads, n, d, dv, chunk,
# median_ms, spread_ms, pass, options, out, ranks, rank, ...); a configuration is all of them but the
# times.
times = collections.defaultdict(lambda: collections.defaultdict(list))
order = []
for line in open(sys.argv[1]):
    f = line.rstrip("\n").split(",")
    if len(f) < 18:
        continue
    which, row = f[1], f[2:]
    key = ",".join(row[:9] + row[11:16])
    if key not in order:
        order.append(key)
    times[key][which].append(float(row[9]))
print("| variant | method | B | H | n | d | dv | pass | options | out | ranks, rank | before ms | after ms | after / before |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
for key in order:
    k = key.split(",")
    b, a = times[key]["before"], times[key]["after"]
    if not b or not a:
        continue
    mb, ma = sum(b) / len(b), sum(a) / len(a)
    print(f"| {k[0]} | {k[2]} | {k[3]} | {k[4]} | {k[5]} | {k[6]} | {k[7]} | {k[9]} | {k[10]} | {k[11]} | "
          f"{k[12]}, {k[13]} | {mb:.3f} | {ma:.3f} | {ma / mb:.3f} |")
EOF
