#pragma once
// The fast backward of heads wider than 64 (d or dv up to 128), masked hla2 and ahla, normalized or
// not, decay gamma in (0, 1] per head or hla2's ridge (gamma = 1), and the forward of such heads for
// few heads (hla2, ahla and hla3; launch_wide_forward), as a composition of first-order
// causal products: wide_backward.cu runs it on the wide heads' matrix units (launch_causal_product,
// tensor_core.cu), fast/tests/backward_test.cpp in Z/p against the definition's terms and gradients. With g
// the decay, a product sums over the past or over the future:
//   LA_p(A, B, C)_t = sum_{j <= t} g^(p (t - j)) (a_t . b_j) c_j,
//   LR_p(A, B, C)_j = sum_{t >= j} g^(p (t - j)) (a_j . b_t) c_t.
// The forward is two products (tensor_core.cu's two-pass forms):
//   hla2  U = LA_1(Q, K, K) (+ ridge Q),  O = LA_2(Q, U, V);
//   ahla  X = LA_1(Q, K, V),              O = LA_1(Q, K, X);
// and the backward of O = LA_p(A, B, C) given dO is
//   dA = LA_p(dO, C, B),  dB = LR_p(C, dO, A),  dC = LR_p(B, A, dO),
// so that, the forward's intermediate recomputed by its product,
//   hla2  dU = LR_2(V, dO, Q),  dV = LR_2(U, Q, dO),
//         dQ = LA_2(dO, V, U) + LA_1(dU, K, K) (+ ridge dU),  dK = LR_1(K, dU, Q) + LR_1(K, Q, dU);
//   ahla  dX = LR_1(K, Q, dO),  dV = LR_1(K, Q, dX),
//         dQ = LA_1(dO, X, K) + LA_1(dX, V, K),  dK = LR_1(X, dO, Q) + LR_1(V, dX, Q).
// Normalized, den is the same operator with V := a column of ones, so the backward of <dO, num> +
// <dd, den> (the readouts' adjoints) is the above with V := [V, 1] and dO := [dO, dd]: each product
// whose inner dimension is the value's gains that column's term, a product with a (1 x 1) inner
// dimension (operands 8 wide: the column and zeros), and with ahla x = X 1 = LA_1(Q, K, 1):
//   hla2  dQ += LA_2(dd, 1, U),  dU += LR_2(1, dd, Q);
//   ahla  dx = LR_1(K, Q, dd),  dQ += LA_1(dd, x, K) + LA_1(dx, 1, K),
//         dK += LR_1(x, dd, Q) + LR_1(1, dx, Q).
// A gradient's terms are added into it by the products that give them, in the order written.
// hla3 (the forward only, wide_forward): Z = LA_1(Q, K, K) (hla2's U), R = LA_1(Q, K, V) (ahla's X), O =
// LA_3(Q, Z, R); normalized r = LA_1(Q, K, 1), den = LA_3(Q, Z, r).

#include "hla/reference/variant.hpp"

