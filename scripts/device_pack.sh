#!/bin/bash
# scripts/device_pack.sh [--fresh] [--suffix S] [TARGET...]: builds the GPU binaries for the device
# machine here (docs/gpu.md, "Device runs"), strips them into its stage, build-device/stage (named
# TARGET, or TARGET_S with a suffix, so that the binaries of two trees can sit side by side for a
# comparison: build one tree, pack with a suffix, build the other, pack again), and packs the stage into
# build-device/pack/bins.tar.xz, the one path to carry. --fresh first empties the stage. The build
# folder is $HLA_DEVICE_BUILD (default /tmp/devbuild; configured here if it has no CMakeCache.txt:
# Release, x86-64-v3, no fuzzers). Default targets: gpu_tests check_gpu_tests hla_bench_gpu cli_tests
# hla ranks_nccl_check. It writes only in the build folder and in build-device/stage and
# build-device/pack (git-ignored), and replaces only what it wrote there. On the device:
# scripts/device_unpack.sh.
set -u -o pipefail
root=$(cd "$(dirname "$0")/.." && pwd) || exit 2
build=${HLA_DEVICE_BUILD:-/tmp/devbuild}
stage="$root/build-device/stage"
suffix=""
fresh=0
if [ "${1:-}" = --fresh ]; then
  fresh=1
  shift
fi
if [ "${1:-}" = --suffix ]; then
  if [ $# -lt 2 ] || ! [[ $2 =~ ^[A-Za-z0-9]+$ ]]; then
    echo "usage: scripts/device_pack.sh [--fresh] [--suffix S] [TARGET...] (S: letters and digits)" >&2
    exit 2
  fi
  suffix="_$2"
  shift 2
fi
targets=("$@")
[ ${#targets[@]} -eq 0 ] && targets=(gpu_tests check_gpu_tests hla_bench_gpu cli_tests hla ranks_nccl_check)
if [ ! -f "$build/CMakeCache.txt" ]; then
  cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DHLA_MARCH=x86-64-v3 -DHLA_BUILD_FUZZERS=OFF \
    > "$build.configure.log" 2>&1 || { echo "device_pack: cmake failed, see $build.configure.log" >&2; exit 1; }
fi
nice make -C "$build" -j2 "${targets[@]}" > "$build/device_pack.log" 2>&1 ||
  { echo "device_pack: the build failed, see $build/device_pack.log" >&2; exit 1; }
if [ $fresh = 1 ] && [ -d "$stage" ]; then
  rm -f -- "$stage"/* || exit 1
fi
mkdir -p "$stage" "$root/build-device/pack" || exit 1
for target in "${targets[@]}"; do
  binary=$(find "$build" -name "$target" -type f -perm -u+x -not -path '*/CMakeFiles/*' | head -n 1)
  [ -n "$binary" ] || { echo "device_pack: no executable $target in $build" >&2; exit 1; }
  cp "$binary" "$stage/$target$suffix" && strip "$stage/$target$suffix" || exit 1
done
archive="$root/build-device/pack/bins.tar.xz"
tar -cf - -C "$stage" . | xz -T2 -4 > "$archive.partial" && mv "$archive.partial" "$archive" ||
  { rm -f "$archive.partial"; echo "device_pack: packing failed" >&2; exit 1; }
bytes=$(stat -c %s "$archive")
echo "device_pack: $archive, $((bytes / 1048576)) MiB: $(ls "$stage" | tr '\n' ' ')"
if [ "$bytes" -gt $((60 * 1048576)) ]; then
  echo "device_pack: over 60 MiB of the 64 a call carries: leave out what this call does not run" >&2
  exit 1
fi
