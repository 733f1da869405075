#include "hla/cli/eval.hpp"

#include <chrono>
#include <cmath>
#include <iomanip>
#include <iostream>

#include "hla/fast/backward.hpp"
#include "hla/fast/catalogue.hpp"
#include "hla/fast/chunked.hpp"
#include "hla/fast/ranks.hpp"
#include "hla/fast/scan.hpp"
#include "hla/fast/streaming.hpp"
#include "hla/io/files.hpp"
#include "hla/io/npy.hpp"
#include "hla/reference/definition.hpp"
#include "hla/reference/memory.hpp"
#if defined(HLA_HAVE_CUDA)
#include "hla/fast/gpu.hpp"
#endif

namespace hla::cli {
namespace {

using io::NpyMatrix;

std::string entry_name(const std::string& path, std::int64_t r, std::int64_t c) {
  return path + ": entry [" + std::to_string(r) + ", " + std::to_string(c) + "]";
}

// One input entry in T: exact types need finite values (and integers for Z/p).
template <class T>
T to_scalar(double x, const std::string& path, std::int64_t r, std::int64_t c) {
  if constexpr (is_exact_v<T>) {
    if (!std::isfinite(x)) {
      throw Error(entry_name(path, r, c) + " is " + (std::isnan(x) ? "NaN" : "infinite") +
                  "; exact arithmetic needs finite inputs");
    }
  }
  if constexpr (std::is_same_v<T, ModP>) {
    if (std::trunc(x) != x) {
      throw Error(entry_name(path, r, c) + " = " + std::to_string(x) +
                  " is not an integer, as --scalar modp needs");
    }
    return to_mod_prime(Rational(x));
  } else if constexpr (std::is_same_v<T, Rational>) {
    return Rational(x);  // every finite double is a dyadic rational: exact
  } else {
    return T(x);  // f32 rounds a float64 input to nearest
  }
}

template <class T>
Matrix<T> to_matrix(const NpyMatrix& m, const std::string& path) {
  Matrix<T> out(m.rows, m.cols);
  for (std::int64_t r = 0; r < m.rows; ++r) {
    for (std::int64_t c = 0; c < m.cols; ++c) out(r, c) = to_scalar<T>(m(r, c), path, r, c);
  }
  return out;
}

void check_shapes(const EvalRequest& req, const NpyMatrix& q, const NpyMatrix& k, const NpyMatrix& v) {
  const auto shape = [](const NpyMatrix& m) {
    return "(" + std::to_string(m.rows) + ", " + std::to_string(m.cols) + ")";
  };
  if (q.cols == 0) throw Error(req.q_path + ": d = 0; queries and keys need at least one column");
  if (k.rows != q.rows) {
    throw Error(req.k_path + ": n = " + std::to_string(k.rows) + " but " + req.q_path +
                " has n = " + std::to_string(q.rows));
  }
  if (k.cols != q.cols) {
    throw Error(req.k_path + ": shape " + shape(k) + " does not match " + req.q_path + " " + shape(q) +
                " (d differs)");
  }
  if (v.rows != q.rows) {
    throw Error(req.v_path + ": n = " + std::to_string(v.rows) + " but " + req.q_path +
                " has n = " + std::to_string(q.rows));
  }
  if (v.cols == 0) throw Error(req.v_path + ": dv = 0; values need at least one column");
}

template <class T>
void write_output(const std::string& path, const Matrix<T>& o) {
  if constexpr (std::is_same_v<T, ModP>) {
    std::vector<std::uint64_t> residues(o.size());
    for (Index i = 0; i < o.size(); ++i) residues[i] = o(i / o.cols(), i % o.cols()).residue();
    io::write_npy(path, o.rows(), o.cols(), residues);
  } else {
    std::vector<double> values(o.size());
    for (Index i = 0; i < o.size(); ++i) values[i] = to_double(o(i / o.cols(), i % o.cols()));
    io::write_npy(path, o.rows(), o.cols(), values);
  }
}

template <class T>
Matrix<T> evaluate_on_gpu(const EvalRequest& req, fast::Form form, const Sequence<T>& s) {
#if defined(HLA_HAVE_CUDA)
  if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double> || std::is_same_v<T, ModP>) {
    const std::vector<Terms<T>> out = fast::gpu::terms(req.spec, form, req.impl, {s}, req.scan.chunk);
    return reference::finish(req.spec, out.front());
  }
#endif
  (void)form;
  (void)s;
  throw Error("unreachable: --impl gpu with --scalar " + std::string(scalar_kind_name(req.scalar)));
}

template <class T>
Matrix<T> evaluate_fast(const EvalRequest& req, const Sequence<T>& s) {
#if defined(HLA_HAVE_CUDA)
  if constexpr (std::is_same_v<T, float>) return fast::gpu::fast_outputs(req.spec, {s}, req.bf16_out).front();
#endif
  (void)s;
  throw Error("unreachable: --impl gpu-fast with --scalar " + std::string(scalar_kind_name(req.scalar)));
}

// The n x n reference is cubic in n: it is timed on prefixes first (64, 128, ... tokens, until one
// takes 0.2 s), and a run estimated at more than a few seconds says so, with a progress line.
// Refuses, in one line, `matrices` n x n matrices of T that this machine cannot hold.
template <class T>
void require_square_matrices(double matrices, Index n, const std::string& what) {
  const double bytes_per_entry = sizeof(T) + (is_exact_v<T> || std::is_same_v<T, Mpfr> ? 64.0 : 0.0);
  require_memory(matrices * double(n) * double(n) * bytes_per_entry, what + " at n = " + std::to_string(n));
}

template <class T>
Matrix<T> reference_output(const EvalRequest& req, const Sequence<T>& s) {
  using Clock = std::chrono::steady_clock;
  const Index n = s.length();
  require_square_matrices<T>(4, n, "--impl reference: the n x n matrices");
  double estimate = 0;
  for (Index m = 64; m < n; m *= 2) {
    const auto start = Clock::now();
    const Sequence<T> prefix{s.q.topRows(m), s.k.topRows(m), s.v.topRows(m)};
    (void)reference::terms(req.spec, prefix);
    const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
    estimate = seconds * std::pow(double(n) / double(m), 3);
    if (seconds > 0.2) break;
  }
  if (estimate < 5) return reference::output(req.spec, s);
  std::cerr
      << "hla eval: the n x n reference at n = " << n << " (--scalar " << scalar_kind_name(req.scalar)
      << ") will take about " << std::fixed << std::setprecision(0) << estimate
      << " s (cubic in n); --impl streaming computes the same operator, proven equal, in O(n (d^2 + d dv))\n";
  const auto start = Clock::now();
  auto last = start;
  return reference::output(req.spec, s, [&](Index t) {
    const auto now = Clock::now();
    if (now - last < std::chrono::seconds(5) && t + 1 < n) return;
    last = now;
    const double done = std::pow(double(t + 1) / double(n), 3);  // row t costs ~ t^2
    const double elapsed = std::chrono::duration<double>(now - start).count();
    std::cerr << "hla eval: reference " << std::setprecision(0) << 100 * done << "% (row " << t + 1 << " of "
              << n << "), " << elapsed << " s, about " << elapsed * (1 - done) / done << " s left\n";
  });
}

// The scalars that the sequence-parallel drivers are built for (fast/src/ranks_*.cpp).
template <class T>
constexpr bool splits = std::is_same_v<T, float> || std::is_same_v<T, double> || std::is_same_v<T, ModP>;

bool split(const EvalRequest& req) {
  return req.ranks != 0 || !req.slices.empty();
}

fast::Slices slices_of(const EvalRequest& req, Index n) {
  const fast::Slices slices =
      req.slices.empty() ? fast::even_slices(n, req.ranks) : fast::slices_of_lengths(req.slices);
  fast::validate(slices, n);
  return slices;
}

template <class T>
Matrix<T> evaluate(const EvalRequest& req, fast::Form form, const Sequence<T>& s) {
  using enum fast::Implementation;
  if constexpr (splits<T>) {
    if (split(req)) {
      const fast::Slices slices = slices_of(req, s.length());
#if defined(HLA_HAVE_CUDA)
      if (req.impl == gpu_scan)
        return reference::finish(req.spec,
                                 fast::gpu::ranks_terms(req.spec, form, {s}, slices, req.scan.chunk).front());
      if constexpr (std::is_same_v<T, float>) {
        if (req.impl == gpu_fast)
          return fast::gpu::ranks_fast_outputs(req.spec, {s}, slices, req.bf16_out).front();
      }
#endif
      return reference::finish(req.spec, fast::ranks_terms(req.spec, form, s, slices, req.scan));
    }
  }
  switch (req.impl) {
    case reference:
      return reference_output(req, s);
    case streaming:
      return fast::streaming_output(req.spec, form, s);
    case scan:
      return fast::scan_output(req.spec, form, s, req.scan);
    case chunked:
      return fast::chunked_output(req.spec, form, s, req.scan);
    case gpu_streaming:
    case gpu_scan:
      return evaluate_on_gpu(req, form, s);
    case gpu_fast:
      return evaluate_fast(req, s);
  }
  throw Error("unknown implementation");
}

// The gradients of <dO, O>: the reference's reverse mode on the matrix forms, the streaming backward
// (CPU or GPU), the scan's or the chunk-parallel form's (the catalogue's backward_unavailable has
// refused the rest).
template <class T>
Gradients<T> evaluate_gradients(const EvalRequest& req, fast::Form form, const Sequence<T>& s, const Matrix<T>& d_out) {
  using enum fast::Implementation;
  if constexpr (splits<T>) {
    if (split(req)) {
      const fast::Slices slices = slices_of(req, s.length());
#if defined(HLA_HAVE_CUDA)
      if (req.impl == gpu_scan)
        return fast::gpu::ranks_gradients(req.spec, form, {s}, {d_out}, slices, {gpu_scan, 0, req.scan.chunk})
            .front();
      if constexpr (std::is_same_v<T, float>) {
        if (req.impl == gpu_fast)
          return fast::gpu::ranks_fast_gradients(req.spec, {s}, {d_out}, slices).front();
      }
#endif
      return fast::ranks_gradients(req.spec, form, s, d_out, slices, req.scan);
    }
  }
  switch (req.impl) {
    case reference:
      require_square_matrices<T>(10, s.length(),
                                 "--grad with --impl reference: the n x n matrices of the adjoints");
      return reference::gradients(req.spec, s, d_out);
    case streaming:
      return fast::streaming_gradients(req.spec, form, s, d_out);
    case scan:
      return fast::scan_gradients(req.spec, form, s, d_out, req.scan);
    case chunked:
      return fast::chunked_gradients(req.spec, form, s, d_out, req.scan);
    case gpu_streaming:
    case gpu_scan:
#if defined(HLA_HAVE_CUDA)
      if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double> || std::is_same_v<T, ModP>)
        return fast::gpu::gradients(req.spec, form, {s}, {d_out}, {req.impl, 0, req.scan.chunk}).front();
#endif
      break;
    case gpu_fast:
#if defined(HLA_HAVE_CUDA)
      if constexpr (std::is_same_v<T, float>)
        return fast::gpu::fast_gradients(req.spec, {s}, {d_out}).front();
#endif
      break;
  }
  throw Error("unreachable: --impl " + std::string(fast::implementation_name(req.impl)) +
              " --grad with --scalar " + std::string(scalar_kind_name(req.scalar)));
}

