"""The Python module: hla.check on a numpy kernel and its faulty twins, hla.reference against a
naive masked matrix form, assert_hla_close, check_causal, and bad input."""

import json
import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "examples", "check"))
import kernel  # noqa: E402  (examples/check/kernel.py: the README's example kernel)

import hla  # noqa: E402
from hla.testing import assert_hla_close  # noqa: E402

SEED = int(os.environ.get("HLA_PYTHON_SEED", np.random.SeedSequence().entropy % 2**32))
print(f"python test seed {SEED} (HLA_PYTHON_SEED={SEED} reruns it)")

OPTIONS = dict(variant="hla2", decay=0.999, scale=0.25, precision="bf16", layout="bthd")


@pytest.fixture
def inputs():
    rng = np.random.default_rng(SEED)
    shape = (1, 128, 2, 16)
    return tuple(kernel.bf16(rng.standard_normal(shape)) for _ in range(3))


def test_a_correct_kernel_passes(inputs):
    q, k, v = inputs
    r = hla.check(kernel.hla2(q, k, v, 0.999, 0.25), q, k, v, **OPTIONS)
    assert r.passed, r.summary()
    assert r.sound and r.tight and bool(r)
    assert r.first_failure is None
    assert json.loads(r.to_json())["verdict"] == "pass"


def test_a_dropped_carry_fails_where_it_happens(inputs):
    q, k, v = inputs
    r = hla.check(kernel.hla2(q, k, v, 0.999, 0.25, drop_carry_at=64), q, k, v, **OPTIONS)
    assert not r.passed
    assert r.first_departure["token"] == 64
    assert r.summary().startswith("FAIL")
    assert r.diagnosis["matches"] == []


def test_a_missing_scale_is_diagnosed(inputs):
    q, k, v = inputs
    r = hla.check(kernel.hla2(q, k, v, 0.999, 1.0), q, k, v, **OPTIONS)
    assert not r.passed
    assert r.diagnosis["matches"][0] == "no-scale"
    assert {c["id"] for c in r.diagnosis["candidates"]} >= {"no-scale", "sec-4.3", "decay-once"}


def test_the_reference_is_the_masked_matrix_form():
    rng = np.random.default_rng(SEED)
    q, k, v = (rng.integers(-3, 4, size=(6, 3)).astype(np.float64) for _ in range(3))
    w = np.tril(q @ k.T)  # W = L . Q K^T
    expected = np.tril(w @ w.T) @ v  # [(W W^T) . L] V: small integers, exact in float64
    for scalar in ("exact", "mpfr", "f64"):
        assert np.array_equal(hla.reference(q, k, v, variant="hla2", scalar=scalar), expected)


def test_assert_hla_close_raises_with_the_summary(inputs):
    q, k, v = inputs
    assert_hla_close(kernel.hla2(q, k, v, 0.999, 0.25), q, k, v, **OPTIONS)
    with pytest.raises(AssertionError, match="FAIL"):
        assert_hla_close(kernel.hla2(q, k, v, 0.999, 0.25, drop_carry_at=32), q, k, v, **OPTIONS)


def test_check_causal(inputs):
    q, k, v = inputs
    assert hla.check_causal(lambda q, k, v: kernel.hla2(q, k, v, 0.999, 0.25), q, k, v, layout="bthd")

    def peeks(q, k, v):  # uses the next token's value: not causal
        o = kernel.hla2(q, k, v, 0.999, 0.25)
        o[:, :-1] += 1e-3 * v[:, 1:]
        return o

    with pytest.raises(AssertionError, match="not causal"):
        hla.check_causal(peeks, q, k, v, layout="bthd")


def test_bad_input_is_a_value_error(inputs):
    q, k, v = inputs
    o = kernel.hla2(q, k, v, 0.999, 0.25)
    with pytest.raises(ValueError, match="does not match"):
        hla.check(o[:, :64], q, k, v, **OPTIONS)
    with pytest.raises(ValueError, match="not a bf16 value"):
        hla.check(o, q + np.float32(1e-3), k, v, **OPTIONS)
    with pytest.raises(ValueError, match="precision"):
        hla.check(o, q, k, v, **{**OPTIONS, "precision": "f8"})
    bad = o.copy()
    bad[0, 3, 1, 2] = np.nan
    with pytest.raises(ValueError, match=r"entry \[0, 3, 1, 2\] is NaN"):
        hla.check(bad, q, k, v, **OPTIONS)


