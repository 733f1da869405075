#!/bin/sh
# hla check on a user's kernel (examples/check/kernel.py): the correct output passes, the one with
# the carry dropped at a chunk boundary fails. Usage: examples/check/run.sh [path/to/hla]
# Works in a directory of its own (mktemp -d) and removes only that.
set -eu
hla=${1:-build/hla}
here=$(dirname "$0")
python=/usr/bin/python3
[ -x "$python" ] || python=python3
dir=$(mktemp -d "${TMPDIR:-/tmp}/hla-check-example.XXXXXX")
trap 'rm -rf "$dir"' EXIT
"$python" "$here/kernel.py" "$dir"
check() {
  "$hla" check --variant hla2 --decay 0.999 --scale 0.25 --layout bthd --precision bf16 \
    --q "$dir/q.npy" --k "$dir/k.npy" --v "$dir/v.npy" --o "$dir/$1"
}
echo "== hla check on a correct recurrent kernel (bf16 inputs and output, [B, T, H, D]):"
check o.npy
echo "== the same kernel with the carry dropped at token 256:"
if check o_dropped_carry.npy; then
  echo "examples/check: the faulty kernel passed" >&2
  exit 1
fi
