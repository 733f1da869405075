#!/usr/bin/env bash
# Runs everything that needs the GPU, on a machine with one (build here with CUDA, carry the
# binaries): the gpu-labelled tests (the n = 65536 cases in parallel), compute-sanitizer memcheck
# and racecheck on the test binary. Each part fits one call of a few minutes on an H200; with no
# part named, all run in this order.
#   scripts/gpu_check.sh BIN_DIR LOG_DIR [PART...]
#     BIN_DIR holds gpu_tests, check_gpu_tests and, where built, examples/user_kernel's check_gpu_kernel
#     PART: generic  (the generic kernels' gpu tests, hla check on the GPU)
#           fast     (the fast path's gpu tests, forward and backward, but [large])
#           large    (the [large] cases, n = 65536, one process each)
#           kernel   (examples/user_kernel's check_gpu_kernel, with memcheck and racecheck)
#           memcheck (all gpu tests but [large], 3 cases per property)
#           racecheck          ([exact] with 2 cases per property, the fast forward's tests)
#           racecheck-backward (the fast backward's tests)
set -uo pipefail
bin=${1:?binary directory}
logs=${2:?log directory}
shift 2
parts=("$@")
[ ${#parts[@]} -eq 0 ] && parts=(generic fast large kernel memcheck racecheck racecheck-backward)
known=" generic fast large kernel memcheck racecheck racecheck-backward "
for part in "${parts[@]}"; do
  case "$known" in
    *" $part "*) ;;
    *) echo "gpu_check.sh: unknown part '$part' (one of:${known% })" >&2; exit 2 ;;
  esac
done
wants() { case " ${parts[*]} " in *" $1 "*) return 0 ;; *) return 1 ;; esac; }
mkdir -p "$logs"
status=0
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$logs/device.txt"

# One sanitizer over some tests: its exit code and the end of its report.
sanitize() {  # tool name spec [cases per property]
  local tool=$1 name=$2 spec=$3 cases=${4:-}
  if [ -n "$cases" ]; then
    RC_PARAMS="max_success=$cases" compute-sanitizer --tool "$tool" --error-exitcode 9 "$bin/gpu_tests" "$spec" \
      -r compact >"$logs/$name.log" 2>&1
  else
    compute-sanitizer --tool "$tool" --error-exitcode 9 "$bin/gpu_tests" "$spec" -r compact >"$logs/$name.log" 2>&1
  fi
  local code=$?
  echo "$name: exit $code"
  grep -v "^========= *$" "$logs/$name.log" | head -c 2000000 >"$logs/$name.txt"
  rm "$logs/$name.log"
  tail -3 "$logs/$name.txt"
  [ $code -eq 0 ] || status=1
}

if wants generic; then
  echo "== gpu tests of the generic kernels (all but [large] and [fast])"
  "$bin/gpu_tests" "~[large]~[fast]" -r compact 2>&1 | tee "$logs/gpu_tests.log" || status=1
  echo "== hla check on the GPU (check_gpu_tests)"
  "$bin/check_gpu_tests" -r compact 2>&1 | tee "$logs/check_gpu_tests.log" || status=1
fi

if wants fast; then
  echo "== gpu tests of the fast path ([fast] but [large])"
  "$bin/gpu_tests" "[fast]~[large]" -r compact 2>&1 | tee "$logs/gpu_tests_fast.log" || status=1
fi

if wants large; then
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
fi

if wants kernel && [ -x "$bin/check_gpu_kernel" ]; then  # examples/user_kernel's CUDA kernel, built against the package
  echo "== examples/user_kernel: check_gpu_kernel 65536 64 64 7"
  /usr/bin/time -f "%e s wall, %M KB resident" "$bin/check_gpu_kernel" 65536 64 64 7 2>&1 |
    tee "$logs/check_gpu_kernel.log" || status=1
  for tool in memcheck racecheck; do  # small sizes: the kernel's indexing and its shared memory
    compute-sanitizer --tool "$tool" --error-exitcode 9 "$bin/check_gpu_kernel" 320 16 64 7 \
      >"$logs/check_gpu_kernel_$tool.log" 2>&1 || status=1
    echo "$tool: $(tail -1 "$logs/check_gpu_kernel_$tool.log")"
  done
fi

# racecheck is slow on shared-memory kernels: the exact tests with two random cases per property,
# the fast path's forward and backward tests as two parts.
if wants memcheck; then
  echo "== compute-sanitizer memcheck (all but [large], 3 cases per property)"
  sanitize memcheck sanitizer_memcheck "~[large]" 3
fi
if wants racecheck; then
  echo "== compute-sanitizer racecheck ([exact], 2 cases per property; the fast forward's tests)"
  sanitize racecheck sanitizer_racecheck "[exact],[fast]~[backward]~[large]" 2
fi
if wants racecheck-backward; then
  echo "== compute-sanitizer racecheck (the fast backward's tests)"
  sanitize racecheck sanitizer_racecheck_backward "[fast][backward]~[large]"
fi
exit $status
