#include "arrays.hpp"

#include <atomic>
#include <bit>
#include <cmath>
#include <iomanip>
#include <sstream>
#include <thread>

#include "hla/reference/error.hpp"

namespace hla::reports {

namespace {

// Whether the value is finite and, given a format, one of its values. A float holds a bf16 value
// exactly when its low 16 bits are zero (the same exponent range, 8 of its 24 significand bits).
bool good_value(float value, std::optional<Format> format) {
  if (!std::isfinite(value)) return false;
  if (format == Format::bf16) return (std::bit_cast<std::uint32_t>(value) & 0xffffu) == 0;
  return !format || *format == Format::f32 || *format == Format::f64 || round_to(*format, value) == value;
}
bool good_value(double value, std::optional<Format> format) {
  return std::isfinite(value) && (!format || round_to(*format, value) == value);
}

// Whether every value of x is good: one pass over its memory in storage order, in slices over the
// threads (check_values then names the first bad entry in its own order).
bool all_values_good(const Tensor& x, std::optional<Format> format, int threads) {
  const std::size_t count = std::size_t(x.batch * x.heads * x.tokens * x.features), slices = 256;
  std::atomic<bool> good{true};
  parallel_for(slices, threads, [&](std::size_t i) {
    const std::size_t begin = count * i / slices, end = count * (i + 1) / slices;
    bool ok = true;
    if (x.values) {
      for (std::size_t j = begin; j < end; ++j) ok &= good_value(x.values[j], format);
    } else {
      for (std::size_t j = begin; j < end; ++j) ok &= good_value(x.narrow[j], format);
    }
    if (!ok) good = false;
  });
  return good;
}

}  // namespace

std::string shape_text(const std::vector<std::int64_t>& shape) {
  std::string out;
  for (std::size_t i = 0; i < shape.size(); ++i) out += (i ? ", " : "") + std::to_string(shape[i]);
  return "(" + out + (shape.size() == 1 ? ",)" : ")");
}

Tensor tensor(const ArrayView& a, Layout layout) {
  Tensor x{a.name, a.shape, a.values, a.narrow};
  x.layout = layout;
  const auto& s = x.shape;
  const std::string shape = shape_text(s);
  const std::string& path = a.name;
  if (layout == Layout::nd) {
    if (s.size() != 2)
      throw Error(path + ": --layout nd needs a 2-D array [n, d], got shape " + shape +
                  " (4-D arrays: --layout bthd or bhtd)");
    x.tokens = s[0];
    x.features = s[1];
  } else {
    if (s.size() != 4)
      throw Error(path + ": --layout " + std::string(layout_name(layout)) + " needs a 4-D array " +
                  (layout == Layout::bthd ? "[B, T, H, D]" : "[B, H, T, D]") + ", got shape " + shape);
    x.batch = s[0];
    x.tokens = layout == Layout::bthd ? s[1] : s[2];
    x.heads = layout == Layout::bthd ? s[2] : s[1];
    x.features = s[3];
  }
  if (x.tokens == 0) throw Error(path + ": no tokens (shape " + shape + ")");
  if (x.features == 0) throw Error(path + ": no features (shape " + shape + ")");
  if (x.batch == 0 || x.heads == 0) throw Error(path + ": no heads (shape " + shape + ")");
  return x;
}

void check_values(const Tensor& x, std::optional<Format> format, int threads) {
  if (all_values_good(x, format, threads)) return;
  parallel_for(std::size_t(x.batch * x.heads), threads, [&](std::size_t i) {
    const Index b = Index(i) / x.heads, h = Index(i) % x.heads;
    for (Index t = 0; t < x.tokens; ++t)
      for (Index f = 0; f < x.features; ++f) {
        const double value = x.at(b, t, h, f);
        if (!std::isfinite(value)) {
          throw Error(x.entry(b, t, h, f) + " is " + (std::isnan(value) ? "NaN" : "infinite") +
                      (format ? "; the inputs must be finite" : "; the candidate's output must be finite"));
        }
        if (format && round_to(*format, value) != value) {
          std::ostringstream v;
          v.precision(17);
          v << value;
          throw Error(x.entry(b, t, h, f) + " = " + v.str() + " is not a " +
                      std::string(format_name(*format)) + " value (--precision " +
                      std::string(format_name(*format)) +
                      "): save the inputs your kernel read, after rounding them");
        }
      }
  });
}

std::string json_double(double x) {
  if (!std::isfinite(x)) return std::string(x > 0 ? "\"inf\"" : x < 0 ? "\"-inf\"" : "\"nan\"");
  std::ostringstream s;
  s << std::setprecision(17) << x;
  return s.str();
}

void require(bool ok, const std::string& message) {
  if (!ok) throw Error(message);
}

void parallel_for(std::size_t count, int threads, const std::function<void(std::size_t)>& fn) {
  std::vector<std::string> errors(count);
  std::atomic<std::size_t> next{0};
  const auto worker = [&] {
    for (std::size_t i; (i = next++) < count;) {
      try {
        fn(i);
      } catch (const std::exception& e) {
        errors[i] = e.what();
      }
    }
  };
  const std::size_t workers = std::min<std::size_t>(
      count, std::size_t(threads > 0 ? threads : int(std::max(1u, std::thread::hardware_concurrency()))));
  std::vector<std::thread> pool;
  for (std::size_t t = 0; t < workers; ++t) pool.emplace_back(worker);
  for (std::thread& t : pool) t.join();
  for (const std::string& e : errors)
    if (!e.empty()) throw Error(e);
}

void check_inputs(const Tensor& q, const Tensor& k, const Tensor& v) {
  const auto shape = [](const Tensor& x) { return shape_text(x.shape); };
  require(k.shape == q.shape, k.path + ": shape " + shape(k) + " does not match " + q.path + " " + shape(q));
  require(v.batch == q.batch && v.tokens == q.tokens, v.path + ": shape " + shape(v) + " does not match " +
                                                          q.path + " " + shape(q) + " in batch or tokens");
  require(v.heads % q.heads == 0, v.path + ": " + std::to_string(v.heads) + " value heads for " +
                                      std::to_string(q.heads) +
                                      " query and key heads: grouped queries need a multiple of them");
}

HeadIndex head_index(const Tensor& q, const Tensor& v, std::size_t i) {
  const Index group = v.heads / q.heads;  // value heads per query/key head, consecutive
  return {Index(i) / v.heads, Index(i) % v.heads, Index(i) % v.heads / group};
}

HeadInput head_tokens(const Tensor& q, const Tensor& k, const Tensor& v, std::size_t i) {
  const auto [b, hv, hq] = head_index(q, v, i);
  HeadInput h;
  h.batch = b;
  h.head = hv;
  h.tokens = {Matrix<double>(q.tokens, q.features), Matrix<double>(q.tokens, q.features),
              Matrix<double>(v.tokens, v.features)};
  for (Index t = 0; t < q.tokens; ++t) {
    for (Index f = 0; f < q.features; ++f) {
      h.tokens.q(t, f) = q.at(b, t, hq, f);
      h.tokens.k(t, f) = k.at(b, t, hq, f);
    }
    for (Index f = 0; f < v.features; ++f) h.tokens.v(t, f) = v.at(b, t, hv, f);
  }
  return h;
}

}  // namespace hla::reports
