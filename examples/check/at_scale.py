"""The kernel of kernel.py at the field's sizes, for timing `hla check` (docs/perf.md): bf16
Gaussian q, k, v of shape [B, T, H, D] and the output of the same float32 recurrence (masked hla2,
decay 0.999f, queries scaled by D^-1/2, bf16 output), all batches and heads at once. Writes q.npy,
k.npy, v.npy and o.npy into OUT, which must not hold them already.

usage: python3 at_scale.py OUT [B T H D]   (default 8 65536 16 64: 2.1 GB per array, ~5 minutes)
"""

import os
import sys
import time

import numpy as np

from kernel import bf16


def main(out, batch, tokens, heads, d):
    paths = {name: os.path.join(out, f"{name}.npy") for name in "qkvo"}
    taken = [p for p in paths.values() if os.path.exists(p)]
    if taken:
        sys.exit(f"at_scale.py: {taken[0]} exists; give a directory without q.npy, k.npy, v.npy, o.npy")
    rng = np.random.default_rng(8)

    def draw():
        x = np.empty((batch, tokens, heads, d), np.float32)
        for b in range(batch):
            x[b] = bf16(rng.standard_normal((tokens, heads, d), dtype=np.float32))
        return x

    q, k, v = draw(), draw(), draw()
    scale, g = np.float32(d ** -0.5), np.float32(0.999)
    start = time.time()
    S = np.zeros((batch, heads, d, d), np.float32)
    C, G = np.zeros_like(S), np.zeros_like(S)
    o = np.zeros(q.shape, np.float32)
    for t in range(tokens):  # kernel.hla2's recurrence, over every batch and head at once
        qt, kt, vt = q[:, t] * scale, k[:, t], v[:, t]
        G = g * g * G + g * kt[..., :, None] * np.einsum("bhd,bhde->bhe", kt, C)[..., None, :]
        S = g * S + kt[..., :, None] * kt[..., None, :]
        C = g * C + qt[..., :, None] * vt[..., None, :]
        o[:, t] = np.einsum("bhd,bhde->bhe", np.einsum("bhd,bhde->bhe", qt, S), C) - np.einsum(
            "bhd,bhde->bhe", qt, G)
    print(f"kernel: {time.time() - start:.0f} s")
    for name, x in (("q", q), ("k", k), ("v", v), ("o", bf16(o))):
        np.save(paths[name], x)


if __name__ == "__main__":
    if len(sys.argv) not in (2, 6):
        sys.exit(__doc__)
    sizes = [int(x) for x in sys.argv[2:]] or [8, 65536, 16, 64]
    main(sys.argv[1], *sizes)
