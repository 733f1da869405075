#!/usr/bin/env bash
# Runs everything that needs the GPU, on a machine with one (build here with CUDA, carry the
# binaries): the gpu-labelled tests (the n = 65536 cases in parallel), compute-sanitizer memcheck
# and racecheck on the test binary.
#   scripts/gpu_check.sh BIN_DIR LOG_DIR      (BIN_DIR holds gpu_tests, check_gpu_tests, hla, hla_bench_gpu
#                                             and, where built, examples/user_kernel's check_gpu_kernel)
set -uo pipefail
bin=${1:?binary directory}
logs=${2:?log directory}
mkdir -p "$logs"
status=0
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$logs/device.txt"

echo "== gpu tests (all but [large])"
"$bin/gpu_tests" "~[large]" -r compact 2>&1 | tee "$logs/gpu_tests.log" || status=1

echo "== hla check on the GPU (check_gpu_tests)"
"$bin/check_gpu_tests" -r compact 2>&1 | tee "$logs/check_gpu_tests.log" || status=1

echo "== gpu tests [large] (n = 65536, d = dv = 64), one process each"
large=$(mktemp -d)
"$bin/gpu_tests" --list-test-names-only "[large]" | grep -v '^$' >"$large/names.txt"
while read -r name; do  # passed: exit 0 and one test case run (a name that matches none runs nothing)
  (log="$large/$(echo "$name" | md5sum | cut -c1-8).log"
    "$bin/gpu_tests" "$name" -r compact >"$log" 2>&1 && grep -q "^Passed 1 test case" "$log" &&
    echo "passed: $name" || { echo "FAILED: $name"; echo "failed: $name" >>"$log"; }) &
done <"$large/names.txt"
wait
cat "$large"/*.log >"$logs/gpu_tests_large.log"
grep -q "failed" "$logs/gpu_tests_large.log" && status=1

if [ -x "$bin/check_gpu_kernel" ]; then  # examples/user_kernel's CUDA kernel, built against the package
  echo "== examples/user_kernel: check_gpu_kernel 65536 64 64 7"
  /usr/bin/time -f "%e s wall, %M KB resident" "$bin/check_gpu_kernel" 65536 64 64 7 2>&1 |
    tee "$logs/check_gpu_kernel.log" || status=1
  for tool in memcheck racecheck; do  # small sizes: the kernel's indexing and its shared memory
    compute-sanitizer --tool "$tool" --error-exitcode 9 "$bin/check_gpu_kernel" 320 16 64 7 \
      >"$logs/check_gpu_kernel_$tool.log" 2>&1 || status=1
    echo "$tool: $(tail -1 "$logs/check_gpu_kernel_$tool.log")"
  done
fi

# racecheck is slow on shared-memory kernels: the exact tests and the fast path, two random cases per property.
echo "== compute-sanitizer memcheck (all but [large], 3 cases per property), racecheck ([exact] and [fast], 2 cases)"
for tool in memcheck racecheck; do
  if [ $tool = memcheck ]; then cases=3 spec="~[large]"; else cases=2 spec="[exact],[fast]~[large]"; fi
  RC_PARAMS="max_success=$cases" compute-sanitizer --tool "$tool" --error-exitcode 9 "$bin/gpu_tests" "$spec" \
    -r compact >"$logs/sanitizer_$tool.log" 2>&1
  code=$?
  echo "$tool: exit $code"
  grep -v "^========= *$" "$logs/sanitizer_$tool.log" | head -c 2000000 >"$logs/sanitizer_$tool.txt"
  rm "$logs/sanitizer_$tool.log"
  tail -3 "$logs/sanitizer_$tool.txt"
  [ $code -eq 0 ] || status=1
done
exit $status