// --grad and the three gradient outputs come together.
void check_gradient_flags(const EvalRequest& req, fast::Form form) {
  const std::pair<const char*, const std::string*> outputs[] = {
      {"--out-dq", &req.dq_path}, {"--out-dk", &req.dk_path}, {"--out-dv", &req.dv_path}};
  for (const auto& [flag, path] : outputs) {
    if (req.grad_path.empty() && !path->empty()) throw Error(std::string(flag) + ": needs --grad DO.npy");
    if (!req.grad_path.empty() && path->empty()) throw Error(std::string("--grad: needs ") + flag + " too");
  }
  if (req.grad_path.empty()) return;
  if (const auto why = fast::backward_unavailable(req.spec, req.impl, form)) throw Error("--grad: " + *why);
}

// A GPU implementation runs where the build has CUDA and a device is present.
void check_device(fast::Implementation impl) {
  const std::string flag = "--impl " + std::string(fast::implementation_name(impl));
#if defined(HLA_HAVE_CUDA)
  if (const auto reason = fast::gpu::unavailable_reason()) throw Error(flag + ": " + *reason);
#else
  throw Error(flag + ": this hla was built without CUDA (nvcc not found)");
#endif
}

}  // namespace

void run_eval(const EvalRequest& req) {
  if (req.form && req.impl == fast::Implementation::reference) {
    throw Error(
        "--form: only applies to --impl streaming, scan and chunked; the reference has a single form");
  }
  if (req.form && req.impl == fast::Implementation::gpu_fast)
    throw Error("--form: --impl gpu-fast has a single form");
  if (req.bf16_out && req.impl != fast::Implementation::gpu_fast)
    throw Error("--bf16-out: only --impl gpu-fast writes bf16 outputs");
  const fast::Form form = req.form.value_or(fast::default_form(req.spec, req.impl));
  fast::require_available(req.spec, req.impl, form);
  if (const auto reason = fast::unavailable(req.impl, req.scalar)) throw Error(*reason);
  if (split(req)) {
    if (req.ranks != 0 && !req.slices.empty()) throw Error("--ranks, --slices: give one of them");
    if (const auto why = fast::ranks_unavailable(req.spec, req.impl, form, !req.grad_path.empty()))
      throw Error(*why);
    if (req.scalar != ScalarKind::f64 && req.scalar != ScalarKind::f32 && req.scalar != ScalarKind::modp)
      throw Error("--ranks, --slices: with --scalar f64, f32 or modp, got " +
                  std::string(scalar_kind_name(req.scalar)));
    if (req.slices.empty()) fast::validate_ranks(req.ranks);  // before reading the inputs
  }
  if (fast::on_gpu(req.impl)) check_device(req.impl);
  fast::validate(req.scan);
  if (req.scalar == ScalarKind::modp) {
    const std::pair<const char*, const Rational*> parameters[] = {
        {"--eps", &req.spec.eps}, {"--ridge", &req.spec.ridge}, {"--decay", &req.spec.decay}};
    for (const auto& [flag, value] : parameters) {
      try {
        to_mod_prime(*value);
      } catch (const Error& e) {
        throw Error(std::string(flag) + ": " + e.what());
      }
    }
  }
  check_gradient_flags(req, form);
  const bool gradients = !req.grad_path.empty();
  std::vector<io::NamedPath> inputs{{"--q", req.q_path}, {"--k", req.k_path}, {"--v", req.v_path}};
  std::vector<io::NamedPath> outputs{{"--out", req.out_path}};
  if (gradients) {
    inputs.push_back({"--grad", req.grad_path});
    outputs.insert(outputs.end(), {{"--out-dq", req.dq_path}, {"--out-dk", req.dk_path}, {"--out-dv", req.dv_path}});
  }
  io::check_outputs(outputs, inputs);
  const NpyMatrix q = io::read_npy_matrix(req.q_path);
  const NpyMatrix k = io::read_npy_matrix(req.k_path);
  const NpyMatrix v = io::read_npy_matrix(req.v_path);
  check_shapes(req, q, k, v);
  NpyMatrix d_out;
  if (gradients) {
    d_out = io::read_npy_matrix(req.grad_path);
    if (d_out.rows != v.rows || d_out.cols != v.cols) {
      throw Error(req.grad_path + ": shape (" + std::to_string(d_out.rows) + ", " + std::to_string(d_out.cols) +
                  ") but the output is (" + std::to_string(v.rows) + ", " + std::to_string(v.cols) + ")");
    }
  }
  with_scalar(req.scalar, [&]<class T>(TypeTag<T>) {
    const Sequence<T> s{to_matrix<T>(q, req.q_path), to_matrix<T>(k, req.k_path),
                        to_matrix<T>(v, req.v_path)};
    if (!gradients) {
      write_output(req.out_path, evaluate(req, form, s));
      return;
    }
    // O comes from the gradients' own forward pass; every result is computed before the first
    // file is written.
    const Gradients<T> g = evaluate_gradients(req, form, s, to_matrix<T>(d_out, req.grad_path));
    write_output(req.out_path, g.output);
    write_output(req.dq_path, g.dq);
    write_output(req.dk_path, g.dk);
    write_output(req.dv_path, g.dv);
  });
}

}  // namespace hla::cli
