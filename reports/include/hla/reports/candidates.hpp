#pragma once

// The implementations that the error report measures, as a table: each row names an
// implementation and a precision and knows how to run it, its gauge and its a-priori rounding
// depth on one input. CPU rows are built here; GPU rows come from gpu_candidates().

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "hla/reference/gradient.hpp"
#include "hla/reference/operator_spec.hpp"
#include "hla/reference/sequence.hpp"

namespace hla::reports {

// How inputs reach an implementation: rounded to its storage format first. The reference is then
// computed on the rounded inputs, so the report measures the error of the arithmetic alone.
enum class InputFormat { f64, f32, bf16 };
std::string_view input_format_name(InputFormat format);
// Round to nearest, ties to even, into the format (bf16: on the float32 bit pattern, after
// rounding to float32; finite inputs only).
double round_input(InputFormat format, double x);

// One implementation in one precision, run on one input.
struct CandidateRun {
  Terms<double> terms;    // num and den as computed, widened exactly to double
  Matrix<double> output;  // reference::finish in the working precision, widened
  // The gauge: the same algorithm on |q|, |k|, |v| with subtraction turned into addition
  // (Gauge), computed in double; gauge_upper_bound() makes it a bound of the exact one.
  Terms<double> gauge;
  bool has_den = true;  // false: the implementation computes no denominator (unnormalized only)
};

// One backward run (dQ, dK, dV of <dO, O>) in one precision.
struct BackwardRun {
  Gradients<double> gradients;  // with O and the forward pass's readouts, widened exactly
  Terms<double> adjoints;       // the readouts' adjoints c_hat as the run computed them
};

// A-priori rounding depths K of every entry of num and den (checking/depth.hpp):
// |num_hat - num| <= gamma(K) gauge with gamma(K) = K u / (1 - K u). They depend on the
// operator, the shapes and the chunk size only, never on the data.
using Depths = Terms<std::int64_t>;

// gamma(K) = K u / (1 - K u) for u = 2^-bits, rounded upwards; infinity when K u >= 1/2.
double gamma_bound(std::int64_t k, int bits);

// The gauge computed in double is at least (1 - gamma_53(K)) times the exact gauge, since all its
// monomials are non-negative; the result, divided by that factor, bounds the exact gauge.
Terms<double> gauge_upper_bound(const Terms<double>& computed, const Depths& depth);

struct Candidate {
  std::string implementation;  // "streaming", "scan", "chunked"; GPU rows e.g. "gpu-scan"
  std::string precision;       // "float64", "float32", "bf16-in/f32", "tf32"
  InputFormat inputs;
  int unit_roundoff_bits;  // u = 2^-bits of the arithmetic
  bool uses_chunk;         // runs once per chunk size
  bool causal_prefix;      // its outputs on a prefix equal its outputs on the whole sequence
  std::function<bool(const OperatorSpec&)> covers;
  // terms, output and has_den of one run, the gauge left empty.
  // @pre covers(spec); inputs exactly representable in `inputs`; chunk >= 1 when uses_chunk
  std::function<CandidateRun(const OperatorSpec&, const Sequence<double>&, Index chunk)> compute;
  // The gauge of the same run (@pre as for compute).
  std::function<Terms<double>(const OperatorSpec&, const Sequence<double>&, Index chunk)> gauge;
  // The depths for inputs of n tokens (@pre as for compute).
  std::function<Depths(const OperatorSpec&, Index n, Index d, Index dv, Index chunk)> depth;

  // The widest head (max of d and dv) it runs for an operator, forward or (`backward`) its gradients;
  // empty: any.
  std::function<Index(const OperatorSpec&, bool backward)> max_width;

  // The backward (docs/error_report.md, "The backward's bound"); covers_backward empty: none.
  std::function<bool(const OperatorSpec&)> covers_backward;
  // @pre covers_backward(spec); inputs and dO exactly representable in `inputs`
  std::function<BackwardRun(const OperatorSpec&, const Sequence<double>&, const Matrix<double>& d_out,
                            Index chunk)>
      backward;
  // The same backward started from the given readout adjoints, on |q|, |k|, |v| and those
  // adjoints' magnitudes, in Gauge<double>; .terms holds the gauge of its forward readouts.
  std::function<Gradients<double>(const OperatorSpec&, const Sequence<double>&, const Terms<double>& adjoints,
                                  Index chunk)>
      backward_gauge;
  // Its depths for n tokens (from symbolic readout adjoints), .terms those of its forward readouts.
  std::function<Gradients<std::int64_t>(const OperatorSpec&, Index n, Index d, Index dv, Index chunk)>
      backward_depth;

  // compute and gauge.
  CandidateRun run(const OperatorSpec& spec, const Sequence<double>& inputs, Index chunk) const {
    CandidateRun out = compute(spec, inputs, chunk);
    out.gauge = gauge(spec, inputs, chunk);
    return out;
  }
};
// The gauge and the depths depend on the algorithm alone: every row of one implementation (its
// float64, float32 and bf16-input rows) has the same gauge and depth functions, so one computation
// serves them all (hla check shares them between its reference and its own implementations).

// The a-priori error of the reference itself (streaming in 261-bit MPFR) on these inputs:
// gamma_261(K) times its gauge, per entry of num and den, given streaming's depths.
Terms<double> reference_error_bound(const OperatorSpec& spec, const Sequence<double>& inputs,
                                    const Depths& streaming_depth);
Depths streaming_depth(const OperatorSpec& spec, Index n, Index d, Index dv);

// The backward's reference: the streaming backward of the form equal to the definition, in 261-bit
// MPFR on the same inputs and dO; its own error bound comes from the streaming rows' backward_gauge
// and backward_depth (docs/error_report.md).
Gradients<Mpfr> reference_gradients(const OperatorSpec& spec, const Sequence<double>& inputs,
                                    const Matrix<double>& d_out);
Gradients<double> streaming_backward_gauge(const OperatorSpec& spec, const Sequence<double>& inputs,
                                           const Terms<double>& adjoints);
Gradients<std::int64_t> streaming_backward_depth(const OperatorSpec& spec, Index n, Index d, Index dv);

// streaming, CPU scan and the chunk-parallel form, each in float64, float32 and on bf16 inputs
// with float32 arithmetic, in the form equal to the reference (fast::default_form).
std::vector<Candidate> cpu_candidates();

// The GPU rows: empty in a build without CUDA or on a machine without a GPU. A GPU candidate
// supplies its own a-priori depth (its kernels' reduction orders are its own).
std::vector<Candidate> gpu_candidates();

// Why gpu_candidates() is empty, for the report; empty when it is not.
std::string gpu_candidates_absent_reason();

}  // namespace hla::reports
