#!/bin/bash
# scripts/ranks.sh P COMMAND [ARGS...]: starts P processes of COMMAND, one a GPU, as the ranks of one
# sequence split across GPUs (docs/ranks.md). Rank r sees GPU r only (CUDA_VISIBLE_DEVICES=r) and finds
# HLA_RANK=r, HLA_RANKS=P and HLA_RANK_ID, the file through which rank 0 hands NCCL's id to the others
# (in a new temporary folder, removed at the end). NVLink multicast stays off (NCCL_NVLS_ENABLE=0).
# When a rank fails the others are stopped. Exit status: the first failing rank's, else 0.
set -u
if [ $# -lt 2 ] || ! [[ $1 =~ ^[0-9]+$ ]] || [ "$1" -lt 1 ] || [ "$1" -gt 1024 ]; then
  echo "usage: scripts/ranks.sh P COMMAND [ARGS...] (P from 1 to 1024)" >&2
  exit 2
fi
ranks=$1
shift
folder=$(mktemp -d) || exit 2
trap 'rm -rf -- "$folder"' EXIT
export NCCL_NVLS_ENABLE=0
pids=()
for ((r = 0; r < ranks; r++)); do
  HLA_RANK=$r HLA_RANKS=$ranks HLA_RANK_ID="$folder/nccl.id" CUDA_VISIBLE_DEVICES=$r "$@" &
  pids+=($!)
done
# Each rank's end is found by polling and its status read by `wait PID`, which keeps the status of a
# rank that ended before it is asked: `wait -n` misses a rank that ended while bash waited for another
# command (bash 5.2), and the other ranks then ran to their end.
status=0
running=("${pids[@]}")
while [ ${#running[@]} -gt 0 ]; do
  still=()
  for pid in "${running[@]}"; do
    if kill -0 "$pid" 2>/dev/null; then
      still+=("$pid")
      continue
    fi
    wait "$pid"
    code=$?
    if [ $code -ne 0 ] && [ $status -eq 0 ]; then
      status=$code
      kill "${pids[@]}" 2>/dev/null
    fi
  done
  running=("${still[@]}")
  [ ${#running[@]} -gt 0 ] && sleep 0.05
done
exit $status
