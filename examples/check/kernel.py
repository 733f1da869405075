"""A recurrent masked hla2 kernel as a user writes one (numpy, float32 arithmetic on bf16 inputs,
bf16 output, FLA's [B, T, H, D] layout, queries scaled by d^-1/2), and the same kernel with the
carry dropped at one chunk boundary. Writes q, k, v and both outputs as .npy into a directory."""

import sys

import numpy as np


def bf16(x):
    """Round float32 values to bf16 (to nearest, ties to even), kept as float32."""
    bits = np.asarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    bits = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16) << 16
    return bits.astype(np.uint32).view(np.float32)


def hla2(q, k, v, gamma, scale, drop_carry_at=None):
    """o_t = q_t^T (S_t C_t - G_t): S = g S + k k^T, C = g C + q v^T, G = g^2 G + g k (k^T C_{t-1})."""
    batch, tokens, heads, d = q.shape
    g = np.float32(gamma)
    o = np.zeros(v.shape, np.float32)
    for b in range(batch):
        for h in range(heads):
            S = np.zeros((d, d), np.float32)
            C = np.zeros((d, v.shape[3]), np.float32)
            G = np.zeros_like(C)
            for t in range(tokens):
                if t == drop_carry_at:
                    S[:], C[:], G[:] = 0, 0, 0
                qt, kt, vt = q[b, t, h] * np.float32(scale), k[b, t, h], v[b, t, h]
                G = g * g * G + g * np.outer(kt, kt @ C)
                S = g * S + np.outer(kt, kt)
                C = g * C + np.outer(qt, vt)
                o[b, t, h] = qt @ (S @ C - G)
    return bf16(o)


def main(out):
    rng = np.random.default_rng(0)
    shape = (1, 512, 2, 16)  # B, T, H, D
    q, k, v = (bf16(rng.standard_normal(shape)) for _ in range(3))
    for name, x in (("q", q), ("k", k), ("v", v)):
        np.save(f"{out}/{name}.npy", x)
    np.save(f"{out}/o.npy", hla2(q, k, v, 0.999, 0.25))
    np.save(f"{out}/o_dropped_carry.npy", hla2(q, k, v, 0.999, 0.25, drop_carry_at=256))


if __name__ == "__main__":
    main(sys.argv[1])
