#!/bin/bash
# scripts/device_eval_ab.sh BEFORE AFTER [D]: whether two builds of `hla` give the same outputs byte for byte
# on the fast path (`hla eval --impl gpu-fast --scalar f32`), for a change that should leave them so
# (docs/perf.md: one that moves no product, sum or rounding). The inputs, 4,160 tokens (65 chunks, the
# last one short) of d = dv = D (64 unless given, a multiple of 8 up to 128; above 64 the hla3 case is
# left out where a build refuses it, as those before hla3's wide heads do), q and k positive, are drawn with a fixed
# seed and written as .npy by Python's struct (no numpy needed); each case runs both builds and compares
# the files with cmp, with float32 outputs and, where both builds take `--bf16-out`, bf16 ones. The
# files live in a new temporary folder, removed at the end. Exit status: 0 when every case is equal, 1
# when one differs or fails.
set -u
usage="usage: scripts/device_eval_ab.sh BEFORE AFTER [D] (two hla executables; D a multiple of 8 up to 128)"
if [ $# -lt 2 ] || [ $# -gt 3 ] || [ ! -x "$1" ] || [ ! -x "$2" ]; then
  echo "$usage" >&2
  exit 2
fi
before=$1 after=$2 width=${3:-64}
if ! [[ $width =~ ^[0-9]+$ ]] || [ $((width % 8)) != 0 ] || [ "$width" -lt 8 ] || [ "$width" -gt 128 ]; then
  echo "$usage" >&2
  exit 2
fi
folder=$(mktemp -d) || exit 2
trap 'rm -rf -- "$folder"' EXIT
python3 - "$folder" "$width" <<'EOF' || exit 1
import random, struct, sys
random.seed(7)
n, d = 4160, int(sys.argv[2])
for name in "qkv":
    values = [random.gauss(0, 1) / 8 for _ in range(n * d)]
    if name != "v":
        values = [abs(x) for x in values]  # positive q, k: denominators far from zero
    header = "{'descr': '<f4', 'fortran_order': False, 'shape': (%d, %d), }" % (n, d)
    header += " " * (63 - (10 + len(header)) % 64) + "\n"
    with open(f"{sys.argv[1]}/{name}.npy", "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode())
        f.write(struct.pack("<%df" % (n * d), *values))
EOF
inputs="--q $folder/q.npy --k $folder/k.npy --v $folder/v.npy --impl gpu-fast --scalar f32"
status=0
outputs=("")
if "$before" eval --help 2>&1 | grep -q -e --bf16-out && "$after" eval --help 2>&1 | grep -q -e --bf16-out; then
  outputs+=("--bf16-out")
else
  echo "device_eval_ab: a build without --bf16-out: float32 outputs only"
fi
i=0
for options in "--variant hla2" "--variant hla2 --ridge 1/2" "--variant hla2 --normalize --eps 1/4 --decay 63/64" \
  "--variant ahla --decay 7/8" "--variant ahla --normalize --eps 1/4" "--variant hla3 --decay 63/64"; do
  if [ "$width" -gt 64 ] && [[ $options == *hla3* ]]; then
    refused=0
    for build in "$before" "$after"; do
      # shellcheck disable=SC2086 # the options and inputs are words
      "$build" eval $options $inputs --out "$folder/probe.npy" 2>&1 | grep -q "multiples of 8 up to 64" && refused=1
    done
    [ $refused = 1 ] && { echo "device_eval_ab: $options: a build takes no hla3 wider than 64, left out"; continue; }
  fi
  for output in "${outputs[@]}"; do
    i=$((i + 1))
    # shellcheck disable=SC2086 # the options and inputs are words
    if ! "$before" eval $options $inputs $output --out "$folder/before_$i.npy" ||
      ! "$after" eval $options $inputs $output --out "$folder/after_$i.npy"; then
      echo "device_eval_ab: $options $output: a run failed"
      status=1
    elif cmp -s "$folder/before_$i.npy" "$folder/after_$i.npy"; then
      echo "device_eval_ab: $options $output: equal byte for byte"
    else
      echo "device_eval_ab: $options $output: the outputs differ"
      status=1
    fi
  done
done
exit $status
