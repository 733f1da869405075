"""The kernel of kernel.py at the field's sizes, for timing `hla check` (docs/perf.md): bf16
Gaussian q, k, v of shape [B, T, H, D] and the output of the same float32 recurrence (masked hla2,
decay 0.999f, queries scaled by D^-1/2, bf16 output), all batches and heads at once. Writes q.npy,
k.npy, v.npy and o.npy into OUT, which must not hold them already. With a mistake, o.npy is the
output of a subtly wrong kernel instead (docs/check.md, "Shown to catch"):
  decay-once      G = g G + g k (k^T C): the decay exponent of G off by one
  dropped-carry   S, C and G reset at token T/2: the carry lost at one chunk boundary
  no-scale-head   head 5 without the query scale

usage: python3 at_scale.py OUT [B T H D] [--mistake M]   (default 8 65536 16 64: 2.1 GB per array)
"""

import os
import sys
import time

import numpy as np

from kernel import bf16


MISTAKES = ("decay-once", "dropped-carry", "no-scale-head")


def main(out, batch, tokens, heads, d, mistake=None):
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
    scales = np.full((1, heads, 1), scale, np.float32)
    if mistake == "no-scale-head":
        scales[0, 5 % heads, 0] = 1
    age = g if mistake == "decay-once" else g * g
    start = time.time()
    S = np.zeros((batch, heads, d, d), np.float32)
    C, G = np.zeros_like(S), np.zeros_like(S)
    o = np.zeros(q.shape, np.float32)
    for t in range(tokens):  # kernel.hla2's recurrence, over every batch and head at once
        if mistake == "dropped-carry" and t == tokens // 2:
            S[:], C[:], G[:] = 0, 0, 0
        qt, kt, vt = q[:, t] * scales, k[:, t], v[:, t]
        G = age * G + g * kt[..., :, None] * np.einsum("bhd,bhde->bhe", kt, C)[..., None, :]
        S = g * S + kt[..., :, None] * kt[..., None, :]
        C = g * C + qt[..., :, None] * vt[..., None, :]
        o[:, t] = np.einsum("bhd,bhde->bhe", np.einsum("bhd,bhde->bhe", qt, S), C) - np.einsum(
            "bhd,bhde->bhe", qt, G)
    print(f"kernel: {time.time() - start:.0f} s")
    for name, x in (("q", q), ("k", k), ("v", v), ("o", bf16(o))):
        np.save(paths[name], x)


if __name__ == "__main__":
    args = sys.argv[1:]
    wrong = None
    if "--mistake" in args:
        i = args.index("--mistake")
        if i + 1 >= len(args) or args[i + 1] not in MISTAKES:
            sys.exit(f"at_scale.py: --mistake needs one of {', '.join(MISTAKES)}")
        wrong = args[i + 1]
        del args[i:i + 2]
    if len(args) not in (1, 5):
        sys.exit(__doc__)
    sizes = [int(x) for x in args[1:]] or [8, 65536, 16, 64]
    main(args[0], *sizes, mistake=wrong)