def linear_backward(q, k, v, d_o, gamma, scale, late=False):
    """A user's float32 backward of masked linear attention with decay (S_t = g S + k_t v_t^T,
    o_t = S_t^T q_t, q scaled first); late: dK, dV read the adjoint before its own token's term."""
    q, k, v, d_o = (x.astype(np.float32) for x in (q, k, v, d_o))
    g, n = np.float32(gamma), q.shape[0]
    states, s = [], np.zeros((k.shape[1], v.shape[1]), np.float32)
    for t in range(n):
        s = g * s + np.outer(k[t], v[t])
        states.append(s)
    dq, dk, dv = np.zeros_like(q), np.zeros_like(k), np.zeros_like(v)
    a = np.zeros_like(s)
    for t in reversed(range(n)):
        before = g * a
        a = before + np.outer(q[t] * np.float32(scale), d_o[t])
        read = before if late else a
        dq[t] = states[t] @ d_o[t] * np.float32(scale)
        dk[t], dv[t] = read @ v[t], read.T @ k[t]
    return dq, dk, dv


def normalized_linear_backward(q, k, v, d_o, gamma, eps, scale, drop_den=False):
    """A user's float32 backward of normalized linear attention with decay (o_t = num_t / (den_t +
    eps), num_t = S_t^T q_t, den_t = z_t . q_t, z_t = g z + k_t); drop_den: the denominator treated
    as a constant (its adjoint -(dO_t . num_t) / (den_t + eps)^2 left out)."""
    q, k, v, d_o = (x.astype(np.float32) for x in (q, k, v, d_o))
    g, n = np.float32(gamma), q.shape[0]
    q = q * np.float32(scale)
    states, sums = [], []
    s, z = np.zeros((k.shape[1], v.shape[1]), np.float32), np.zeros(k.shape[1], np.float32)
    for t in range(n):
        s, z = g * s + np.outer(k[t], v[t]), g * z + k[t]
        states.append(s)
        sums.append(z)
    dq, dk, dv = np.zeros_like(q), np.zeros_like(k), np.zeros_like(v)
    a, b = np.zeros_like(s), np.zeros_like(z)
    for t in reversed(range(n)):
        num, den = states[t].T @ q[t], sums[t] @ q[t] + np.float32(eps)
        c_num = d_o[t] / den
        c_den = np.float32(0) if drop_den else -(d_o[t] @ num) / (den * den)
        a, b = g * a + np.outer(q[t], c_num), g * b + q[t] * c_den
        dq[t] = (states[t] @ c_num + sums[t] * c_den) * np.float32(scale)
        dk[t], dv[t] = a @ v[t] + b, a.T @ k[t]
    return dq, dk, dv


def test_check_grad_on_a_normalized_operator_names_a_dropped_denominator_adjoint():
    rng = np.random.default_rng(SEED)
    q, k = (np.abs(kernel.bf16(rng.standard_normal((64, 16)))) for _ in range(2))
    v, d_o = (kernel.bf16(rng.standard_normal((64, 16))) for _ in range(2))
    options = dict(variant="linear", normalize=True, eps="1/1024", decay=0.99, scale=0.25, precision="bf16")
    r = hla.check_grad(d_o, *normalized_linear_backward(q, k, v, d_o, 0.99, 2.0**-10, 0.25), q, k, v, **options)
    assert r.passed, r.summary()
    assert r.unbounded == 0
    bad = hla.check_grad(d_o, *normalized_linear_backward(q, k, v, d_o, 0.99, 2.0**-10, 0.25, drop_den=True), q, k, v,
                         **options)
    assert not bad.passed and not bad.sound
    assert bad.diagnosis["candidates"][0]["id"] == "den-adjoint-dropped", bad.summary()
    assert "den-adjoint-dropped" in bad.diagnosis["matches"]


def test_check_grad_passes_a_correct_backward_and_fails_a_late_adjoint():
    rng = np.random.default_rng(SEED)
    q, k, v, d_o = (kernel.bf16(rng.standard_normal((64, 16))) for _ in range(4))
    options = dict(variant="linear", decay=0.99, scale=0.25, precision="bf16")
    r = hla.check_grad(d_o, *linear_backward(q, k, v, d_o, 0.99, 0.25), q, k, v, **options)
    assert r.passed, r.summary()
    assert json.loads(r.to_json())["verdict"] == "pass"
    bad = hla.check_grad(d_o, *linear_backward(q, k, v, d_o, 0.99, 0.25, late=True), q, k, v, **options)
    assert not bad.passed and not bad.sound
    assert bad.first_failure["gradient"] == "dK"
    assert bad.diagnosis["matches"] == ["adjoint-late"], bad.summary()
    assert json.loads(bad.to_json())["diagnosis"]["matches"] == ["adjoint-late"]
    assert r.diagnosis == {"matches": [], "candidates": []}
    with pytest.raises(ValueError, match="dO and dV have the values' shape"):
        hla.check_grad(d_o[:, :8], *linear_backward(q, k, v, d_o, 0.99, 0.25), q, k, v, **options)
