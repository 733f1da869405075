#pragma once

// The coefficients in which a published form differs from the corrected one: one function per
// variant, the only place the choice is made, for the CPU algebra (algebra/, chunked.hpp), the
// device algebra (fast/cuda/algebra/) and the ledger's transcriptions alike. Linear attention has
// one form; hla3's forms differ in their state, not in a coefficient (Hla3PublishedStream).

#include "hla/fast/implementation.hpp"
#include "hla/reference/host_device.hpp"

namespace hla::fast {

// hla2's masked cross-summaries G, h under an attenuation rho:
//   one token (rho = gamma): G_t = age G_{t-1} + gain k_t (k_t^T C_{t-1});
//   segments (rho = rho_B):  G_AB = age G_A + G_B + S_B (rho_B C_A) (the gain is not used).
// published (Sec. 3.1 online updates, Sec. 4.3, Alg. 1 line 6; Sec. 4.2): age = rho, gain = 1;
// corrected (docs/findings.md, F1 and F3): age = rho^2, gain = rho. They agree for rho = 1.
template <class T>
struct Hla2Coefficients {
  T age, gain;
};
template <class T>
HLA_HOST_DEVICE Hla2Coefficients<T> hla2_coefficients(Form form, const T& rho) {
  if (form == Form::corrected) return {rho * rho, rho};
  return {rho, T(1)};
}

// AHLA across a concatenation with B (rho = rho_B): R^KQ_AB = key_query_age R^KQ_A + R^KQ_B
// (published, Sec. 6.2: rho; corrected, F4: 1), and whether the chunk form's carry routes
// through the query's own token, R_{<=t} (corrected, F6) or R_{<t} (published, Figure 2(C)).
template <class T>
struct AhlaCoefficients {
  T key_query_age;
  bool routes_own_token;
};
template <class T>
HLA_HOST_DEVICE AhlaCoefficients<T> ahla_coefficients(Form form, const T& rho) {
  if (form == Form::corrected) return {T(1), true};
  return {rho, false};
}

}  // namespace hla::fast
