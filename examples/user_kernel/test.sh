#!/bin/sh
# ctest: installs the build into a temporary prefix, moves the prefix (the package is
# relocatable), builds this project against it and runs it; then builds it against the build
# folder's own export. Removes only the temporary folder it made.
# usage: test.sh BUILD_DIR
set -eu
build=$1
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cmake --install "$build" --prefix "$tmp/installed" >/dev/null
mv "$tmp/installed" "$tmp/moved"
cmake -S "$here" -B "$tmp/example" -DCMAKE_PREFIX_PATH="$tmp/moved" >/dev/null
cmake --build "$tmp/example" >/dev/null
"$tmp/example/check_cpu_kernel" 128 8 7
"$tmp/example/check_float_kernel" 512 16 7
cmake -S "$here" -B "$tmp/from-build" -Dhla_DIR="$build" >/dev/null
cmake --build "$tmp/from-build" >/dev/null
"$tmp/from-build/check_cpu_kernel" 64 4 3
