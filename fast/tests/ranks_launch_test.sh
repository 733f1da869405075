#!/bin/bash
# scripts/ranks.sh (docs/ranks.md): each of P processes gets its rank, the rank count, its one GPU and
# the shared id file's path in a folder that exists while they run and is gone after; a failing rank's
# status is returned and the other ranks are stopped; bad usage gets one line and status 2.
# Usage: ranks_launch_test.sh SOURCE_DIR
set -u
launch="$1/scripts/ranks.sh"
out=$(mktemp -d) || exit 1
trap 'rm -rf -- "$out"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

"$launch" 3 sh -c 'echo "$HLA_RANK $HLA_RANKS $CUDA_VISIBLE_DEVICES $HLA_RANK_ID $(test -d "$(dirname "$HLA_RANK_ID")" && echo exists)" > "$0/rank$HLA_RANK"' "$out" ||
  fail "three ranks that succeed: status $?"
ids=""
for r in 0 1 2; do
  read -r rank ranks device id folder < "$out/rank$r" || fail "rank $r wrote nothing"
  [ "$rank $ranks $device $folder" = "$r 3 $r exists" ] || fail "rank $r saw '$rank $ranks $device $folder'"
  ids="$ids $id"
  [ -e "$(dirname "$id")" ] && fail "the id folder $(dirname "$id") outlived the ranks"
done
[ "$(echo $ids | tr ' ' '\n' | sort -u | wc -l)" = 1 ] || fail "the ranks saw different id files:$ids"

start=$(date +%s)
"$launch" 3 sh -c 'if [ "$HLA_RANK" = 1 ]; then exit 5; fi; exec sleep 60'
status=$?
[ $status = 5 ] || fail "a rank exiting 5: status $status"
[ $(($(date +%s) - start)) -lt 30 ] || fail "the other ranks were not stopped"

"$launch" 0 true 2> "$out/err"
status=$?
[ $status = 2 ] && [ "$(wc -l < "$out/err")" = 1 ] || fail "0 ranks: status $status, stderr '$(cat "$out/err")'"
"$launch" 2 2> "$out/err"
[ $? = 2 ] || fail "no command: not refused"
echo "PASS"
