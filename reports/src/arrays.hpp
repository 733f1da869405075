#pragma once

// The arrays of hla check as it reads them (internal to the reports library): an array with its
// axes named in a layout, the checks of its shape and values, and one head's tokens.

#include <cmath>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "hla/reports/check.hpp"

namespace hla::reports {

struct Binary {
  int precision, min_exponent, max_exponent;  // significand bits (with the implicit one), exponent range
};
constexpr Binary binary(Format format) {
  switch (format) {
    case Format::f64:
      return {53, -1022, 1023};
    case Format::f32:
      return {24, -126, 127};
    case Format::bf16:
      return {8, -126, 127};
    case Format::f16:
      return {11, -14, 15};
  }
  return {53, -1022, 1023};
}

// The unit roundoff of a format, 2^-p.
inline double unit_roundoff(Format format) {
  return std::ldexp(1.0, -binary(format).precision);
}
// Half the smallest subnormal: the absolute error of rounding below the normal range.
inline double underflow_error(Format format) {
  const Binary b = binary(format);
  return std::ldexp(1.0, b.min_exponent - b.precision);
}

// How many query factors a monomial of num or den has: the rounding of --scale times q adds that
// many roundings to the candidate's (and a float64 reference's) depth.
inline int query_degree(const OperatorSpec& spec) {
  switch (spec.variant) {
    case Variant::linear:
      return 1;
    case Variant::hla2:
    case Variant::ahla:
      return 2;
    case Variant::hla3:
      return 3;
  }
  return 3;
}

// One array with its axes named: batch, tokens, heads, features (a 2-D array is one head).
struct Tensor {
  std::string path;  // the array's name in messages
  std::vector<std::int64_t> shape;
  const double* values;
  const float* narrow;  // the values as float when `values` is null
  Index batch = 1, tokens = 0, heads = 1, features = 0;
  Layout layout = Layout::nd;

  double at(Index b, Index t, Index h, Index f) const {
    const std::size_t i = index(b, t, h, f);
    return values ? values[i] : narrow[i];
  }
  std::size_t index(Index b, Index t, Index h, Index f) const {
    std::size_t i = 0;
    switch (layout) {
      case Layout::nd:
        i = std::size_t(t * features + f);
        break;
      case Layout::bthd:
        i = std::size_t(((b * tokens + t) * heads + h) * features + f);
        break;
      case Layout::bhtd:
        i = std::size_t(((b * heads + h) * tokens + t) * features + f);
        break;
    }
    return i;
  }
  std::string entry(Index b, Index t, Index h, Index f) const {
    switch (layout) {
      case Layout::nd:
        return path + ": entry [" + std::to_string(t) + ", " + std::to_string(f) + "]";
      case Layout::bthd:
        return path + ": entry [" + std::to_string(b) + ", " + std::to_string(t) + ", " + std::to_string(h) +
               ", " + std::to_string(f) + "]";
      case Layout::bhtd:
        return path + ": entry [" + std::to_string(b) + ", " + std::to_string(h) + ", " + std::to_string(t) +
               ", " + std::to_string(f) + "]";
    }
    return path;
  }
};

std::string shape_text(const std::vector<std::int64_t>& shape);
// The array in the layout, its shape checked (one line naming the file when it does not fit).
Tensor tensor(const ArrayView& a, Layout layout);

// Every value finite and, for the inputs (a format given), exactly a value of the declared
// precision; the first bad entry in (batch, head, token, feature) order is named.
void check_values(const Tensor& x, std::optional<Format> format, int threads);

// A number in JSON: 17 significant digits, or "inf", "-inf", "nan" as strings.
std::string json_double(double x);

// Throws hla::Error(message) unless ok.
void require(bool ok, const std::string& message);

// fn(i) for every i < count on `threads` threads (0: one per core), each taking the next i; then
// the error of the lowest i that failed, if any, is thrown.
void parallel_for(std::size_t count, int threads, const std::function<void(std::size_t)>& fn);

// q, k, v checked against each other: q and k alike, v with q's batch and tokens and a multiple
// of its heads.
void check_inputs(const Tensor& q, const Tensor& k, const Tensor& v);

// Value head i of the arrays (batch-major): its batch, its value head and its query/key head.
struct HeadIndex {
  Index batch, value_head, query_head;
};
HeadIndex head_index(const Tensor& q, const Tensor& v, std::size_t i);

// Value head i of the arrays: its q, k, v (before the scale).
HeadInput head_tokens(const Tensor& q, const Tensor& k, const Tensor& v, std::size_t i);

}  // namespace hla::reports
