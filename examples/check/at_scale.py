"""The kernel of kernel.py at the field's sizes, for timing `hla check` (docs/perf.md): bf16
Gaussian q, k, v of shape [B, T, H, D] and the output of the same float32 recurrence (masked hla2,
decay 0.999f unless --decay says, queries scaled by D^-1/2, bf16 output), all batches and heads at once. Writes q.npy,
k.npy, v.npy and o.npy into OUT, which must not hold them already. With a mistake, o.npy is the
output of a subtly wrong kernel instead (docs/check.md, "Shown to catch"):
  decay-once      G = g G + g k (k^T C): the decay exponent of G off by one
  dropped-carry   S, C and G reset at token T/2: the carry lost at one chunk boundary
  no-scale-head   head 5 without the query scale

  --decay G       the decay (default 0.999; 1: none)
  --torch         run the recurrence with PyTorch on the GPU (float32, no TF32) instead of numpy

usage: python3 at_scale.py OUT [B T H D] [--mistake M] [--decay G] [--torch]
       (default 8 65536 16 64: 2.1 GB per array)
"""

import os
import sys
import time

import numpy as np

from kernel import bf16


MISTAKES = ("decay-once", "dropped-carry", "no-scale-head")


def recurrence(q, k, v, scales, g, age, drop_at, xp, einsum):
    """kernel.hla2's recurrence over every batch and head at once, in the array module xp."""
    tokens = q.shape[1]
    S = xp.zeros_like(k[:, 0, :, :, None] * k[:, 0, :, None, :])  # [B, H, D, D], on q's device
    C, G = xp.zeros_like(S), xp.zeros_like(S)
    o = xp.zeros_like(q)
    for t in range(tokens):
        if t == drop_at:
            S, C, G = xp.zeros_like(S), xp.zeros_like(S), xp.zeros_like(S)
        qt, kt, vt = q[:, t] * scales, k[:, t], v[:, t]
        G = age * G + g * kt[..., :, None] * einsum("bhd,bhde->bhe", kt, C)[..., None, :]
        S = g * S + kt[..., :, None] * kt[..., None, :]
        C = g * C + qt[..., :, None] * vt[..., None, :]
        o[:, t] = einsum("bhd,bhde->bhe", einsum("bhd,bhde->bhe", qt, S), C) - einsum("bhd,bhde->bhe", qt, G)
    return o


def on_gpu(q, k, v, scales, g, age, drop_at):
    """The recurrence with PyTorch on the GPU in float32 (TF32 off), back as numpy."""
    import torch
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    dev = torch.device("cuda")
    to = lambda x: torch.from_numpy(x).to(dev)
    o = recurrence(to(q), to(k), to(v), to(scales), float(g), float(age), drop_at, torch, torch.einsum)
    torch.cuda.synchronize()
    return o.cpu().numpy()


def main(out, batch, tokens, heads, d, mistake=None, decay=0.999, use_torch=False):
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
    scale, g = np.float32(d ** -0.5), np.float32(decay)
    scales = np.full((1, heads, 1), scale, np.float32)
    if mistake == "no-scale-head":
        scales[0, 5 % heads, 0] = 1
    age = g if mistake == "decay-once" else g * g
    drop_at = tokens // 2 if mistake == "dropped-carry" else None
    start = time.time()
    if use_torch:
        o = on_gpu(q, k, v, scales, g, age, drop_at)
    else:
        o = recurrence(q, k, v, scales, g, age, drop_at, np, np.einsum)
    print(f"kernel: {time.time() - start:.0f} s")
    for name, x in (("q", q), ("k", k), ("v", v), ("o", bf16(o))):
        np.save(paths[name], x)


if __name__ == "__main__":
    args = sys.argv[1:]
    options = {}
    for flag, check in (("--mistake", lambda x: x in MISTAKES), ("--decay", lambda x: 0 < float(x) <= 1)):
        if flag in args:
            i = args.index(flag)
            try:
                ok = i + 1 < len(args) and check(args[i + 1])
            except ValueError:
                ok = False
            if not ok:
                sys.exit(f"at_scale.py: {flag} needs " +
                         (f"one of {', '.join(MISTAKES)}" if flag == "--mistake" else "a decay in (0, 1]"))
            options[flag[2:]] = args[i + 1]
            del args[i:i + 2]
    use_torch = "--torch" in args
    args = [a for a in args if a != "--torch"]
    if len(args) not in (1, 5):
        sys.exit(__doc__)
    sizes = [int(x) for x in args[1:]] or [8, 65536, 16, 64]
    main(args[0], *sizes, mistake=options.get("mistake"), decay=float(options.get("decay", 0.999)),
         use_torch=use_torch)
