"""Higher-order Linear Attention: check your kernel's output against the exact operator.

    import hla
    r = hla.check(o, q, k, v, variant="hla2", decay=0.999, scale=0.25, precision="bf16", layout="bthd")
    assert r.passed, r.summary()
    g = hla.check_grad(d_o, dq, dk, dv, q, k, v, variant="hla2", decay=0.999, scale=0.25, precision="bf16")
    assert g.passed, g.summary()

Arrays are numpy arrays or anything numpy can view (a CPU torch tensor: t.numpy()); they are read
as float64 (float32 and float16 convert exactly). docs/check.md derives the criteria.
"""

import numpy as np

from ._hla import CheckResult, GradientCheckResult, HlaError, check, check_grad, reference  # noqa: F401
from . import testing  # noqa: F401

__all__ = ["check", "check_grad", "reference", "check_causal", "CheckResult", "GradientCheckResult", "HlaError",
           "testing"]

_TOKEN_AXIS = {"nd": 0, "bthd": 1, "bhtd": 2}


def check_causal(fn, q, k, v, layout="nd", positions=None, seed=0):
    """Calls fn(q, k, v) and again with every input changed after position t, for each t in
    positions (default: the first, the middle and the last but one token); the outputs up to t
    must stay bit for bit the same. Returns True, or raises AssertionError naming t and the first
    output that changed."""
    if layout not in _TOKEN_AXIS:
        raise ValueError(f"layout: '{layout}' is not one of nd, bthd, bhtd")
    axis = _TOKEN_AXIS[layout]
    q, k, v = (np.array(x) for x in (q, k, v))
    n = q.shape[axis]
    if positions is None:
        positions = sorted({0, n // 2, max(n - 2, 0)})
    rng = np.random.default_rng(seed)
    base = np.asarray(fn(q, k, v))
    for t in positions:
        if not 0 <= t < n:
            raise ValueError(f"positions: {t} is not a token of a sequence of {n}")
        changed = []
        for x in (q, k, v):
            y = x.copy()
            later = [slice(None)] * y.ndim
            later[axis] = slice(t + 1, None)
            y[tuple(later)] = rng.standard_normal(y[tuple(later)].shape).astype(y.dtype)
            changed.append(y)
        out = np.asarray(fn(*changed))
        upto = [slice(None)] * out.ndim
        upto[axis] = slice(0, t + 1)
        a, b = base[tuple(upto)], out[tuple(upto)]
        same = (a == b) | (np.isnan(a) & np.isnan(b))
        if not same.all():
            where = tuple(int(i) for i in np.argwhere(~same)[0])
            raise AssertionError(
                f"not causal: changing the inputs after token {t} changed the output at {where} "
                f"(from {a[where]!r} to {b[where]!r})")
    return True
