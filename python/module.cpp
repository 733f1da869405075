// hla._hla: the check and the reference of hla check for numpy arrays (python/hla/__init__.py
// wraps it as `hla`). Arrays are read as float64 (float32 and float16 convert exactly).

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <sstream>

#include "hla/reference/error.hpp"
#include "hla/reports/check.hpp"
#include "hla/reports/check_grad.hpp"

namespace py = pybind11;
using namespace hla;

namespace {

using Array = py::array_t<double, py::array::c_style | py::array::forcecast>;

reports::ArrayView view(const char* name, const Array& a) {
  reports::ArrayView out{name, {}, a.data()};
  for (py::ssize_t i = 0; i < a.ndim(); ++i) out.shape.push_back(a.shape(i));
  return out;
}

// A parameter given as a number (used exactly: a double is a dyadic rational) or as text
// ("999/1000", "0.999": parsed exactly).
Rational parameter(const py::object& x, const char* name) {
  if (py::isinstance<py::str>(x)) return parse_rational(x.cast<std::string>(), name);
  const double value = x.cast<double>();
  if (!std::isfinite(value)) throw Error(std::string(name) + ": must be finite");
  return Rational(value);
}

reports::CheckOptions options(const std::string& variant, bool masked, bool normalize, const py::object& eps,
                              const py::object& ridge, const py::object& decay, double scale,
                              const std::string& eps_policy, const std::string& precision,
                              const std::optional<std::string>& output_dtype, const std::string& algorithm,
                              Index chunk, const std::string& criterion, int threads) {
  reports::CheckOptions o;
  const auto v = parse_variant(variant);
  if (!v) throw Error("variant: '" + variant + "' is not one of linear, hla2, ahla, hla3");
  o.spec.variant = *v;
  o.spec.masked = masked;
  o.spec.normalize = normalize;
  o.spec.eps = parameter(eps, "eps");
  o.spec.ridge = parameter(ridge, "ridge");
  o.spec.decay = parameter(decay, "decay");
  validate(o.spec);
  if (!(scale > 0) || !std::isfinite(scale)) throw Error("scale: must be positive and finite");
  o.scale = scale;
  o.eps_policy = reports::parse_eps_policy(eps_policy);
  o.precision = reports::parse_format(precision, "precision");
  if (output_dtype) o.output_format = reports::parse_format(*output_dtype, "output_dtype");
  if (algorithm != "any") {
    const auto impl = fast::parse_implementation(algorithm);
    if (!impl || (*impl != fast::Implementation::streaming && *impl != fast::Implementation::scan &&
                  *impl != fast::Implementation::chunked))
      throw Error("algorithm: '" + algorithm + "' is not one of any, streaming, scan, chunked");
    o.algorithm = impl;
  }
  if (chunk < 1) throw Error("chunk: must be at least 1");
  o.chunk = chunk;
  o.criterion = reports::parse_criterion(criterion);
  if (threads < 0) throw Error("threads: 0 (all cores) or more");
  o.threads = threads;
  return o;
}

struct Result {
  reports::CheckResult result;
  reports::CheckOptions options;
};

struct GradientResult {
  reports::GradientCheckResult result;
  reports::CheckOptions options;
};

py::object position(const std::optional<reports::Position>& p, const char* gradient = nullptr) {
  if (!p) return py::none();
  py::dict d;
  if (gradient) d["gradient"] = gradient;
  d["batch"] = p->batch;
  d["head"] = p->head;
  d["token"] = p->token;
  d["column"] = p->column;
  return d;
}

// A diagnosis as the JSON has it: {"matches": [ids], "candidates": [{id, description, worst_ratio}]}.
py::dict diagnosis(const std::vector<reports::CheckResult::Diagnosed>& forms,
                   const std::vector<std::string>& matches) {
  py::list candidates;
  for (const auto& d : forms) {
    py::dict c;
    c["id"] = d.id;
    c["description"] = d.description;
    c["worst_ratio"] = d.ratio;
    candidates.append(c);
  }
  py::dict out;
  out["matches"] = matches;
  out["candidates"] = candidates;
  return out;
}

}  // namespace

