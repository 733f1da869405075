#include "hla/checking/law_check.hpp"

#include <fuzzer/FuzzedDataProvider.h>

#include <algorithm>
#include <functional>
#include <sstream>

#include "hla/checking/counterexample.hpp"
#include "hla/checking/laws.hpp"
#include "hla/fast/catalogue.hpp"
#include "hla/reference/error.hpp"

namespace hla::checking {
namespace {

// Each operator: its laws evaluated on tokens of type T.
struct Entry {
  Operator info;
  std::function<std::optional<Broken>(const Sequence<ModP>&, const std::vector<Index>&, const ModP&)> field;
  std::function<std::optional<Broken>(const Sequence<Rational>&, const std::vector<Index>&, const Rational&)>
      exact;
};

// The finding (fast/catalogue.hpp) whose printed operator is this fuzz operator, or "".
std::string finding_breaking(std::string_view id) {
  for (const fast::Finding& f : fast::findings()) {
    if (std::find(f.fuzz_ids.begin(), f.fuzz_ids.end(), id) != f.fuzz_ids.end()) return std::string(f.id);
  }
  return "";
}

template <class Make>
Entry entry_of(std::string id, std::string description, bool decayed, Make make) {
  const std::string finding = finding_breaking(id);
  return {{std::move(id), std::move(description), decayed, finding},
          [make](const Sequence<ModP>& s, const std::vector<Index>& l, const ModP& g) {
            return first_broken_law(make(s.key_dim(), s.value_dim(), g), s, l);
          },
          [make](const Sequence<Rational>& s, const std::vector<Index>& l, const Rational& g) {
            return first_broken_law(make(s.key_dim(), s.value_dim(), g), s, l);
          }};
}

// Every scan operator, published and corrected, by its ledger id; whether it is lawful is the
// catalogue's to say.
const std::vector<Entry>& registry() {
  static const std::vector<Entry> entries = [] {
    using fast::Form;
    const auto hla2 = [](bool masked, Form form) {
      return [=]<class T>(Index d, Index dv, const T& g) {
        return fast::Hla2Segments<T>(d, dv, g, T(0), masked, form);
      };
    };
    const auto ahla = [](Form form) {
      return [=]<class T>(Index d, Index dv, const T& g) { return fast::AhlaSegments<T>(d, dv, g, form); };
    };
    return std::vector<Entry>{
        entry_of("linear", "linear attention's decayed monoid (P, m, rho)", true,
                 []<class T>(Index d, Index dv, const T& g) { return fast::LinearSegments<T>(d, dv, g); }),
        entry_of("sec-4.1", "hla2 unmasked monoid (S, C, m), Sec. 4.1", false, hla2(false, Form::published)),
        entry_of("sec-4.2-decay", "hla2 unmasked decay-aware monoid, Sec. 4.2", true,
                 hla2(false, Form::published)),
        entry_of("eq-4.1", "hla2 masked semidirect product, Eq. 4.1", false, hla2(true, Form::published)),
        entry_of("eq-4.1-decay", "hla2 masked decay-aware operator as printed, Sec. 4.2 (F3)", true,
                 hla2(true, Form::published)),
        entry_of("eq-4.1-decay-corrected", "hla2 masked decay-aware operator, corrected (F3)", true,
                 hla2(true, Form::corrected)),
        entry_of("hla2-moment", "hla2 masked operator on F = S C - G (decayed), docs/perf.md", true,
                 []<class T>(Index d, Index dv, const T& g) {
                   return fast::Hla2MomentSegments<T>(d, dv, g, T(0));
                 }),
        entry_of("eq-6.2", "AHLA concatenation, Eq. 6.2", false, ahla(Form::published)),
        entry_of("eq-6.2-decay", "AHLA decay-aware concatenation as printed, Sec. 6.2 (F4)", true,
                 ahla(Form::published)),
        entry_of("eq-6.2-decay-corrected", "AHLA decay-aware concatenation, corrected (F4)", true,
                 ahla(Form::corrected)),
        entry_of("eq-7.6", "third-order concatenation with segment maps, Eqs. 7.6-7.7", false,
                 []<class T>(Index d, Index dv, const T&) { return fast::Hla3PublishedSegments<T>(d, dv); }),
        entry_of(
            "sec-7.3-corrected", "third-order corrected summary (F2), any gamma", true,
            []<class T>(Index d, Index dv, const T& g) { return fast::Hla3Segments<T>(d, dv, g, true); }),
    };
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
  violation.input = shrink(violation.input, still, 0);
  violation.where = exact_check(e, violation.input)->where;
  return violation;
}

std::string report(const std::string& operator_id, const Violation& violation) {
  const Entry& e = entry_for(operator_id);
  return "violation of " + violation.law + " by " + operator_id + " (" + e.info.description + ") at " +
         violation.where + "\n" + describe(violation.input);
}

}  // namespace hla::checking
