#pragma once
// The fast backward of heads wider than 64 (d or dv up to 128), masked hla2 and ahla, normalized or
// not, decay gamma in (0, 1] per head or hla2's ridge (gamma = 1), as a composition of first-order
// causal products: wide_backward.cu runs it on the wide heads' matrix units (launch_causal_product,
// tensor_core.cu), fast/tests/backward_test.cpp in Z/p against the definition's gradients. With g the
// decay and
//   LA_p(A, B, C)_t = sum_{j <= t} g^(p (t - j)) (a_t . b_j) c_j,
//   LR_p(A, B, C)_j = sum_{t >= j} g^(p (t - j)) (a_j . b_t) c_t = rev LA_p(rev A, rev B, rev C),
// rev reversing the tokens of each sequence-head, the forward is two products (tensor_core.cu's
// two-pass forms):
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

namespace hla::fast::gpu::detail::wide {

// A Run (an engine of products) gives, all const:
//   key_dim(), value_dim(), normalized(), ridge() (whether hla2's ridge is not zero), vector_columns (the
//     columns of a vector's operand);
//   Rows: a source of rows: rows(Input) (d_den one column), ones() (a column of ones), of(Floats);
//   Operand: a product's operand: input(Input) (q, k, v, d_num as they are), rows_of(Rows, columns,
//     reverse) (an a or c operand, reversed in time or not), keys_of(Rows, reverse, power) (a b operand
//     of products at that power);
//   Floats: rows of float32 sums, floats(columns); Target: where sums go, target(Floats&) or gradient(q,
//     k or v) (dq, dk, dv);
//   product(p, a, b, c, Target): LA_p(a, b, c) into the target; sum(Target, Rows, reverse, add): target =
//     (add ? target : 0) + rows (read reversed or not); add_ridge(Target, Rows, reverse): target += ridge
//     rows.
enum class Input { q, k, v, d_num, d_den };

// hla2: dq, dk, dv as the header's.
template <class Run>
void hla2_backward(const Run& run) {
  using enum Input;
  const int d = run.key_dim(), e = run.value_dim(), vector = Run::vector_columns;
  const auto keys = run.keys_of(run.rows(k), false, 1);
  const auto key_values = run.input(k);
  {
    auto u = run.floats(d);  // U (+ ridge Q)
    run.product(1, run.input(q), keys, key_values, run.target(u));
    if (run.ridge()) run.add_ridge(run.target(u), run.rows(q), false);
    {  // dQ = LA_2(dO, V, U) (+ LA_2(dd, 1, U))
      const auto u_values = run.rows_of(run.of(u), d, false);
      run.product(2, run.input(d_num), run.keys_of(run.rows(v), false, 2), u_values, run.gradient(q));
      if (run.normalized()) {
        auto term = run.floats(d);
        run.product(2, run.rows_of(run.rows(d_den), vector, false), run.keys_of(run.ones(), false, 2),
                    u_values, run.target(term));
        run.sum(run.gradient(q), run.of(term), false, true);
      }
    }
    // rev dV = LA_2(rev U, rev Q, rev dO)
    auto dv = run.floats(e);
    run.product(2, run.rows_of(run.of(u), d, true), run.keys_of(run.rows(q), true, 2),
                run.rows_of(run.rows(d_num), e, true), run.target(dv));
    run.sum(run.gradient(v), run.of(dv), true, false);
  }
  // rev dU = LA_2(rev V, rev dO, rev Q) (+ LA_2(1, rev dd, rev Q))
  const auto q_reversed = run.rows_of(run.rows(q), d, true);
  auto du = run.floats(d), term = run.floats(d);
  run.product(2, run.rows_of(run.rows(v), e, true), run.keys_of(run.rows(d_num), true, 2), q_reversed,
              run.target(du));
  if (run.normalized()) {
    run.product(2, run.rows_of(run.ones(), vector, true), run.keys_of(run.rows(d_den), true, 2), q_reversed,
                run.target(term));
    run.sum(run.target(du), run.of(term), false, true);
  }
  // dQ += LA_1(dU, K, K) (+ ridge dU)
  run.product(1, run.rows_of(run.of(du), d, true), keys, key_values, run.target(term));
  run.sum(run.gradient(q), run.of(term), false, true);
  if (run.ridge()) run.add_ridge(run.gradient(q), run.of(du), true);
  // rev dK = LA_1(rev K, rev dU, rev Q) + LA_1(rev K, rev Q, rev dU)
  const auto k_reversed = run.rows_of(run.rows(k), d, true);
  run.product(1, k_reversed, run.keys_of(run.of(du), false, 1), q_reversed, run.target(term));
  run.sum(run.gradient(k), run.of(term), true, false);
  run.product(1, k_reversed, run.keys_of(run.rows(q), true, 1), run.rows_of(run.of(du), d, false),
              run.target(term));
  run.sum(run.gradient(k), run.of(term), true, true);
}

// ahla: dq, dk, dv as the header's.
template <class Run>
void ahla_backward(const Run& run) {
  using enum Input;
  const int d = run.key_dim(), e = run.value_dim(), vector = Run::vector_columns;
  const auto key_values = run.input(k);
  const auto q_reversed = run.rows_of(run.rows(q), d, true);
  // X; normalized, x (then dx), else unused
  auto x = run.floats(e), small = run.floats(run.normalized() ? vector : 1), term = run.floats(d);
  {
    const auto keys = run.keys_of(run.rows(k), false, 1);
    run.product(1, run.input(q), keys, run.input(v), run.target(x));
    if (run.normalized())
      run.product(1, run.input(q), keys, run.rows_of(run.ones(), vector, false), run.target(small));
  }
  // dQ = LA_1(dO, X, K) (+ LA_1(dd, x, K))
  run.product(1, run.input(d_num), run.keys_of(run.of(x), false, 1), key_values, run.gradient(q));
  if (run.normalized()) {
    run.product(1, run.rows_of(run.rows(d_den), vector, false), run.keys_of(run.of(small), false, 1),
                key_values, run.target(term));
    run.sum(run.gradient(q), run.of(term), false, true);
  }
  // rev dK = LA_1(rev X, rev dO, rev Q) (+ LA_1(rev x, rev dd, rev Q))
  run.product(1, run.rows_of(run.of(x), e, true), run.keys_of(run.rows(d_num), true, 1), q_reversed,
              run.target(term));
  run.sum(run.gradient(k), run.of(term), true, false);
  if (run.normalized()) {
    run.product(1, run.rows_of(run.of(small), vector, true), run.keys_of(run.rows(d_den), true, 1),
                q_reversed, run.target(term));
    run.sum(run.gradient(k), run.of(term), true, true);
  }
  // rev dX = LA_1(rev K, rev Q, rev dO), into x's room (rev dx = LA_1(rev K, rev Q, rev dd), into
  // small's); rev dV = LA_1(rev K, rev Q, rev dX)
  auto& dx = x;
  {
    const auto k_reversed = run.rows_of(run.rows(k), d, true);
    const auto q_keys = run.keys_of(run.rows(q), true, 1);
    run.product(1, k_reversed, q_keys, run.rows_of(run.rows(d_num), e, true), run.target(dx));
    if (run.normalized())
      run.product(1, k_reversed, q_keys, run.rows_of(run.rows(d_den), vector, true), run.target(small));
    auto dv = run.floats(e);
    run.product(1, k_reversed, q_keys, run.rows_of(run.of(dx), e, false), run.target(dv));
    run.sum(run.gradient(v), run.of(dv), true, false);
  }
  // rev dK += LA_1(rev V, rev dX, rev Q) (+ LA_1(1, rev dx, rev Q))
  run.product(1, run.rows_of(run.rows(v), e, true), run.keys_of(run.of(dx), false, 1), q_reversed,
              run.target(term));
  run.sum(run.gradient(k), run.of(term), true, true);
  if (run.normalized()) {
    run.product(1, run.rows_of(run.ones(), vector, true), run.keys_of(run.of(small), false, 1), q_reversed,
                run.target(term));
    run.sum(run.gradient(k), run.of(term), true, true);
  }
  // dQ += LA_1(dX, V, K) (+ LA_1(dx, 1, K))
  run.product(1, run.rows_of(run.of(dx), e, true), run.keys_of(run.rows(v), false, 1), key_values,
              run.target(term));
  run.sum(run.gradient(q), run.of(term), false, true);
  if (run.normalized()) {
    run.product(1, run.rows_of(run.of(small), vector, true), run.keys_of(run.ones(), false, 1), key_values,
                run.target(term));
    run.sum(run.gradient(q), run.of(term), false, true);
  }
}

// The backward of `ahla` or hla2 on `run`.
template <class Run>
void wide_backward(bool ahla, const Run& run) {
  ahla ? ahla_backward(run) : hla2_backward(run);
}

}  // namespace hla::fast::gpu::detail::wide
