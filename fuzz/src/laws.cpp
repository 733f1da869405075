#include "hla/fuzz/laws.hpp"

#include <fuzzer/FuzzedDataProvider.h>

#include <functional>
#include <sstream>

#include "hla/fast/algebra/ahla.hpp"
#include "hla/fast/algebra/hla2.hpp"
#include "hla/fast/algebra/hla3.hpp"
#include "hla/fast/algebra/linear.hpp"
#include "hla/proofs/laws.hpp"
#include "hla/reference/error.hpp"

namespace hla::fuzz {
namespace {

// A law's outcome on one input: empty when it holds, else (law, where).
struct Broken {
  std::string law, where;
};

// The first component that differs between two summaries.
template <class T, class Summary>
std::string differing(const Summary& a, const Summary& b) {
  const proofs::Named<T> x = proofs::components(a), y = proofs::components(b);
  for (std::size_t i = 0; i < x.size(); ++i) {
    if (x[i].second != y[i].second) return x[i].first;
  }
  return "?";
}

template <class T, class Segments>
std::optional<Broken> first_broken_law(const Segments& seg, const Sequence<T>& s,
                                       const std::vector<Index>& lengths) {
  using Summary = typename Segments::Summary;
  const Index n = s.length();
  std::vector<Summary> tokens;
  for (Index t = 0; t < n; ++t)
    tokens.push_back(seg.token(s.q.row(t).transpose(), s.k.row(t).transpose(), s.v.row(t)));
  const auto fold = [&](Index begin, Index end) {
    Summary acc = seg.identity();
    for (Index t = begin; t < end; ++t) acc = seg.combine(acc, tokens[t]);
    return acc;
  };
  std::vector<Summary> parts;
  std::vector<Index> starts;
  for (Index begin = 0; Index l : lengths) {
    starts.push_back(begin);
    parts.push_back(fold(begin, begin + l));
    begin += l;
  }
  const Summary e = seg.identity();
  for (std::size_t i = 0; i < parts.size(); ++i) {
    const std::string at = "segment " + std::to_string(i + 1);
    const Summary left = seg.combine(e, parts[i]), right = seg.combine(parts[i], e);
    if (!(left == parts[i]))
      return Broken{"left identity", at + ", component " + differing<T>(left, parts[i])};
    if (!(right == parts[i]))
      return Broken{"right identity", at + ", component " + differing<T>(right, parts[i])};
  }
  for (std::size_t i = 0; i + 2 < parts.size(); ++i) {
    const Summary grouped_left = seg.combine(seg.combine(parts[i], parts[i + 1]), parts[i + 2]);
    const Summary grouped_right = seg.combine(parts[i], seg.combine(parts[i + 1], parts[i + 2]));
    if (!(grouped_left == grouped_right)) {
      return Broken{"associativity", "segments " + std::to_string(i + 1) + "-" + std::to_string(i + 3) +
                                         ", component " + differing<T>(grouped_left, grouped_right)};
    }
  }
  // Homomorphism: the summary of the whole sequence (the serial left fold) is the combination of
  // its two parts, for every split point. The suffixes are folded from the right, a grouping the
  // serial fold never uses.
  std::vector<Summary> prefix(n + 1, e), suffix(n + 1, e);
  for (Index t = 0; t < n; ++t) prefix[t + 1] = seg.combine(prefix[t], tokens[t]);
  for (Index t = n - 1; t >= 0; --t) suffix[t] = seg.combine(tokens[t], suffix[t + 1]);
  const Summary& whole = prefix[n];
  for (Index split = 0; split <= n; ++split) {
    const Summary joined = seg.combine(prefix[split], suffix[split]);
    if (!(joined == whole)) {
      return Broken{"homomorphism", "split after token " + std::to_string(split) + ", component " +
                                        differing<T>(joined, whole)};
    }
  }
  return std::nullopt;
}

// Each operator: its laws evaluated on tokens of type T.
struct Entry {
  Operator info;
  std::function<std::optional<Broken>(const Sequence<ModP>&, const std::vector<Index>&, const ModP&)> field;
  std::function<std::optional<Broken>(const Sequence<Rational>&, const std::vector<Index>&, const Rational&)>
      exact;
};

template <class Make>
Entry entry_of(Operator info, Make make) {
  return {std::move(info),
          [make](const Sequence<ModP>& s, const std::vector<Index>& l, const ModP& g) {
            return first_broken_law(make(s.key_dim(), s.value_dim(), g), s, l);
          },
          [make](const Sequence<Rational>& s, const std::vector<Index>& l, const Rational& g) {
            return first_broken_law(make(s.key_dim(), s.value_dim(), g), s, l);
          }};
}

const std::vector<Entry>& registry() {
  static const std::vector<Entry> entries = [] {
    std::vector<Entry> e;
    const auto hla2 = [](bool masked, bool corrected) {
      return [=]<class T>(Index d, Index dv, const T& g) {
        return fast::Hla2Segments<T>(d, dv, g, T(0), masked, corrected ? fast::Form::corrected : fast::Form::published);
      };
    };
    const auto ahla = [](bool corrected) {
      return
          [=]<class T>(Index d, Index dv, const T& g) { return fast::AhlaSegments<T>(d, dv, g, corrected ? fast::Form::corrected : fast::Form::published);
          };
    };
    e.push_back(
        entry_of({"linear", "linear attention's decayed monoid (P, m, rho)", true, true},
                 []<class T>(Index d, Index dv, const T& g) { return fast::LinearSegments<T>(d, dv, g); }));
    e.push_back(
        entry_of({"sec-4.1", "hla2 unmasked monoid (S, C, m), Sec. 4.1", false, true}, hla2(false, false)));
    e.push_back(entry_of({"sec-4.2-decay", "hla2 unmasked decay-aware monoid, Sec. 4.2", true, true},
                         hla2(false, false)));
    e.push_back(
        entry_of({"eq-4.1", "hla2 masked semidirect product, Eq. 4.1", false, true}, hla2(true, false)));
    e.push_back(
        entry_of({"eq-4.1-decay", "hla2 masked decay-aware operator as printed, Sec. 4.2 (F3)", true, false},
                 hla2(true, false)));
    e.push_back(
        entry_of({"eq-4.1-decay-corrected", "hla2 masked decay-aware operator, corrected (F3)", true, true},
                 hla2(true, true)));
    e.push_back(entry_of(
        {"hla2-moment", "hla2 masked operator on F = S C - G (decayed), docs/perf.md", true, true},
        []<class T>(Index d, Index dv, const T& g) { return fast::Hla2MomentSegments<T>(d, dv, g, T(0)); }));
    e.push_back(entry_of({"eq-6.2", "AHLA concatenation, Eq. 6.2", false, true}, ahla(false)));
    e.push_back(
        entry_of({"eq-6.2-decay", "AHLA decay-aware concatenation as printed, Sec. 6.2 (F4)", true, false},
                 ahla(false)));
    e.push_back(
        entry_of({"eq-6.2-decay-corrected", "AHLA decay-aware concatenation, corrected (F4)", true, true},
                 ahla(true)));
    e.push_back(
        entry_of({"eq-7.6", "third-order concatenation with segment maps, Eqs. 7.6-7.7", false, true},
                 []<class T>(Index d, Index dv, const T&) { return fast::Hla3PublishedSegments<T>(d, dv); }));
    e.push_back(entry_of(
        {"sec-7.3-corrected", "third-order corrected summary (F2), any gamma", true, true},
        []<class T>(Index d, Index dv, const T& g) { return fast::Hla3Segments<T>(d, dv, g, true); }));
    return e;
  }();
  return entries;
}

const Entry& entry_for(const std::string& id) {
  for (const Entry& e : registry()) {
    if (e.info.id == id) return e;
  }
  throw Error("--operator: unknown operator '" + id + "' (hla fuzz --list names them)");
}

std::optional<Broken> exact_check(const Entry& e, const Input& input) {
  return e.exact(input.tokens, input.segments, e.info.decayed ? input.gamma : Rational(1));
}

// The bytes as FuzzedDataProvider reads them, entries kept as (numerator, exponent) so that
// they map to rationals or to Z/p without big-number arithmetic.
struct Raw {
  Index d, dv;
  int gamma;
  std::vector<Index> segments;
  std::vector<std::pair<int, int>> entries;  // token by token: q row, k row, v row
};

Raw read(const std::uint8_t* data, std::size_t size) {
  FuzzedDataProvider bytes(data, size);
  Raw raw;
  raw.d = bytes.ConsumeIntegralInRange<int>(1, 4);
  raw.dv = bytes.ConsumeIntegralInRange<int>(1, 4);
  raw.gamma = bytes.ConsumeIntegralInRange<int>(0, 4);
  const int count = bytes.ConsumeIntegralInRange<int>(3, 4);
  Index n = 0;
  for (int i = 0; i < count; ++i) n += raw.segments.emplace_back(bytes.ConsumeIntegralInRange<int>(0, 2));
  raw.entries.resize(n * (2 * raw.d + raw.dv));
  for (auto& [numerator, exponent] : raw.entries) {
    numerator = bytes.ConsumeIntegralInRange<int>(-8, 8);
    exponent = bytes.ConsumeIntegralInRange<int>(0, 3);
  }
  return raw;
}

const Rational gammas[] = {Rational(1), Rational(1, 2), Rational(1, 3), Rational(2, 3), Rational(3, 4)};

template <class T>
Sequence<T> tokens_of(const Raw& raw, const std::function<T(int, int)>& value) {
  const Index n = static_cast<Index>(raw.entries.size()) / (2 * raw.d + raw.dv);
  Sequence<T> s{Matrix<T>(n, raw.d), Matrix<T>(n, raw.d), Matrix<T>(n, raw.dv)};
  std::size_t e = 0;
  for (Index t = 0; t < n; ++t) {
    for (Matrix<T>* m : {&s.q, &s.k, &s.v}) {
      for (Index c = 0; c < m->cols(); ++c, ++e)
        (*m)(t, c) = value(raw.entries[e].first, raw.entries[e].second);
    }
  }
  return s;
}

}  // namespace

Input decode(const std::uint8_t* data, std::size_t size) {
  const Raw raw = read(data, size);
  return {tokens_of<Rational>(raw, [](int a, int e) { return Rational(a, 1 << e); }), raw.segments,
          gammas[raw.gamma]};
}

std::optional<Violation> check_bytes(const std::string& operator_id, const std::uint8_t* data,
                                     std::size_t size) {
  const Entry& e = entry_for(operator_id);
  const Raw raw = read(data, size);
  static const ModP inverse_powers[] = {ModP(1), ModP(2).inverse(), ModP(4).inverse(), ModP(8).inverse()};
  static const ModP field_gammas[] = {to_mod_prime(gammas[0]), to_mod_prime(gammas[1]),
                                      to_mod_prime(gammas[2]), to_mod_prime(gammas[3]),
                                      to_mod_prime(gammas[4])};
  const ModP gamma = e.info.decayed ? field_gammas[raw.gamma] : ModP(1);
  const Sequence<ModP> tokens =
      tokens_of<ModP>(raw, [](int a, int x) { return ModP(a) * inverse_powers[x]; });
  if (!e.field(tokens, raw.segments, gamma)) return std::nullopt;
  return check(operator_id, decode(data, size));
}

std::string describe(const Input& input) {
  std::ostringstream out;
  out << "d = " << input.tokens.key_dim() << ", dv = " << input.tokens.value_dim()
      << ", gamma = " << input.gamma << ", segments of";
  for (Index l : input.segments) out << " " << l;
  out << " tokens";
  const auto row = [](const Matrix<Rational>& m, Index t) {
    std::string s = "(";
    for (Index c = 0; c < m.cols(); ++c) {
      if (c > 0) s += ", ";
      s += format_rational(m(t, c));
    }
    return s + ")";
  };
  for (Index t = 0; t < input.tokens.length(); ++t) {
    out << "\n  token " << t + 1 << ": q = " << row(input.tokens.q, t) << ", k = " << row(input.tokens.k, t)
        << ", v = " << row(input.tokens.v, t);
  }
  return out.str();
}

const std::vector<Operator>& operators() {
  static const std::vector<Operator> list = [] {
    std::vector<Operator> out;
    for (const Entry& e : registry()) out.push_back(e.info);
    return out;
  }();
  return list;
}

const Operator* find_operator(const std::string& id) {
  for (const Operator& o : operators()) {
    if (o.id == id) return &o;
  }
  return nullptr;
}

std::optional<Violation> check(const std::string& operator_id, const Input& input) {
  const Entry& e = entry_for(operator_id);
  const ModP gamma = e.info.decayed ? to_mod_prime(input.gamma) : ModP(1);
  if (!e.field(convert<ModP>(input.tokens), input.segments, gamma)) return std::nullopt;
  // Z/p is the image of the rationals: a difference there is a difference here. Confirm, and
  // name the law and place in exact terms.
  const auto broken = exact_check(e, input);
  if (!broken) return std::nullopt;
  return Violation{broken->law, broken->where, input};
}

Violation minimize(const std::string& operator_id, Violation violation) {
  const Entry& e = entry_for(operator_id);
  const auto still = [&](const Input& x) {
    const auto broken = exact_check(e, x);
    return broken && broken->law == violation.law;
  };
  Input& c = violation.input;
  const auto drop_token = [](Input x, Index t) {
    for (Matrix<Rational>* m : {&x.tokens.q, &x.tokens.k, &x.tokens.v}) {
      Matrix<Rational> out(m->rows() - 1, m->cols());
      out << m->topRows(t), m->bottomRows(m->rows() - t - 1);
      *m = out;
    }
    for (Index begin = 0; Index & l : x.segments) {
      if (t < begin + l) {
        --l;
        break;
      }
      begin += l;
    }
    return x;
  };
  for (bool progress = true; progress;) {
    progress = false;
    for (Index t = c.tokens.length() - 1; t >= 0; --t) {
      Input x = drop_token(c, t);
      if (still(x)) c = std::move(x), progress = true;
    }
    const auto drop_column = [](const Matrix<Rational>& m, Index col) {
      Matrix<Rational> out(m.rows(), m.cols() - 1);
      out << m.leftCols(col), m.rightCols(m.cols() - col - 1);
      return out;
    };
    for (Index col = 0; col < c.tokens.key_dim() && c.tokens.key_dim() > 1; ++col) {
      Input x = c;
      x.tokens.q = drop_column(c.tokens.q, col);
      x.tokens.k = drop_column(c.tokens.k, col);
      if (still(x)) c = std::move(x), progress = true;
    }
    for (Index col = 0; col < c.tokens.value_dim() && c.tokens.value_dim() > 1; ++col) {
      Input x = c;
      x.tokens.v = drop_column(c.tokens.v, col);
      if (still(x)) c = std::move(x), progress = true;
    }
    for (Matrix<Rational>* m : {&c.tokens.q, &c.tokens.k, &c.tokens.v}) {
      for (Index i = 0; i < m->size(); ++i) {
        const Rational value = m->data()[i];
        if (value == 0) continue;
        for (const Rational& smaller : {Rational(0), Rational(value > 0 ? 1 : -1)}) {
          if (smaller == value) continue;
          m->data()[i] = smaller;
          if (still(c)) {
            progress = true;
            break;
          }
          m->data()[i] = value;
        }
      }
    }
  }
  violation.where = exact_check(e, c)->where;
  return violation;
}

std::string report(const std::string& operator_id, const Violation& violation) {
  const Entry& e = entry_for(operator_id);
  return "violation of " + violation.law + " by " + operator_id + " (" + e.info.description + ") at " +
         violation.where + "\n" + describe(violation.input);
}

}  // namespace hla::fuzz
