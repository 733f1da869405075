#!/bin/sh
# The whole test suite under AddressSanitizer and UndefinedBehaviorSanitizer: configures and
# builds build-asan/ (CPU only, without the fuzzers, which carry their own sanitizers) and runs
# ctest there. Run scripts/setup.sh first; it installs what this needs.
set -eu
cd "$(dirname "$0")/.."
jobs=$(nproc)
# The portable target (HLA_MARCH empty): the sanitizers check the toolkit's code, and GCC 12 at -O2
# misreports its own AVX-512 intrinsics inside Eigen as uninitialized (GCC bug 105593).
# -Og -g1 (line tables: stack traces keep file and line): the instrumented build takes 0.58x the
# compile time of -O1 -g1 and its ctest no longer (docs/perf.md, "CI's time"), where the build
# dominates CI.
cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-Og -g1 -DNDEBUG" \
  -DHLA_SANITIZE=ON -DHLA_ENABLE_CUDA=OFF -DHLA_BUILD_FUZZERS=OFF -DHLA_MARCH= >/dev/null
cmake --build build-asan -j "$jobs"
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
# A quarter of each property's cases (testing/property.hpp): the sanitizers look for memory errors and
# undefined behaviour on each code path, which those reach; the release suite runs every case.
export HLA_CASES_DIVISOR=4
ctest --test-dir build-asan --output-on-failure -j "$jobs" -LE fuzz