namespace hla::fast::gpu::detail::wide {

// A Run (an engine of products) gives, all const:
//   key_dim(), value_dim(), normalized(), ridge() (whether hla2's ridge is not zero), vector_columns (the
//     columns of a vector's operand);
//   Rows: a source of rows: rows(Input) (d_den one column), ones() (a column of ones), of(Floats);
//   Operand: a product's operand: input(Input) (q, k, v, d_num as they are), rows_of(Rows, columns) (rows
//     rounded to bf16 and zero-padded);
//   Floats: rows of float32 sums, floats(columns); Target: where sums go, target(Floats&) or gradient(q,
//     k or v) (dq, dk, dv);
//   product(Over, p, a, b, c, Target, add): LA_p (Over::past) or LR_p (Over::future) of (a, b, c) into
//     the target, or added to it when `add`; rounded(Over, p, a, b, c): the same product's sums rounded
//     to bf16 as an Operand (c's columns), the rounding rows_of would make of them; add_ridge(Target,
//     Rows): target += ridge rows;
//   the forward's (wide_forward) outputs(p, a, b, c, den): num = LA_p(a, b, c) as the forward's outputs,
//     normalized (den not null: Floats whose column 0 is den) divided by den or with den as the terms.
enum class Input { q, k, v, d_num, d_den };
enum class Over { past, future };

// hla2's U = LA_1(Q, K, K) (+ ridge Q), rounded once for its uses.
template <class Run>
auto hla2_u(const Run& run) {
  const auto q = run.input(Input::q), k = run.input(Input::k);
  if (!run.ridge()) return run.rounded(Over::past, 1, q, k, k);
  auto sums = run.floats(run.key_dim());
  run.product(Over::past, 1, q, k, k, run.target(sums), false);
  run.add_ridge(run.target(sums), run.rows(Input::q));
  return run.rows_of(run.of(sums), run.key_dim());
}

// The forward of `variant` (hla2, ahla or hla3) on `run`: num = LA_p(Q, B, C) and, normalized, den =
// LA_p(Q, B, c) with the header's B, C, c, each intermediate rounded once for its uses.
template <class Run>
void wide_forward(Variant variant, const Run& run) {
  constexpr Over past = Over::past;
  const auto q = run.input(Input::q), k = run.input(Input::k), v = run.input(Input::v);
  const auto ones = [&] { return run.rows_of(run.ones(), Run::vector_columns); };
  // num = LA_p(Q, b, c), normalized divided by den = LA_p(Q, b, c of the ones)
  const auto outputs = [&](int p, const auto& b, const auto& c, const auto& ones_c) {
    if (!run.normalized()) return run.outputs(p, q, b, c, nullptr);
    auto den = run.floats(Run::vector_columns);
    run.product(past, p, q, b, ones_c(), run.target(den), false);
    run.outputs(p, q, b, c, &den);
  };
  switch (variant) {
    case Variant::hla2: {
      const auto u = hla2_u(run);
      return outputs(2, u, v, ones);
    }
    case Variant::ahla:
      return outputs(1, k, run.rounded(past, 1, q, k, v), [&] { return run.rounded(past, 1, q, k, ones()); });
    default: {  // hla3
      const auto z = run.rounded(past, 1, q, k, k);
      return outputs(3, z, run.rounded(past, 1, q, k, v), [&] { return run.rounded(past, 1, q, k, ones()); });
    }
  }
}

// hla2: dq, dk, dv as the header's.
template <class Run>
void hla2_backward(const Run& run) {
  constexpr Over past = Over::past, future = Over::future;
  const int d = run.key_dim(), vector = Run::vector_columns;
  const auto q = run.input(Input::q), k = run.input(Input::k), v = run.input(Input::v),
             d_num = run.input(Input::d_num);
  const auto ones = [&] { return run.rows_of(run.ones(), vector); };
  const auto d_den = [&] { return run.rows_of(run.rows(Input::d_den), vector); };
  const auto u = hla2_u(run);
  // dQ = LA_2(dO, V, U) (+ LA_2(dd, 1, U)); dV = LR_2(U, Q, dO)
  run.product(past, 2, d_num, v, u, run.gradient(Input::q), false);
  if (run.normalized()) run.product(past, 2, d_den(), ones(), u, run.gradient(Input::q), true);
  run.product(future, 2, u, q, d_num, run.gradient(Input::v), false);
  // dU = LR_2(V, dO, Q) (+ LR_2(1, dd, Q)), rounded once for its uses; its float32 sums where there are
  // two terms or the ridge's term reads them
  const bool du_sums_read = run.normalized() || run.ridge();
  auto du_sums = run.floats(du_sums_read ? d : 1);
  const auto du = [&] {
    if (!du_sums_read) return run.rounded(future, 2, v, d_num, q);
    run.product(future, 2, v, d_num, q, run.target(du_sums), false);
    if (run.normalized()) run.product(future, 2, ones(), d_den(), q, run.target(du_sums), true);
    return run.rows_of(run.of(du_sums), d);
  }();
  // dQ += LA_1(dU, K, K) (+ ridge dU)
  run.product(past, 1, du, k, k, run.gradient(Input::q), true);
  if (run.ridge()) run.add_ridge(run.gradient(Input::q), run.of(du_sums));
  // dK = LR_1(K, dU, Q) + LR_1(K, Q, dU)
  run.product(future, 1, k, du, q, run.gradient(Input::k), false);
  run.product(future, 1, k, q, du, run.gradient(Input::k), true);
}

// ahla: dq, dk, dv as the header's.
template <class Run>
void ahla_backward(const Run& run) {
  constexpr Over past = Over::past, future = Over::future;
  const int vector = Run::vector_columns;
  const bool normalized = run.normalized();
  const auto q = run.input(Input::q), k = run.input(Input::k), v = run.input(Input::v),
             d_num = run.input(Input::d_num);
  const auto ones = [&] { return run.rows_of(run.ones(), vector); };
  const auto d_den = [&] { return run.rows_of(run.rows(Input::d_den), vector); };
  // X (normalized, x), each rounded once for its uses
  {  // dQ = LA_1(dO, X, K) (+ LA_1(dd, x, K)); dK = LR_1(X, dO, Q) (+ LR_1(x, dd, Q))
    const auto x = run.rounded(past, 1, q, k, v);
    run.product(past, 1, d_num, x, k, run.gradient(Input::q), false);
    run.product(future, 1, x, d_num, q, run.gradient(Input::k), false);
  }
  if (normalized) {
    const auto x = run.rounded(past, 1, q, k, ones());
    run.product(past, 1, d_den(), x, k, run.gradient(Input::q), true);
    run.product(future, 1, x, d_den(), q, run.gradient(Input::k), true);
  }
  {  // dX = LR_1(K, Q, dO); dV = LR_1(K, Q, dX); dK += LR_1(V, dX, Q); dQ += LA_1(dX, V, K)
    const auto dx = run.rounded(future, 1, k, q, d_num);
    run.product(future, 1, k, q, dx, run.gradient(Input::v), false);
    run.product(future, 1, v, dx, q, run.gradient(Input::k), true);
    run.product(past, 1, dx, v, k, run.gradient(Input::q), true);
  }
  if (normalized) {  // dx = LR_1(K, Q, dd); dK += LR_1(1, dx, Q); dQ += LA_1(dx, 1, K)
    const auto dx = run.rounded(future, 1, k, q, d_den());
    run.product(future, 1, ones(), dx, q, run.gradient(Input::k), true);
    run.product(past, 1, dx, ones(), k, run.gradient(Input::q), true);
  }
}

// The backward of `ahla` or hla2 on `run`.
template <class Run>
void wide_backward(bool ahla, const Run& run) {
  ahla ? ahla_backward(run) : hla2_backward(run);
}

}  // namespace hla::fast::gpu::detail::wide