PYBIND11_MODULE(_hla, m) {
  m.doc() = "Higher-order Linear Attention: exact operators and the check of a kernel's output";
  py::register_exception<Error>(m, "HlaError", PyExc_ValueError);

  py::class_<Result>(m, "CheckResult")
      .def_property_readonly("passed", [](const Result& r) { return r.result.passed; })
      .def_property_readonly("sound", [](const Result& r) { return r.result.sound; })
      .def_property_readonly("tight", [](const Result& r) { return r.result.tight; })
      .def_property_readonly("worst_ratio", [](const Result& r) { return r.result.worst_ratio; })
      .def_property_readonly("worst", [](const Result& r) { return position(r.result.worst); })
      .def_property_readonly("first_failure",
                             [](const Result& r) { return position(r.result.first_failure); })
      .def_property_readonly("first_departure",
                             [](const Result& r) { return position(r.result.first_departure); })
      .def_property_readonly("tight_ratio", [](const Result& r) { return r.result.tight_ratio; })
      .def_property_readonly("normwise_u", [](const Result& r) { return r.result.normwise_u; })
      .def_property_readonly("diagnosis",
                             [](const Result& r) { return diagnosis(r.result.diagnosis, r.result.matches); })
      .def("summary", [](const Result& r) { return reports::check_summary(r.result, r.options); })
      .def("to_json",
           [](const Result& r) {
             std::ostringstream out;
             reports::write_check_json(r.result, r.options, out);
             return out.str();
           })
      .def("__bool__", [](const Result& r) { return r.result.passed; })
      .def("__repr__", [](const Result& r) {
        const std::string s = reports::check_summary(r.result, r.options);
        return "<hla.CheckResult " + s.substr(0, s.find('\n')) + ">";
      });

  m.def(
      "check",
      [](const Array& o, const Array& q, const Array& k, const Array& v, const std::string& variant,
         bool masked, bool normalize, const py::object& eps, const py::object& ridge, const py::object& decay,
         double scale, const std::string& eps_policy, const std::string& precision,
         const std::optional<std::string>& output_dtype, const std::string& layout,
         const std::string& algorithm, Index chunk, const std::string& criterion, int threads) {
        Result r;
        r.options = options(variant, masked, normalize, eps, ridge, decay, scale, eps_policy, precision,
                            output_dtype, algorithm, chunk, criterion, threads);
        const reports::Layout l = reports::parse_layout(layout);
        py::gil_scoped_release release;
        r.result =
            reports::check_arrays(r.options, l, view("q", q), view("k", k), view("v", v), view("o", o));
        return r;
      },
      py::arg("o"), py::arg("q"), py::arg("k"), py::arg("v"), py::kw_only(), py::arg("variant") = "hla2",
      py::arg("masked") = true, py::arg("normalize") = false, py::arg("eps") = py::int_(0),
      py::arg("ridge") = py::int_(0), py::arg("decay") = py::int_(1), py::arg("scale") = 1.0,
      py::arg("eps_policy") = "add", py::arg("precision") = "f32", py::arg("output_dtype") = py::none(),
      py::arg("layout") = "nd", py::arg("algorithm") = "any", py::arg("chunk") = 64,
      py::arg("criterion") = "tight", py::arg("threads") = 0,
      "Checks a kernel's output o against the exact operator on q, k, v (docs/check.md).");

  py::class_<GradientResult>(m, "GradientCheckResult")
      .def_property_readonly("passed", [](const GradientResult& r) { return r.result.passed; })
      .def_property_readonly("sound", [](const GradientResult& r) { return r.result.sound; })
      .def_property_readonly("tight", [](const GradientResult& r) { return r.result.tight; })
      .def_property_readonly("worst_ratio", [](const GradientResult& r) { return r.result.worst_ratio; })
      .def_property_readonly("worst",
                             [](const GradientResult& r) {
                               return position(r.result.worst, reports::gradient_names[r.result.worst_part]);
                             })
      .def_property_readonly("first_failure",
                             [](const GradientResult& r) {
                               return position(r.result.first_failure,
                                               reports::gradient_names[r.result.first_failure_part]);
                             })
      .def_property_readonly("tight_ratio", [](const GradientResult& r) { return r.result.tight_ratio; })
      .def_property_readonly("unbounded", [](const GradientResult& r) { return r.result.unbounded; })
      .def_property_readonly(
          "diagnosis",
          [](const GradientResult& r) { return diagnosis(r.result.diagnosis, r.result.matches); })
      .def("summary",
           [](const GradientResult& r) { return reports::gradient_check_summary(r.result, r.options); })
      .def("to_json",
           [](const GradientResult& r) {
             std::ostringstream out;
             reports::write_gradient_check_json(r.result, r.options, out);
             return out.str();
           })
      .def("__bool__", [](const GradientResult& r) { return r.result.passed; })
      .def("__repr__", [](const GradientResult& r) {
        const std::string s = reports::gradient_check_summary(r.result, r.options);
        return "<hla.GradientCheckResult " + s.substr(0, s.find('\n')) + ">";
      });

  m.def(
      "check_grad",
      [](const Array& d_out, const Array& dq, const Array& dk, const Array& dv, const Array& q,
         const Array& k, const Array& v, const std::string& variant, bool masked, bool normalize,
         const py::object& eps, const py::object& ridge, const py::object& decay, double scale,
         const std::string& precision, const std::optional<std::string>& output_dtype,
         const std::string& layout, const std::string& algorithm, Index chunk, const std::string& criterion,
         int threads) {
        GradientResult r;
        r.options = options(variant, masked, normalize, eps, ridge, decay, scale, "add", precision,
                            output_dtype, algorithm, chunk, criterion, threads);
        const reports::Layout l = reports::parse_layout(layout);
        py::gil_scoped_release release;
        r.result = reports::check_gradient_arrays(r.options, l, view("q", q), view("k", k), view("v", v),
                                                  view("dO", d_out), view("dq", dq), view("dk", dk), view("dv", dv));
        return r;
      },
      py::arg("d_out"), py::arg("dq"), py::arg("dk"), py::arg("dv"), py::arg("q"), py::arg("k"), py::arg("v"),
      py::kw_only(), py::arg("variant") = "hla2", py::arg("masked") = true, py::arg("normalize") = false,
      py::arg("eps") = py::int_(0), py::arg("ridge") = py::int_(0), py::arg("decay") = py::int_(1),
      py::arg("scale") = 1.0, py::arg("precision") = "f32", py::arg("output_dtype") = py::none(),
      py::arg("layout") = "nd", py::arg("algorithm") = "any", py::arg("chunk") = 64,
      py::arg("criterion") = "tight", py::arg("threads") = 0,
      "Checks a kernel's gradients dq, dk, dv of <d_out, O> against the exact ones on q, k, v "
      "(normalized operators divide by den + eps; docs/check.md \"Gradients\").");

  m.def(
      "reference",
      [](const Array& q, const Array& k, const Array& v, const std::string& variant, bool masked,
         bool normalize, const py::object& eps, const py::object& ridge, const py::object& decay,
         double scale, const std::string& eps_policy, const std::string& scalar, const std::string& layout) {
        const reports::CheckOptions o = options(variant, masked, normalize, eps, ridge, decay, scale,
                                                eps_policy, "f64", std::nullopt, "any", 64, "tight", 1);
        const auto kind = parse_scalar_kind(scalar);
        if (!kind) throw Error("scalar: '" + scalar + "' is not one of exact, mpfr, f64");
        const reports::Layout l = reports::parse_layout(layout);
        std::vector<double> out;
        {
          py::gil_scoped_release release;
          out = reports::reference_arrays(o, l, *kind, view("q", q), view("k", k), view("v", v));
        }
        Array result(std::vector<py::ssize_t>(v.shape(), v.shape() + v.ndim()));
        std::copy(out.begin(), out.end(), result.mutable_data());
        return result;
      },
      py::arg("q"), py::arg("k"), py::arg("v"), py::kw_only(), py::arg("variant") = "hla2",
      py::arg("masked") = true, py::arg("normalize") = false, py::arg("eps") = py::int_(0),
      py::arg("ridge") = py::int_(0), py::arg("decay") = py::int_(1), py::arg("scale") = 1.0,
      py::arg("eps_policy") = "add", py::arg("scalar") = "f64", py::arg("layout") = "nd",
      "The exact operator's output on q, k, v (streaming, proven equal to the n x n definition), "
      "computed in scalar (exact, mpfr or f64), rounded to float64, shaped as v.");
}
