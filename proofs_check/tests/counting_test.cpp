// The counting scalar and the exact polynomial fit that the ledger's cost entries rest on.

#include "hla/proofs/counting.hpp"

#include <catch2/catch.hpp>

#include "hla/checking/counted.hpp"
#include "hla/reference/error.hpp"

using namespace hla;
using namespace hla::proofs;
using namespace hla::checking;

namespace {

std::uint64_t operations_of(const std::function<void()>& f) {
  const std::uint64_t before = operation_count();
  f();
  return operation_count() - before;
}

}  // namespace

TEST_CASE("counting/a matrix product costs m k n products and m (k - 1) n sums", "[proofs]") {
  for (Index m = 2; m <= 9; m += 3) {
    for (Index k = 2; k <= 30; k += 7) {
      const Matrix<Counted> a = counting_input(m, k, 1), b = counting_input(k, 5, 2);
      const std::uint64_t counted = operations_of([&] { Matrix<Counted> c = a * b; });
      CHECK(counted == static_cast<std::uint64_t>(m * k * 5 + m * (k - 1) * 5));
    }
  }
}

TEST_CASE("counting/operations with 0 or 1 are not counted", "[proofs]") {
  const Counted x = 1.5, y = 2.25;
  CHECK(operations_of([&] { (void)(x * y + x); }) == 2);
  CHECK(operations_of([&] { (void)(Counted(1) * y); }) == 0);
  CHECK(operations_of([&] { (void)(Counted(0) + y); }) == 0);
  CHECK(operations_of([&] { (void)(x - Counted(-1) * y); }) == 1);
}

TEST_CASE("counting/the fit recovers a Laurent polynomial exactly", "[proofs]") {
  // 3 C^2 d - 1/2 C^-1 d dv + 7
  const auto count = [](const std::vector<Index>& p) {
    const Rational c = p[0], d = p[1], dv = p[2];
    return 3 * c * c * d - Rational(1, 2) * d * dv / c + 7;
  };
  const std::vector<Monomial> fit = fit_polynomial(count, {-1, 0, 0}, {2, 2, 1});
  REQUIRE(fit.size() == 3);
  CHECK(format_polynomial(fit, {"C", "d", "dv"}) == "3 C^2 d - 1/2 C^-1 d dv + 7");
}

TEST_CASE("counting/a count outside the exponent ranges is rejected", "[proofs]") {
  const auto cubic = [](const std::vector<Index>& p) { return Rational(p[0] * p[0] * p[0]); };
  CHECK_THROWS_AS(fit_polynomial(cubic, {0}, {2}), Error);
}

TEST_CASE("counting/within_order compares exponents below the stated hull", "[proofs]") {
  const auto m = [](std::vector<int> e) { return Monomial{std::move(e), 1}; };
  const std::vector<Monomial> stated{m({2, 0}), m({1, 1})};  // d^2 + d dv
  CHECK(within_order({m({2, 0}), m({1, 0}), m({0, 0})}, stated));
  CHECK(within_order({m({0, 1})}, stated));  // dv <= d dv
  CHECK_FALSE(within_order({m({2, 1})}, stated));
  CHECK_FALSE(within_order({m({0, 2})}, stated));
  // d dv <= (d^2 + dv^2) / 2: below the segment from d^2 to dv^2, though below neither end alone.
  CHECK(within_order({m({1, 1})}, {m({2, 0}), m({0, 2})}));
  CHECK_FALSE(within_order({m({2, 2})}, {m({4, 0}), m({0, 3})}));
}

TEST_CASE("counting/within_order under a condition substitutes the larger variable", "[proofs]") {
  const auto m = [](std::vector<int> e) { return Monomial{std::move(e), 1}; };
  // Over (C, d, dv): C d + C dv + d^2/C + d dv/C, the order of Figures 1(C) and 2(C).
  const std::vector<Monomial> stated{m({1, 1, 0}), m({1, 0, 1}), m({-1, 2, 0}), m({-1, 1, 1})};
  const Order c_at_least_d{0, 1}, d_at_least_c{1, 0};
  for (const Monomial& x : {m({0, 2, 0}), m({0, 1, 1}), m({-1, 2, 1})}) {  // d^2, d dv, d^2 dv / C
    CHECK_FALSE(within_order({x}, stated));
    CHECK(within_order({x}, stated, c_at_least_d));
    CHECK_FALSE(within_order({x}, stated, d_at_least_c));
  }
  CHECK_FALSE(within_order({m({2, 0, 0})}, stated, c_at_least_d));    // C^2 is never within
  CHECK(within_order({m({2, 0, 0})}, {m({1, 1, 0})}, d_at_least_c));  // C^2 <= C d when d >= C
  // d^2 is within O(d dv) exactly when dv >= d.
  CHECK(within_order({m({2, 0})}, {m({1, 1})}, Order{1, 0}));
  CHECK_FALSE(within_order({m({2, 0})}, {m({1, 1})}, Order{0, 1}));
}
