#!/bin/sh
# ctest: installs the build into a temporary prefix, moves the prefix (the package is
# relocatable), builds this project against it and runs it; then builds it against the build
# folder's own export. Removes only the temporary folder it made.
# usage: test.sh BUILD_DIR        the CPU checks (the CUDA kernel is built too, in a CUDA build)
#        test.sh BUILD_DIR gpu    the CUDA kernel's checks at n = 65536, d = 64; exit 77 (skipped,
#                                 with the reason) where no GPU is
set -eu
build=$(cd "$1" && pwd)
mode=${2:-cpu}
here=$(cd "$(dirname "$0")" && pwd)
if [ "$mode" = gpu ] && ! nvidia-smi -L >/dev/null 2>&1; then
  echo "skipped: no NVIDIA GPU here (nvidia-smi lists none)"
  exit 77
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cmake --install "$build" --prefix "$tmp/installed" >/dev/null
mv "$tmp/installed" "$tmp/moved"
cmake -S "$here" -B "$tmp/example" -DCMAKE_PREFIX_PATH="$tmp/moved" >/dev/null
cmake --build "$tmp/example" >/dev/null
if [ "$mode" = gpu ]; then
  status=0
  "$tmp/example/check_gpu_kernel" 65536 64 64 7 || status=$?
  exit $status
fi
"$tmp/example/check_cpu_kernel" 128 8 7
"$tmp/example/check_float_kernel" 512 16 7
cmake -S "$here" -B "$tmp/from-build" -Dhla_DIR="$build" >/dev/null
cmake --build "$tmp/from-build" --target check_cpu_kernel >/dev/null
"$tmp/from-build/check_cpu_kernel" 64 4 3
