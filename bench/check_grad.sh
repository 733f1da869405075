#!/usr/bin/env bash
# hla check --grad's time with its runs on the CPU and on the GPU, side by side (docs/perf.md,
# "hla check --grad"). One head of float32 Gaussian inputs (numpy, seed 7; k / 8), tiled to H heads
# in the bthd layout; the candidate is that head's gradients by the toolkit's GPU streaming backward
# in float32 (hla eval --impl gpu-streaming --scalar f32 --grad), tiled likewise. Every head costs
# the check as much as a distinct one would.
#   bench/check_grad.sh HLA N H D WORK_DIR [operator options, e.g. --variant hla2 --decay 0.999]
set -euo pipefail
hla=${1:?the hla binary}
n=${2:?tokens}
heads=${3:?heads}
d=${4:?head size}
work=${5:?a directory for the arrays}
shift 5
options=("$@")
[ ${#options[@]} -gt 0 ] || options=(--variant hla2)
mkdir -p "$work"
"${PYTHON:-python3}" - "$n" "$d" "$work" <<'EOF'
import sys
import numpy as np
n, d, work = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
rng = np.random.default_rng(7)
for name, scale in (("q", 1.0), ("k", 0.125), ("v", 1.0), ("do", 1.0)):
    np.save(f"{work}/{name}.npy", (rng.standard_normal((n, d)) * scale).astype(np.float32))
EOF
"$hla" eval "${options[@]}" --impl gpu-streaming --scalar f32 --q "$work/q.npy" --k "$work/k.npy" \
  --v "$work/v.npy" --out "$work/o.npy" --grad "$work/do.npy" --out-dq "$work/dq.npy" --out-dk "$work/dk.npy" \
  --out-dv "$work/dv.npy" >/dev/null
"${PYTHON:-python3}" - "$heads" "$work" <<'EOF'
import sys
import numpy as np
heads, work = int(sys.argv[1]), sys.argv[2]
for name in ("q", "k", "v", "do", "dq", "dk", "dv"):
    x = np.load(f"{work}/{name}.npy")
    np.save(f"{work}/{name}_bthd.npy", np.ascontiguousarray(np.broadcast_to(x[None, :, None, :], (1, x.shape[0], heads, x.shape[1]))))
EOF
for device in gpu cpu; do
  echo "== --device $device: n = $n, $heads heads, d = dv = $d, ${options[*]}"
  /usr/bin/time -f "%e s wall, %U s user, %M KB resident" "$hla" check "${options[@]}" --precision f32 \
    --layout bthd --q "$work/q_bthd.npy" --k "$work/k_bthd.npy" --v "$work/v_bthd.npy" \
    --grad "$work/do_bthd.npy" --dq "$work/dq_bthd.npy" --dk "$work/dk_bthd.npy" --dv "$work/dv_bthd.npy" \
    --device "$device" --progress 2>&1 | grep -v "^tight\|^diagnosis" || true
done
