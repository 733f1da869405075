#!/bin/sh
# The whole test suite under AddressSanitizer and UndefinedBehaviorSanitizer: configures and
# builds build-asan/ (CPU only, without the fuzzers, which carry their own sanitizers) and runs
# ctest there. Run scripts/setup.sh first; it installs what this needs.
set -eu
cd "$(dirname "$0")/.."
jobs=$(nproc)
cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DHLA_SANITIZE=ON -DHLA_ENABLE_CUDA=OFF \
  -DHLA_BUILD_FUZZERS=OFF >/dev/null
cmake --build build-asan -j "$jobs"
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
ctest --test-dir build-asan --output-on-failure -j "$jobs" -LE fuzz
