// The host side of the GPU implementations: validation, the operator's parameters in the
// scalar type, and the device-memory round trip of the convenience interface.

#include "hla/fast/gpu.hpp"

#include <cuda_runtime_api.h>

#include <bit>
#include <cstdint>
#include <limits>

#include "../cuda/launch.hpp"
#include "hla/fast/backward.hpp"
#include "hla/fast/gpu_status.hpp"
#include "hla/fast/rank_threads.hpp"
#include "hla/fast/scan.hpp"

namespace hla::fast::gpu {
namespace {

void validate_problem(const Problem& problem) {
  if (problem.batch < 0 || problem.heads < 0 || problem.length < 0) {
    throw Error("GPU: batch, heads and length must be >= 0");
  }
  if (problem.key_dim < 1) throw Error("GPU: d = " + std::to_string(problem.key_dim) + "; need d >= 1");
  if (problem.value_dim < 1) throw Error("GPU: dv = " + std::to_string(problem.value_dim) + "; need dv >= 1");
}

// The generic kernels are gpu_streaming and gpu_scan; `what` names the caller.
void require_generic(Implementation impl, const char* what) {
  if (impl != Implementation::gpu_streaming && impl != Implementation::gpu_scan)
    throw Error(std::string(what) + ": " + std::string(implementation_name(impl)) +
                " is not a generic GPU kernel");
}

// The scan's tokens per chunk: `chunk` (>= 1), at most the sequence (one chunk for n = 0).
std::int64_t scan_chunk(std::int64_t chunk, std::int64_t length) {
  if (chunk < 1) throw Error("--chunk: must be >= 1, got " + std::to_string(chunk));
  return std::min<std::int64_t>(chunk, std::max<std::int64_t>(length, 1));
}

// The backward's tokens between kept states: `checkpoint` (>= 0), or for 0 the default over `span` tokens.
std::int64_t checkpoint_or_default(std::int64_t checkpoint, std::int64_t span) {
  if (checkpoint < 0)
    throw Error("checkpoint: must be >= 0 (0: the default), got " + std::to_string(checkpoint));
  return checkpoint ? checkpoint : default_checkpoint(span);
}

// What rank_gradients refuses: another implementation than gpu_scan, or what ranks_unavailable says.
void require_rank_backward(const OperatorSpec& spec, Form form, const BackwardOptions& options) {
  if (options.impl != Implementation::gpu_scan)
    throw Error("GPU ranks: the backward splits by gpu-scan, not " +
                std::string(implementation_name(options.impl)));
  if (const auto why = ranks_unavailable(spec, Implementation::gpu_scan, form, true)) throw Error(*why);
}

// An owning device array.
template <class T>
class DeviceArray {
 public:
  explicit DeviceArray(std::size_t count) : count_(count) {
    if (count_ > 0) check(cudaMalloc(reinterpret_cast<void**>(&data_), count_ * sizeof(T)), "cudaMalloc");
  }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;
  ~DeviceArray() { cudaFree(data_); }

  T* data() { return data_; }
  void upload(const T* host, std::size_t offset, std::size_t count) {
    check(cudaMemcpy(data_ + offset, host, count * sizeof(T), cudaMemcpyHostToDevice),
          "cudaMemcpy to device");
  }
  void download(T* host, std::size_t offset, std::size_t count) const {
    check(cudaMemcpy(host, data_ + offset, count * sizeof(T), cudaMemcpyDeviceToHost), "cudaMemcpy to host");
  }

 private:
  T* data_ = nullptr;
  std::size_t count_;
};

// @pre heads is not empty
template <class U>
void check_same_shapes(const std::vector<Sequence<U>>& heads, const char* what) {
  const Sequence<U>& first = heads.front();
  for (const Sequence<U>& s : heads) {
    if (s.q.rows() != first.length() || s.k.rows() != first.length() || s.v.rows() != first.length() ||
        s.q.cols() != first.key_dim() || s.k.cols() != first.key_dim() || s.v.cols() != first.value_dim()) {
      throw Error(std::string(what) + ": every sequence-head must have the same n, d and dv");
    }
  }
}

// Every head's q, k, v on the device, one head after another, each entry converted by `convert`.
template <class In>
struct DeviceHeads {
  Problem problem;
  std::size_t keys, values;  // per head
  DeviceArray<In> q, k, v;

  template <class U, class Convert>
  DeviceHeads(const std::vector<Sequence<U>>& heads, const char* what, Convert convert)
      : problem{1, static_cast<std::int64_t>(heads.size()), heads.front().length(),
                static_cast<int>(heads.front().key_dim()), static_cast<int>(heads.front().value_dim())},
        keys(heads.front().length() * heads.front().key_dim()),
        values(heads.front().length() * heads.front().value_dim()),
        q(heads.size() * keys),
        k(heads.size() * keys),
        v(heads.size() * values) {
    check_same_shapes(heads, what);
    validate_problem(problem);
    std::vector<In> staging;
    const auto upload = [&](DeviceArray<In>& to, const Matrix<U>& from, std::size_t offset) {
      staging.resize(from.size());
      for (Index i = 0; i < from.size(); ++i) staging[i] = convert(from.data()[i]);
      to.upload(staging.data(), offset, staging.size());
    };
    for (std::size_t i = 0; i < heads.size(); ++i) {
      upload(q, heads[i].q, i * keys);
      upload(k, heads[i].k, i * keys);
      upload(v, heads[i].v, i * values);
    }
  }
};

// Uploads every head (DeviceHeads), calls run(problem, q, k, v, num, den) on the device arrays,
// and downloads num and den.
template <class In, class T, class U, class Convert, class Run>
std::vector<Terms<T>> round_trip(const std::vector<Sequence<U>>& heads, const char* what, Convert convert,
                                 Run run) {
  if (heads.empty()) return {};
  DeviceHeads<In> in(heads, what, convert);
  const Index n = in.problem.length, dv = in.problem.value_dim;
  const std::size_t h = heads.size(), values = in.values;
  DeviceArray<T> num(h * values), den(h * n);
  run(in.problem, in.q.data(), in.k.data(), in.v.data(), num.data(), den.data());
  check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  std::vector<Terms<T>> out(h, Terms<T>{Matrix<T>(n, dv), Vector<T>(n)});
  for (std::size_t i = 0; i < h; ++i) {
    num.download(out[i].num.data(), i * values, values);
    den.download(out[i].den.data(), i * n, n);
  }
  return out;
}

// round_trip through gpu::terms.
template <class In, class T, class U, class Convert>
std::vector<Terms<T>> terms_round_trip(const OperatorSpec& spec, Form form, Implementation impl,
                                       const std::vector<Sequence<U>>& heads, std::int64_t chunk,
                                       Convert convert) {
  require_available(spec, impl, form);
  return round_trip<In, T>(
      heads, "GPU", convert,
      [&](const Problem& problem, const In* q, const In* k, const In* v, T* num, T* den) {
        terms<In, T>(spec, form, impl, problem, chunk, q, k, v, num, den);
      });
}

// The operator's parameters in T; in Gauge<U> those of U (gamma and ridge are >= 0).
template <class T>
struct IsGauge : std::false_type {};
template <class U>
struct IsGauge<Gauge<U>> : std::true_type {};

template <class T>
AlgebraParams<T> device_params(const OperatorSpec& spec, Implementation impl, Form form, int d, int dv) {
  if constexpr (IsGauge<T>::value) {
    const auto p = algebra_params<typename T::value_type>(spec, impl, form, d, dv);
    return {p.id, p.d, p.dv, T(p.gamma), T(p.ridge), p.masked, p.form};
  } else {
    return algebra_params<T>(spec, impl, form, d, dv);
  }
}

}  // namespace

BFloat16 to_bfloat16(float x) {
  return bfloat16_from_float_bits(std::bit_cast<std::uint32_t>(x));
}

float to_float(BFloat16 x) {
  return std::bit_cast<float>(static_cast<std::uint32_t>(x.bits) << 16);
}

std::optional<std::string> unavailable_reason() {
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess) return std::string("no CUDA device (") + cudaGetErrorString(status) + ")";
  if (count == 0) return "no CUDA device";
  cudaDeviceProp properties{};
  if (cudaGetDeviceProperties(&properties, 0) != cudaSuccess) return "cannot query CUDA device 0";
  if (properties.major < 9) {
    return std::string("device 0 (") + properties.name + ") has compute capability " +
           std::to_string(properties.major) + "." + std::to_string(properties.minor) +
           "; the kernels are built for sm_90";
  }
  return std::nullopt;
}

template <class In, class T>
void terms(const OperatorSpec& spec, Form form, Implementation impl, const Problem& problem,
           std::int64_t chunk, const In* q, const In* k, const In* v, T* num, T* den, CUstream_st* stream) {
  require_generic(impl, "gpu::terms");
  validate_problem(problem);
  const auto params = device_params<T>(spec, impl, form, problem.key_dim, problem.value_dim);
  const std::int64_t heads = problem.batch * problem.heads;
  if (impl == Implementation::gpu_streaming) {
    detail::launch_streaming(params, heads, problem.length, q, k, v, num, den, stream);
    return;
  }
  detail::launch_scan(params, heads, problem.length, scan_chunk(chunk, problem.length), q, k, v, num, den,
                      stream);
}

template <class In, class T>
void gradients(const OperatorSpec& spec, Form form, const Problem& problem, const BackwardOptions& options,
               const In* q, const In* k, const In* v, const T* d_num, const T* d_den, T* dq, T* dk, T* dv,
               CUstream_st* stream) {
  const Implementation impl = options.impl;
  require_generic(impl, "gpu::gradients");
  if (const auto why = backward_unavailable(spec, impl, form)) throw Error(*why);
  validate_problem(problem);
  const auto params = device_params<T>(spec, impl, form, problem.key_dim, problem.value_dim);
  const std::int64_t heads = problem.batch * problem.heads;
  if (impl == Implementation::gpu_streaming) {
    const std::int64_t checkpoint = checkpoint_or_default(options.checkpoint, problem.length);
    detail::launch_streaming_backward(params, heads, problem.length, checkpoint, q, k, v, d_num, d_den, dq,
                                      dk, dv, stream);
    return;
  }
  const std::int64_t chunk = scan_chunk(options.chunk, problem.length);
  const std::int64_t checkpoint = checkpoint_or_default(options.checkpoint, chunk);
  detail::launch_scan_backward(params, heads, problem.length, chunk, checkpoint, q, k, v, d_num, d_den, dq,
                               dk, dv, stream);
}

std::optional<std::string> shape_unavailable(const OperatorSpec& spec, Form form, Implementation impl, int d,
                                             int dv, int scalar_bytes) {
  if (impl != Implementation::gpu_streaming && impl != Implementation::gpu_scan) {
    return std::string(implementation_name(impl)) + " is not a generic GPU kernel";
  }
  if (const auto reason = unavailable(spec, impl, form)) return reason;
  const auto params = algebra_params<double>(spec, impl, form, d, dv);
  const std::int64_t bytes = detail::shared_scalars(params, impl == Implementation::gpu_streaming) * scalar_bytes;
  const std::int64_t limit = detail::shared_memory_limit();
  if (bytes <= limit) return std::nullopt;
  return std::string(implementation_name(impl)) + " at d = " + std::to_string(d) + ", dv = " +
         std::to_string(dv) + " needs " + std::to_string(bytes) + " bytes of shared memory per block in " +
         std::to_string(8 * scalar_bytes) + "-bit scalars; the device allows " + std::to_string(limit);
}

struct Inputs::Arrays {
  Arrays(std::size_t keys, std::size_t values)
      : q(keys), k(keys), v(values), q32(keys), k32(keys), v32(values) {}
  DeviceArray<double> q, k, v;
  DeviceArray<float> q32, k32, v32;
};

Inputs::Inputs(std::int64_t heads, std::int64_t length, int d, int dv, const float* q, const float* k,
               const float* v, double query_scale)
    : problem_{1, heads, length, d, dv} {
  validate_problem(problem_);
  const std::size_t keys = heads * length * d, values = heads * length * dv;
  arrays_ = std::make_unique<Arrays>(keys, values);
  Arrays& a = *arrays_;
  a.q32.upload(q, 0, keys);  // as read, until scaled
  a.k32.upload(k, 0, keys);
  a.v32.upload(v, 0, values);
  detail::launch_widen(a.q32.data(), a.q.data(), keys, query_scale, nullptr);
  detail::launch_widen(a.k32.data(), a.k.data(), keys, 1, nullptr);
  detail::launch_widen(a.v32.data(), a.v.data(), values, 1, nullptr);
  detail::launch_round_to_float(a.q.data(), a.q32.data(), keys, nullptr);
  check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
}

Inputs::~Inputs() = default;

template <class T>
void Inputs::terms(const OperatorSpec& spec, Form form, Implementation impl, std::int64_t chunk, T* num,
                   T* den) const {
  const std::size_t rows = problem_.heads * problem_.length;
  DeviceArray<T> device_num(rows * problem_.value_dim), device_den(rows);
  Arrays& a = *arrays_;
  if constexpr (std::is_same_v<T, float>) {
    gpu::terms<float, float>(spec, form, impl, problem_, chunk, a.q32.data(), a.k32.data(), a.v32.data(),
                             device_num.data(), device_den.data());
  } else {
    gpu::terms<double, T>(spec, form, impl, problem_, chunk, a.q.data(), a.k.data(), a.v.data(),
                          device_num.data(), device_den.data());
  }
  check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  device_num.download(num, 0, rows * problem_.value_dim);
  device_den.download(den, 0, rows);
}
template void Inputs::terms<double>(const OperatorSpec&, Form, Implementation, std::int64_t, double*,
                                    double*) const;
template void Inputs::terms<float>(const OperatorSpec&, Form, Implementation, std::int64_t, float*,
                                   float*) const;

void Inputs::gauge(const OperatorSpec& spec, Form form, Implementation impl, std::int64_t chunk, float* num,
                   float* den) const {
  const std::size_t rows = problem_.heads * problem_.length, values = rows * problem_.value_dim;
  DeviceArray<Gauge<double>> device_num(values), device_den(rows);
  DeviceArray<float> num32(values), den32(rows);
  Arrays& a = *arrays_;
  gpu::terms<double, Gauge<double>>(spec, form, impl, problem_, chunk, a.q.data(), a.k.data(), a.v.data(),
                                    device_num.data(), device_den.data());
  detail::launch_round_up_to_float(device_num.data(), num32.data(), values, nullptr);
  detail::launch_round_up_to_float(device_den.data(), den32.data(), rows, nullptr);
  check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  num32.download(num, 0, values);
  den32.download(den, 0, rows);
}

namespace {

// The backward of every head from the readouts' adjoints d_num and zero, downloaded into host
// arrays through `out` (each gradient's device array, its host pointer and its length).
template <class In, class T, class Out>
void unnormalized_backward(const OperatorSpec& spec, Form form, const BackwardOptions& options,
                           const Problem& problem, const In* q, const In* k, const In* v,
                           const std::vector<T>& d_num, const Out& out) {
  const std::size_t rows = problem.heads * problem.length;
  const std::size_t keys = rows * problem.key_dim, values = rows * problem.value_dim;
  DeviceArray<T> device_num(values), device_den(rows), dq(keys), dk(keys), dv(values);
  device_num.upload(d_num.data(), 0, values);
  const std::vector<T> zero(rows, T(0));
  device_den.upload(zero.data(), 0, rows);
  gpu::gradients<In, T>(spec, form, problem, options, q, k, v, device_num.data(), device_den.data(),
                        dq.data(), dk.data(), dv.data());
  check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  out(dq, 0, keys);
  out(dk, 1, keys);
  out(dv, 2, values);
}

}  // namespace

template <class T>
void Inputs::gradients(const OperatorSpec& spec, Form form, const BackwardOptions& options,
                       const double* d_out, T* dq, T* dk, T* dv) const {
  if (spec.normalize) throw Error("gpu::Inputs::gradients: unnormalized operators only");
  const std::size_t values = problem_.heads * problem_.length * problem_.value_dim;
  const std::vector<T> d_num(d_out, d_out + values);  // float32: rounded to nearest
  T* to[3] = {dq, dk, dv};
  const auto out = [&](const DeviceArray<T>& from, int i, std::size_t count) {
    from.download(to[i], 0, count);
  };
  Arrays& a = *arrays_;
  if constexpr (std::is_same_v<T, float>) {
    unnormalized_backward<float, float>(spec, form, options, problem_, a.q32.data(), a.k32.data(),
                                        a.v32.data(), d_num, out);
  } else {
    unnormalized_backward<double, double>(spec, form, options, problem_, a.q.data(), a.k.data(), a.v.data(),
                                          d_num, out);
  }
}
template void Inputs::gradients<double>(const OperatorSpec&, Form, const BackwardOptions&, const double*,
                                        double*, double*, double*) const;
template void Inputs::gradients<float>(const OperatorSpec&, Form, const BackwardOptions&, const double*,
                                       float*, float*, float*) const;

void Inputs::gradient_gauge(const OperatorSpec& spec, Form form, const BackwardOptions& options,
                            const double* d_out, double* dq, double* dk, double* dv) const {
  if (spec.normalize) throw Error("gpu::Inputs::gradient_gauge: unnormalized operators only");
  using G = Gauge<double>;
  const std::size_t values = problem_.heads * problem_.length * problem_.value_dim;
  const std::vector<G> d_num(d_out, d_out + values);  // |dO|
  double* to[3] = {dq, dk, dv};
  const auto out = [&](const DeviceArray<G>& from, int i, std::size_t count) {
    std::vector<G> host(count);
    from.download(host.data(), 0, count);
    for (std::size_t j = 0; j < count; ++j) to[i][j] = host[j].value();
  };
  Arrays& a = *arrays_;
  unnormalized_backward<double, G>(spec, form, options, problem_, a.q.data(), a.k.data(), a.v.data(), d_num,
                                   out);
}

template <class T>
void finish(const OperatorSpec& spec, const Problem& problem, const T* num, const T* den, T* out,
            CUstream_st* stream) {
  validate_problem(problem);
  const std::int64_t rows = problem.batch * problem.heads * problem.length;
  if (!spec.normalize) {
    check(cudaMemcpyAsync(out, num, rows * problem.value_dim * sizeof(T), cudaMemcpyDeviceToDevice, stream),
          "cudaMemcpyAsync");
    check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
    return;
  }
  const std::int64_t zero =
      detail::launch_finish(from_rational<T>(spec.eps), rows, problem.value_dim, num, den, out, stream);
  if (zero >= 0) {
    throw Error("token " + std::to_string(zero % problem.length + 1) + " of sequence-head " +
                std::to_string(zero / problem.length) +
                ": normalized denominator: division by zero in exact arithmetic");
  }
}

struct SimulatedRanks::State {
  // One rank's view: its all_gather posts its buffer and an event, copies every rank's buffer after
  // its event, then waits, before anything later on its stream, until every rank has copied its own.
  class View final : public RankExchange {
   public:
    View(State& state, int rank) : state_(&state), rank_(rank) {}
    int rank() const override { return rank_; }
    int ranks() const override { return static_cast<int>(state_->ready.size()); }
    void all_gather(const void* send, void* receive, std::size_t bytes, CUstream_st* stream) override {
      State& st = *state_;
      check(cudaEventRecord(st.ready[rank_], stream), "cudaEventRecord");
      const std::vector<Posted> sends = st.posted.all_gather(rank_, {send, bytes});
      for (const Posted& other : sends) {  // every rank sees the same list, so all stop here or none
        if (other.bytes != bytes)
          throw Error("rank exchange: the ranks gather different sizes (" + std::to_string(bytes) + " and " +
                      std::to_string(other.bytes) + " bytes)");
      }
      for (int from = 0; from < ranks(); ++from) {
        check(cudaStreamWaitEvent(stream, st.ready[from], 0), "cudaStreamWaitEvent");
        if (bytes > 0)
          check(cudaMemcpyAsync(static_cast<char*>(receive) + from * bytes, sends[from].send, bytes,
                                cudaMemcpyDeviceToDevice, stream),
                "cudaMemcpyAsync (rank exchange)");
      }
      check(cudaEventRecord(st.done[rank_], stream), "cudaEventRecord");
      st.posted.all_gather(rank_, {});  // every rank's copies are enqueued before anyone waits on them
      for (int from = 0; from < ranks(); ++from)
        check(cudaStreamWaitEvent(stream, st.done[from], 0), "cudaStreamWaitEvent");
    }

   private:
    State* state_;
    int rank_;
  };

  explicit State(int ranks) : posted(ranks), ready(ranks, nullptr), done(ranks, nullptr) {
    for (int r = 0; r < ranks; ++r) views.emplace_back(*this, r);
    for (auto* events : {&ready, &done})
      for (cudaEvent_t& e : *events)
        check(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "cudaEventCreate");
  }
  ~State() {
    for (auto* events : {&ready, &done})
      for (cudaEvent_t e : *events) cudaEventDestroy(e);
  }

  struct Posted {
    const void* send = nullptr;
    std::size_t bytes = 0;
  };
  ThreadExchange<Posted> posted;
  std::vector<cudaEvent_t> ready, done;
  std::vector<View> views;
};

SimulatedRanks::SimulatedRanks(int ranks) {
  validate_ranks(ranks);
  state_ = std::make_unique<State>(ranks);
}
SimulatedRanks::~SimulatedRanks() = default;
RankExchange& SimulatedRanks::rank(int r) {
  return state_->views.at(static_cast<std::size_t>(r));
}
void SimulatedRanks::abandon() {
  state_->posted.abandon();
}

namespace {

// Every rank's slice summaries, all-gathered: [ranks][heads][size] in device memory the caller frees
// with cudaFreeAsync on `stream`. Not freed when something throws: another rank may still be copying.
template <class In, class T>
T* gather_summaries(const AlgebraParams<T>& params, const Problem& slice, std::int64_t step, const In* q,
                    const In* k, const In* v, RankExchange& exchange, CUstream_st* stream) {
  const std::int64_t heads = slice.batch * slice.heads, scalars = heads * detail::summary_scalars(params);
  T *mine = nullptr, *gathered = nullptr;
  check(cudaMallocAsync(reinterpret_cast<void**>(&mine), std::max<std::int64_t>(scalars, 1) * sizeof(T),
                        stream),
        "cudaMallocAsync (rank summaries)");
  check(cudaMallocAsync(reinterpret_cast<void**>(&gathered),
                        std::max<std::int64_t>(scalars * exchange.ranks(), 1) * sizeof(T), stream),
        "cudaMallocAsync (gathered summaries)");
  detail::launch_rank_summaries(params, heads, slice.length, step, q, k, v, mine, stream);
  exchange.all_gather(mine, gathered, scalars * sizeof(T), stream);
  check(cudaFreeAsync(mine, stream), "cudaFreeAsync");
  return gathered;
}

}  // namespace

template <class In, class T>
void rank_terms(const OperatorSpec& spec, Form form, const Problem& slice, std::int64_t chunk, const In* q,
                const In* k, const In* v, T* num, T* den, RankExchange& exchange, CUstream_st* stream) {
  if (const auto why = ranks_unavailable(spec, Implementation::gpu_scan, form)) throw Error(*why);
  validate_problem(slice);
  const auto params = device_params<T>(spec, Implementation::gpu_scan, form, slice.key_dim, slice.value_dim);
  const std::int64_t step = scan_chunk(chunk, slice.length);
  T* gathered = gather_summaries(params, slice, step, q, k, v, exchange, stream);
  detail::launch_rank_scan(params, slice.batch * slice.heads, slice.length, step, q, k, v,
                           static_cast<const T*>(gathered), exchange.rank(), num, den, stream);
  check(cudaFreeAsync(gathered, stream), "cudaFreeAsync");
}

template <class In, class T>
void rank_gradients(const OperatorSpec& spec, Form form, const Problem& slice, const BackwardOptions& options,
                    const In* q, const In* k, const In* v, const T* d_num, const T* d_den, T* dq, T* dk,
                    T* dv, RankExchange& exchange, CUstream_st* stream) {
  require_rank_backward(spec, form, options);
  validate_problem(slice);
  const auto params = device_params<T>(spec, Implementation::gpu_scan, form, slice.key_dim, slice.value_dim);
  const std::int64_t step = scan_chunk(options.chunk, slice.length);
  const std::int64_t checkpoint = checkpoint_or_default(options.checkpoint, step);
  T* gathered = gather_summaries(params, slice, step, q, k, v, exchange, stream);
  detail::launch_rank_scan_backward(
      params, slice.batch * slice.heads, slice.length, step, checkpoint, q, k, v, d_num, d_den, dq, dk, dv,
      static_cast<const T*>(gathered), exchange.rank(), exchange.ranks(),
      [&](const void* send, void* receive, std::size_t bytes) {
        exchange.all_gather(send, receive, bytes, stream);
      },
      stream);
  check(cudaFreeAsync(gathered, stream), "cudaFreeAsync");
}

#define HLA_GPU_RANK_TERMS(In, T)                                                                     \
  template void rank_terms<In, T>(const OperatorSpec&, Form, const Problem&, std::int64_t, const In*, \
                                  const In*, const In*, T*, T*, RankExchange&, CUstream_st*);
HLA_GPU_RANK_TERMS(float, float)
HLA_GPU_RANK_TERMS(BFloat16, float)
HLA_GPU_RANK_TERMS(double, double)
HLA_GPU_RANK_TERMS(ModP, ModP)
#undef HLA_GPU_RANK_TERMS
#define HLA_GPU_RANK_GRADIENTS(In, T)                                                                    \
  template void rank_gradients<In, T>(const OperatorSpec&, Form, const Problem&, const BackwardOptions&, \
                                      const In*, const In*, const In*, const T*, const T*, T*, T*, T*,   \
                                      RankExchange&, CUstream_st*);
HLA_GPU_RANK_GRADIENTS(float, float)
HLA_GPU_RANK_GRADIENTS(BFloat16, float)
HLA_GPU_RANK_GRADIENTS(double, double)
HLA_GPU_RANK_GRADIENTS(ModP, ModP)
#undef HLA_GPU_RANK_GRADIENTS

namespace {

// body(r, exchange, stream) for each rank r of `slices`, simulated: a thread each with its own stream on
// the caller's device. The stream is blocking, so ordered after the legacy stream's uploads.
template <class Body>
void on_simulated_ranks(const Slices& slices, const Body& body) {
  int device = 0;
  check(cudaGetDevice(&device), "cudaGetDevice");
  SimulatedRanks ranks(slices.ranks());
  run_ranks(
      slices.ranks(),
      [&](int r) {
        check(cudaSetDevice(device), "cudaSetDevice");
        cudaStream_t stream = nullptr;
        check(cudaStreamCreate(&stream), "cudaStreamCreate");
        try {
          body(r, ranks.rank(r), stream);
        } catch (...) {
          cudaStreamSynchronize(stream);
          cudaStreamDestroy(stream);
          throw;
        }
        check(cudaStreamDestroy(stream), "cudaStreamDestroy");
      },
      [&] { ranks.abandon(); });
}

// ranks_terms: each rank's slice of every head uploaded to its own arrays (round_trip), rank_terms, its
// rows of the results downloaded.
template <class T>
std::vector<Terms<T>> ranks_round_trip(const OperatorSpec& spec, Form form,
                                       const std::vector<Sequence<T>>& heads, const Slices& slices,
                                       std::int64_t chunk) {
  if (const auto why = ranks_unavailable(spec, Implementation::gpu_scan, form)) throw Error(*why);
  if (heads.empty()) return {};
  check_same_shapes(heads, "GPU ranks");
  const Index n = heads.front().length(), dv = heads.front().value_dim();
  validate(slices, n, 1);
  std::vector<Terms<T>> out(heads.size(), Terms<T>{Matrix<T>(n, dv), Vector<T>(n)});
  on_simulated_ranks(slices, [&](int r, RankExchange& exchange, cudaStream_t stream) {
    const Index begin = slices.begin(r), length = slices.length(r);
    std::vector<Sequence<T>> mine;
    for (const Sequence<T>& s : heads) mine.push_back(tokens_of(s, begin, length));
    const std::vector<Terms<T>> part = round_trip<T, T>(
        mine, "GPU ranks", [](T x) { return x; },
        [&](const Problem& problem, const T* q, const T* k, const T* v, T* num, T* den) {
          rank_terms<T, T>(spec, form, problem, chunk, q, k, v, num, den, exchange, stream);
        });
    for (std::size_t h = 0; h < heads.size(); ++h) {
      out[h].num.middleRows(begin, length) = part[h].num;
      out[h].den.segment(begin, length) = part[h].den;
    }
  });
  return out;
}

// ranks_gradients: the split forward, the readouts' adjoints on the host, then each rank's slice of
// every head and of those adjoints uploaded, rank_gradients, its rows of the gradients downloaded.
template <class T>
std::vector<Gradients<T>> ranks_gradients_round_trip(const OperatorSpec& spec, Form form,
                                                     const std::vector<Sequence<T>>& heads,
                                                     const std::vector<Matrix<T>>& d_outs,
                                                     const Slices& slices, const BackwardOptions& options) {
  require_rank_backward(spec, form, options);  // before the forward
  if (d_outs.size() != heads.size()) throw Error("GPU ranks backward: one dO per sequence-head");
  const std::vector<Terms<T>> forward = ranks_round_trip(spec, form, heads, slices, options.chunk);
  if (heads.empty()) return {};
  const Index n = heads.front().length(), d = heads.front().key_dim(), dv = heads.front().value_dim();
  std::vector<Terms<T>> adjoints;
  std::vector<Gradients<T>> out;
  for (std::size_t h = 0; h < heads.size(); ++h) {
    adjoints.push_back(reference::finish_adjoint(spec, forward[h], d_outs[h]));
    out.push_back({Matrix<T>(n, d), Matrix<T>(n, d), Matrix<T>(n, dv), reference::finish(spec, forward[h]),
                   forward[h]});
  }
  on_simulated_ranks(slices, [&](int r, RankExchange& exchange, cudaStream_t stream) {
    const Index begin = slices.begin(r), length = slices.length(r);
    std::vector<Sequence<T>> mine;
    for (const Sequence<T>& s : heads) mine.push_back(tokens_of(s, begin, length));
    DeviceHeads<T> in(mine, "GPU ranks backward", [](T x) { return x; });
    const std::size_t h = heads.size(), keys = in.keys, values = in.values;
    DeviceArray<T> d_num(h * values), d_den(h * length), dq(h * keys), dk(h * keys), dvalue(h * values);
    for (std::size_t i = 0; i < h; ++i) {
      d_num.upload(adjoints[i].num.data() + begin * dv, i * values, values);
      d_den.upload(adjoints[i].den.data() + begin, i * length, length);
    }
    rank_gradients<T, T>(spec, form, in.problem, options, in.q.data(), in.k.data(), in.v.data(), d_num.data(),
                         d_den.data(), dq.data(), dk.data(), dvalue.data(), exchange, stream);
    check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
    for (std::size_t i = 0; i < h; ++i) {
      dq.download(out[i].dq.data() + begin * d, i * keys, keys);
      dk.download(out[i].dk.data() + begin * d, i * keys, keys);
      dvalue.download(out[i].dv.data() + begin * dv, i * values, values);
    }
  });
  return out;
}

}  // namespace

std::vector<Terms<float>> ranks_terms(const OperatorSpec& spec, Form form,
                                      const std::vector<Sequence<float>>& heads, const Slices& slices,
                                      std::int64_t chunk) {
  return ranks_round_trip(spec, form, heads, slices, chunk);
}
std::vector<Terms<double>> ranks_terms(const OperatorSpec& spec, Form form,
                                       const std::vector<Sequence<double>>& heads, const Slices& slices,
                                       std::int64_t chunk) {
  return ranks_round_trip(spec, form, heads, slices, chunk);
}
std::vector<Terms<ModP>> ranks_terms(const OperatorSpec& spec, Form form,
                                     const std::vector<Sequence<ModP>>& heads, const Slices& slices,
                                     std::int64_t chunk) {
  return ranks_round_trip(spec, form, heads, slices, chunk);
}

std::vector<Gradients<float>> ranks_gradients(const OperatorSpec& spec, Form form,
                                              const std::vector<Sequence<float>>& heads,
                                              const std::vector<Matrix<float>>& d_outs, const Slices& slices,
                                              const BackwardOptions& options) {
  return ranks_gradients_round_trip(spec, form, heads, d_outs, slices, options);
}
std::vector<Gradients<double>> ranks_gradients(const OperatorSpec& spec, Form form,
                                               const std::vector<Sequence<double>>& heads,
                                               const std::vector<Matrix<double>>& d_outs,
                                               const Slices& slices, const BackwardOptions& options) {
  return ranks_gradients_round_trip(spec, form, heads, d_outs, slices, options);
}
std::vector<Gradients<ModP>> ranks_gradients(const OperatorSpec& spec, Form form,
                                             const std::vector<Sequence<ModP>>& heads,
                                             const std::vector<Matrix<ModP>>& d_outs, const Slices& slices,
                                             const BackwardOptions& options) {
  return ranks_gradients_round_trip(spec, form, heads, d_outs, slices, options);
}

std::vector<Terms<float>> terms(const OperatorSpec& spec, Form form, Implementation impl,
                                const std::vector<Sequence<float>>& heads, std::int64_t chunk) {
  return terms_round_trip<float, float>(spec, form, impl, heads, chunk, [](float x) { return x; });
}
std::vector<Terms<double>> terms(const OperatorSpec& spec, Form form, Implementation impl,
                                 const std::vector<Sequence<double>>& heads, std::int64_t chunk) {
  return terms_round_trip<double, double>(spec, form, impl, heads, chunk, [](double x) { return x; });
}
std::vector<Terms<ModP>> terms(const OperatorSpec& spec, Form form, Implementation impl,
                               const std::vector<Sequence<ModP>>& heads, std::int64_t chunk) {
  return terms_round_trip<ModP, ModP>(spec, form, impl, heads, chunk, [](ModP x) { return x; });
}

std::vector<Terms<float>> terms_bf16(const OperatorSpec& spec, Form form, Implementation impl,
                                     const std::vector<Sequence<float>>& heads, std::int64_t chunk) {
  return terms_round_trip<BFloat16, float>(spec, form, impl, heads, chunk,
                                           [](float x) { return to_bfloat16(x); });
}

namespace {

// gpu::terms for the forward (O, and the readouts a normalized operator's adjoint needs), the
// adjoints of the readouts on the host, then gpu::gradients; q, k, v converted by `convert`.
template <class In, class T, class U, class Convert>
std::vector<Gradients<T>> gradients_round_trip(const OperatorSpec& spec, Form form,
                                               const std::vector<Sequence<U>>& heads,
                                               const std::vector<Matrix<T>>& d_outs,
                                               const BackwardOptions& options, Convert convert) {
  if (const auto why = backward_unavailable(spec, options.impl, form)) throw Error(*why);
  if (d_outs.size() != heads.size()) throw Error("GPU backward: one dO per sequence-head");
  const std::vector<Terms<T>> forward =
      terms_round_trip<In, T>(spec, form, options.impl, heads, options.chunk, convert);
  if (heads.empty()) return {};
  DeviceHeads<In> in(heads, "GPU backward", convert);
  const Index n = in.problem.length, d = in.problem.key_dim, dv = in.problem.value_dim;
  const std::size_t h = heads.size(), keys = in.keys, values = in.values;
  DeviceArray<T> d_num(h * values), d_den(h * n), dq(h * keys), dk(h * keys), dvalue(h * values);
  std::vector<Gradients<T>> out;
  for (std::size_t i = 0; i < h; ++i) {
    const Terms<T> adjoint = reference::finish_adjoint(spec, forward[i], d_outs[i]);
    d_num.upload(adjoint.num.data(), i * values, values);
    d_den.upload(adjoint.den.data(), i * n, n);
    out.push_back({Matrix<T>(n, d), Matrix<T>(n, d), Matrix<T>(n, dv), reference::finish(spec, forward[i]),
                   forward[i]});
  }
  gradients<In, T>(spec, form, in.problem, options, in.q.data(), in.k.data(), in.v.data(), d_num.data(),
                   d_den.data(), dq.data(), dk.data(), dvalue.data());
  check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  for (std::size_t i = 0; i < h; ++i) {
    dq.download(out[i].dq.data(), i * keys, keys);
    dk.download(out[i].dk.data(), i * keys, keys);
    dvalue.download(out[i].dv.data(), i * values, values);
  }
  return out;
}

}  // namespace

std::vector<Gradients<float>> gradients(const OperatorSpec& spec, Form form,
                                        const std::vector<Sequence<float>>& heads,
                                        const std::vector<Matrix<float>>& d_outs,
                                        const BackwardOptions& options) {
  return gradients_round_trip<float, float>(spec, form, heads, d_outs, options, [](float x) { return x; });
}
std::vector<Gradients<double>> gradients(const OperatorSpec& spec, Form form,
                                         const std::vector<Sequence<double>>& heads,
                                         const std::vector<Matrix<double>>& d_outs,
                                         const BackwardOptions& options) {
  return gradients_round_trip<double, double>(spec, form, heads, d_outs, options, [](double x) { return x; });
}
std::vector<Gradients<ModP>> gradients(const OperatorSpec& spec, Form form,
                                       const std::vector<Sequence<ModP>>& heads,
                                       const std::vector<Matrix<ModP>>& d_outs,
                                       const BackwardOptions& options) {
  return gradients_round_trip<ModP, ModP>(spec, form, heads, d_outs, options, [](ModP x) { return x; });
}
std::vector<Gradients<float>> gradients_bf16(const OperatorSpec& spec, Form form,
                                             const std::vector<Sequence<float>>& heads,
                                             const std::vector<Matrix<float>>& d_outs,
                                             const BackwardOptions& options) {
  return gradients_round_trip<BFloat16, float>(spec, form, heads, d_outs, options,
                                               [](float x) { return to_bfloat16(x); });
}

namespace {

// One gamma in (0, 1] per head, or none.
void validate_head_decays(const Problem& problem, std::span<const double> head_decays,
                          const std::string& what) {
  if (!head_decays.empty() && static_cast<std::int64_t>(head_decays.size()) != problem.heads) {
    throw Error(what + ": one decay per head: " + std::to_string(problem.heads) + " heads, " +
                std::to_string(head_decays.size()) + " decays");
  }
  for (std::size_t h = 0; h < head_decays.size(); ++h) {
    if (!(head_decays[h] > 0 && head_decays[h] <= 1)) {
      throw Error(what + ": the decay of head " + std::to_string(h) + " is " +
                  std::to_string(head_decays[h]) + "; gamma must be in (0, 1]");
    }
  }
}

// The shapes the matrix units' kernels take: d and dv multiples of fast_width_step up to fast_width
// (rows of whole 16-byte pieces for the copy engine) and, tensor-map coordinates being 32-bit,
// batch * heads * n below 2^31; device pointers 16-byte aligned (the copy engine's rows).
// `wide`: heads up to fast_wide_width (the forward without checkpoints).
void validate_fast_problem(const Problem& problem, const std::string& what, bool wide = false) {
  validate_problem(problem);
  const auto covers = [wide](int d) { return wide ? fast_covers_wide_width(d) : fast_covers_width(d); };
  if (!covers(problem.key_dim) || !covers(problem.value_dim)) {
    throw Error(what + ": d and dv must be multiples of " + std::to_string(fast_width_step) + " up to " +
                std::to_string(wide ? fast_wide_width : fast_width) + ", got d = " +
                std::to_string(problem.key_dim) + ", dv = " + std::to_string(problem.value_dim) + " (" +
                (wide ? std::string()
                      : "wider, up to " + std::to_string(fast_wide_width) +
                            ", only the forward, unsplit and without checkpoints; ") +
                "the generic GPU kernels, --impl gpu or gpu-streaming, take any)");
  }
  if (problem.batch * problem.heads * problem.length > std::numeric_limits<std::int32_t>::max()) {
    throw Error(what + ": batch * heads * n must be below 2^31, got " +
                std::to_string(problem.batch * problem.heads * problem.length));
  }
}
bool aligned16(const void* p) {
  return reinterpret_cast<std::uintptr_t>(p) % 16 == 0;
}

// The heads' decays on the device for one launch, in stream order (null without them).
class DeviceDecays {
 public:
  DeviceDecays(std::span<const double> head_decays, CUstream_st* stream) : stream_(stream) {
    if (head_decays.empty()) return;
    check(cudaMallocAsync(reinterpret_cast<void**>(&data_), head_decays.size() * sizeof(double), stream),
          "cudaMallocAsync");
    const cudaError_t copied = cudaMemcpyAsync(data_, head_decays.data(), head_decays.size() * sizeof(double),
                                               cudaMemcpyHostToDevice, stream);
    if (copied != cudaSuccess) {
      cudaFreeAsync(data_, stream);
      check(copied, "cudaMemcpyAsync");
    }
  }
  ~DeviceDecays() {
    if (data_) cudaFreeAsync(data_, stream_);
  }
  DeviceDecays(const DeviceDecays&) = delete;
  DeviceDecays& operator=(const DeviceDecays&) = delete;
  const double* data() const { return data_; }

 private:
  double* data_ = nullptr;
  CUstream_st* stream_;
};

}  // namespace

namespace {

// fast_forward's checks, and the launch they allow (head_decays still to be put on the device).
detail::FastLaunch fast_launch(const OperatorSpec& spec, const Problem& problem, const BFloat16* q,
                               const BFloat16* k, const BFloat16* v, const FastOutput& out,
                               std::span<const double> head_decays) {
  require_available(spec, Implementation::gpu_fast, Form::published);
  validate_fast_problem(problem, "fast path", !out.checkpoints);
  if (!aligned16(q) || !aligned16(k) || !aligned16(v) || !aligned16(out.out)) {
    throw Error("fast path: q, k, v and the output must start at 16-byte aligned addresses");
  }
  // The fast backward covers every operator the forward does but hla3, whose checkpoints it refuses.
  if (out.checkpoints && !aligned16(out.checkpoints))
    throw Error("fast path: the checkpoints must start at a 16-byte aligned address");
  if (out.checkpoints && spec.variant == Variant::hla3)
    throw Error("fast path: hla3 writes no checkpoints (the fast backward covers hla2 and ahla)");
  if (out.den && !spec.normalize) throw Error("fast path: den is written for a normalized operator only");
  if (out.den && out.bf16) throw Error("fast path: with den, out gets num in float32 (bf16 = false)");
  if (spec.ridge != 0 && !head_decays.empty()) {
    throw Error("fast path: --ridge with decays per head is not covered (the ridge takes gamma = 1)");
  }
  validate_head_decays(problem, head_decays, "fast path");
  detail::FastLaunch how;
  how.variant = spec.variant;
  how.key_dim = problem.key_dim;
  how.value_dim = problem.value_dim;
  how.normalize = spec.normalize;
  how.decay = to_double(spec.decay);
  how.ridge = static_cast<float>(to_double(spec.ridge));
  how.heads_per_batch = problem.heads;
  how.eps = static_cast<float>(to_double(spec.eps));
  how.out = out.out;
  how.bf16_out = out.bf16;
  how.den = out.den;
  how.checkpoints = out.checkpoints;
  return how;
}

}  // namespace

void fast_forward(const OperatorSpec& spec, const Problem& problem, const BFloat16* q, const BFloat16* k,
                  const BFloat16* v, const FastOutput& out, CUstream_st* stream,
                  std::span<const double> head_decays) {
  detail::FastLaunch how = fast_launch(spec, problem, q, k, v, out, head_decays);
  const DeviceDecays decays(head_decays, stream);
  how.head_decays = decays.data();
  detail::launch_fast(how, problem.batch * problem.heads, problem.length, q, k, v, stream);
}

namespace {

// The split of a sequence on the fast path's ranks (the same checks on every rank, so that a bad split
// throws on all of them alike: the longest slice's problem too, before the rank's own is checked), and
// the rank's part of it, its all-gather through `exchange`.
detail::FastRank fast_rank_part(const Slices& slices, const Problem& slice, RankExchange& exchange,
                                CUstream_st* stream) {
  const int rank = exchange.rank(), ranks = exchange.ranks();
  if (slices.ranks() != ranks)
    throw Error("fast path across ranks: " + std::to_string(slices.ranks()) + " slices for " +
                std::to_string(ranks) + " ranks");
  if (slices.length(rank) != slice.length)
    throw Error("fast path across ranks: rank " + std::to_string(rank) + " holds " +
                std::to_string(slice.length) + " tokens, its slice " + std::to_string(slices.length(rank)));
  for (int r = 0; r + 1 < ranks; ++r) {
    if (slices.length(r) != slices.length(0) || slices.length(r) % 64 != 0)
      throw Error(
          "fast path across ranks: every slice but the last must have the same length, a multiple of "
          "64 tokens (slice " +
          std::to_string(r) + " has " + std::to_string(slices.length(r)) + ")");
  }
  Problem longest = slice;
  for (int r = 0; r < ranks; ++r) longest.length = std::max(longest.length, slices.length(r));
  validate_fast_problem(longest, "fast path across ranks");
  return {rank, ranks, slices.length(0),
          [&exchange, stream](const void* send, void* receive, std::size_t bytes) {
            exchange.all_gather(send, receive, bytes, stream);
          }};
}

}  // namespace

void rank_fast_forward(const OperatorSpec& spec, const Problem& slice, const Slices& slices,
                       const BFloat16* q, const BFloat16* k, const BFloat16* v, const FastOutput& out,
                       RankExchange& exchange, CUstream_st* stream, std::span<const double> head_decays) {
  const detail::FastRank part = fast_rank_part(slices, slice, exchange, stream);
  detail::FastLaunch how = fast_launch(spec, slice, q, k, v, out, head_decays);
  const DeviceDecays decays(head_decays, stream);
  how.head_decays = decays.data();
  detail::launch_fast_rank(how, slice.batch * slice.heads, slice.length, q, k, v, part, stream);
}

std::int64_t fast_checkpoint_bytes(const OperatorSpec& spec, const Problem& problem) {
  if (problem.key_dim > fast_width || problem.value_dim > fast_width) return 0;  // recomputed instead
  const std::int64_t chunks = (problem.length + 63) / 64;
  return problem.batch * problem.heads * chunks * detail::checkpoint_bytes(spec.normalize);
}

namespace {

// fast_backward's checks, and the launch they allow (head_decays still to be put on the device).
detail::FastBackwardLaunch fast_backward_launch(const OperatorSpec& spec, const Problem& problem,
                                                const BFloat16* q, const BFloat16* k, const BFloat16* v,
                                                const BFloat16* d_num, const float* d_den,
                                                const void* checkpoints, float* dq, float* dk, float* dv,
                                                std::span<const double> head_decays) {
  if (const auto why = backward_unavailable(spec, Implementation::gpu_fast, Form::published))
    throw Error(*why);
  validate_fast_problem(problem, "fast backward", true);
  const bool wide = problem.key_dim > fast_width || problem.value_dim > fast_width;
  if (wide && checkpoints)
    throw Error("fast backward: heads wider than " + std::to_string(fast_width) +
                " take no checkpoints (the backward recomputes the forward's products)");
  if (!aligned16(q) || !aligned16(k) || !aligned16(v) || !aligned16(d_num) || !aligned16(checkpoints)) {
    throw Error("fast backward: q, k, v, d_num and the checkpoints must start at 16-byte aligned addresses");
  }
  // An empty rank's slice has no arrays to give (zero tokens: nothing is read or written).
  const bool tokens = problem.length > 0 && problem.batch * problem.heads > 0;
  if (tokens && (!dq || !dk || !dv)) throw Error("fast backward: dq, dk and dv must be given");
  validate_head_decays(problem, head_decays, "fast backward");
  if (tokens && (!q || !k || !v || !d_num || (!wide && !checkpoints)))
    throw Error("fast backward: q, k, v, d_num and the checkpoints must be given");
  if (reinterpret_cast<std::uintptr_t>(d_den) % alignof(float) != 0)
    throw Error("fast backward: d_den must start at a 4-byte aligned address");
  if (tokens && spec.normalize && !d_den)
    throw Error("fast backward: a normalized operator needs d_den, the adjoint of den");
  if (!spec.normalize && d_den) throw Error("fast backward: d_den is for a normalized operator only");
  if (spec.ridge != 0 && !head_decays.empty())
    throw Error("fast backward: --ridge with decays per head is not covered (the ridge takes gamma = 1)");
  const auto pairs_aligned = [](const float* p) { return reinterpret_cast<std::uintptr_t>(p) % 8 == 0; };
  if (!pairs_aligned(dq) || !pairs_aligned(dk) || !pairs_aligned(dv))
    throw Error("fast backward: dq, dk and dv must start at 8-byte aligned addresses");
  return {.ahla = spec.variant == Variant::ahla,
          .key_dim = problem.key_dim,
          .value_dim = problem.value_dim,
          .normalize = spec.normalize,
          .d_den = d_den,
          .decay = to_double(spec.decay),
          .ridge = static_cast<float>(to_double(spec.ridge)),
          .head_decays = nullptr,
          .heads_per_batch = problem.heads,
          .checkpoints = checkpoints,
          .dq = dq,
          .dk = dk,
          .dv = dv};
}

}  // namespace

void fast_backward(const OperatorSpec& spec, const Problem& problem, const BFloat16* q, const BFloat16* k,
                   const BFloat16* v, const BFloat16* d_num, const float* d_den, const void* checkpoints,
                   float* dq, float* dk, float* dv, CUstream_st* stream,
                   std::span<const double> head_decays) {
  detail::FastBackwardLaunch how =
      fast_backward_launch(spec, problem, q, k, v, d_num, d_den, checkpoints, dq, dk, dv, head_decays);
  const DeviceDecays decays(head_decays, stream);
  how.head_decays = decays.data();
  detail::launch_fast_backward(how, problem.batch * problem.heads, problem.length, q, k, v, d_num, stream);
}

void rank_fast_backward(const OperatorSpec& spec, const Problem& slice, const Slices& slices,
                        const BFloat16* q, const BFloat16* k, const BFloat16* v, const BFloat16* d_num,
                        const float* d_den, const void* checkpoints, float* dq, float* dk, float* dv,
                        RankExchange& exchange, CUstream_st* stream, std::span<const double> head_decays) {
  const detail::FastRank part = fast_rank_part(slices, slice, exchange, stream);
  detail::FastBackwardLaunch how =
      fast_backward_launch(spec, slice, q, k, v, d_num, d_den, checkpoints, dq, dk, dv, head_decays);
  const DeviceDecays decays(head_decays, stream);
  how.head_decays = decays.data();
  detail::launch_fast_rank_backward(how, slice.batch * slice.heads, slice.length, q, k, v, d_num, part,
                                    stream);
}

namespace {

// The forward with checkpoints and the backward over the sequence-heads `in` holds, in `stream`:
// forward(out) launches the forward into `out`, backward(d_num, d_den, checkpoints, dq, dk, dv) the
// backward; adjoints(i, terms) gives head i's readouts' adjoints from its forward terms (num float32;
// den zero unnormalized), d_num then rounded to bf16. Each head's gradients, with the forward's terms
// and its outputs as the kernel writes them (num, or num times 1 / (den + eps) in float32).
template <class Forward, class Backward, class Adjoints>
std::vector<Gradients<float>> fast_train_pass(const OperatorSpec& spec, const DeviceHeads<BFloat16>& in,
                                              const Problem& problem, CUstream_st* stream,
                                              const Forward& forward, const Backward& backward,
                                              const Adjoints& adjoints) {
  const Index n = problem.length, d = problem.key_dim, dv = problem.value_dim;
  const std::size_t h = problem.batch * problem.heads, keys = in.keys, values = in.values;
  DeviceArray<BFloat16> d_num(h * values),
      checkpoints(fast_checkpoint_bytes(spec, problem) / sizeof(BFloat16));
  DeviceArray<float> num(h * values), den(h * n), d_den(h * n), dq(h * keys), dk(h * keys),
      dvalue(h * values);
  forward(FastOutput{num.data(), false, spec.normalize ? den.data() : nullptr, checkpoints.data()});
  check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
  std::vector<Gradients<float>> result(h);
  std::vector<BFloat16> staging(values);
  for (std::size_t i = 0; i < h; ++i) {
    Gradients<float>& g = result[i];
    g.terms = {Matrix<float>(n, dv), Vector<float>::Zero(n)};
    num.download(g.terms.num.data(), i * values, values);
    if (spec.normalize) den.download(g.terms.den.data(), i * n, n);
    const Terms<float> adjoint = adjoints(i, g.terms);
    for (std::size_t j = 0; j < values; ++j) staging[j] = to_bfloat16(adjoint.num.data()[j]);
    d_num.upload(staging.data(), i * values, values);
    if (spec.normalize) d_den.upload(adjoint.den.data(), i * n, n);
    g.output = g.terms.num;
    if (spec.normalize) {
      const float eps = static_cast<float>(to_double(spec.eps));
      for (Index t = 0; t < n; ++t) g.output.row(t) *= 1.0f / (g.terms.den(t) + eps);
    }
  }
  backward(d_num.data(), spec.normalize ? d_den.data() : nullptr, checkpoints.data(), dq.data(), dk.data(),
           dvalue.data());
  check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
  for (std::size_t i = 0; i < h; ++i) {
    Gradients<float>& g = result[i];
    g.dq = Matrix<float>(n, d), g.dk = Matrix<float>(n, d), g.dv = Matrix<float>(n, dv);
    dq.download(g.dq.data(), i * keys, keys);
    dk.download(g.dk.data(), i * keys, keys);
    dvalue.download(g.dv.data(), i * values, values);
  }
  return result;
}

// fast_train_pass on the whole sequences, on the legacy stream, the sequence-heads taken as batch x
// heads (the callers check the adjoints they are given before any device work).
template <class Adjoints>
std::vector<Gradients<float>> fast_round_trip_gradients(const OperatorSpec& spec,
                                                        const std::vector<Sequence<float>>& heads,
                                                        std::span<const double> head_decays,
                                                        std::int64_t batch, const Adjoints& adjoints) {
  if (const auto why = backward_unavailable(spec, Implementation::gpu_fast, Form::published))
    throw Error(*why);
  if (heads.empty()) return {};
  if (batch < 1 || static_cast<std::int64_t>(heads.size()) % batch != 0)
    throw Error("fast backward: the sequence-heads must be batch x heads");
  DeviceHeads<BFloat16> in(heads, "fast backward", [](float x) { return to_bfloat16(x); });
  Problem problem = in.problem;
  problem.batch = batch;
  problem.heads /= batch;
  const auto q = in.q.data(), k = in.k.data(), v = in.v.data();
  return fast_train_pass(
      spec, in, problem, nullptr,
      [&](const FastOutput& out) { fast_forward(spec, problem, q, k, v, out, nullptr, head_decays); },
      [&](const BFloat16* d_num, const float* d_den, const void* checkpoints, float* dq, float* dk,
          float* dv) {
        fast_backward(spec, problem, q, k, v, d_num, d_den, checkpoints, dq, dk, dv, nullptr, head_decays);
      },
      adjoints);
}

}  // namespace

std::vector<Gradients<float>> fast_gradients(const OperatorSpec& spec,
                                             const std::vector<Sequence<float>>& heads,
                                             const std::vector<Matrix<float>>& d_outs,
                                             std::span<const double> head_decays) {
  if (d_outs.size() != heads.size()) throw Error("fast backward: one dO per sequence-head");
  for (std::size_t i = 0; i < heads.size(); ++i)
    if (d_outs[i].rows() != heads[i].length() || d_outs[i].cols() != heads[i].value_dim())
      throw Error("fast backward: dO must have the output's shape");
  return fast_round_trip_gradients(spec, heads, head_decays, 1,
                                   [&](std::size_t i, const Terms<float>& terms) {
                                     return reference::finish_adjoint(spec, terms, d_outs[i]);
                                   });
}

std::vector<Gradients<float>> fast_readout_gradients(const OperatorSpec& spec,
                                                     const std::vector<Sequence<float>>& heads,
                                                     const std::vector<Terms<float>>& d_terms,
                                                     std::span<const double> head_decays,
                                                     std::int64_t batch) {
  if (d_terms.size() != heads.size())
    throw Error("fast backward: one pair of readouts' adjoints per sequence-head");
  for (std::size_t i = 0; i < heads.size(); ++i) {
    const Terms<float>& t = d_terms[i];
    if (t.num.rows() != heads[i].length() || t.num.cols() != heads[i].value_dim() ||
        t.den.size() != heads[i].length())
      throw Error("fast backward: the readouts' adjoints must have the readouts' shapes");
    if (!spec.normalize && (t.den.array() != 0).any())
      throw Error("fast backward: an unnormalized operator has no den, so its adjoint must be zero");
  }
  return fast_round_trip_gradients(spec, heads, head_decays, batch,
                                   [&](std::size_t i, const Terms<float>&) { return d_terms[i]; });
}

FastRoundings fast_roundings(Variant variant, bool decayed, std::int64_t n, std::ptrdiff_t key_dim,
                             std::ptrdiff_t value_dim) {
  const std::int64_t padded = (n + 63) / 64 * 64;  // a short last chunk runs as a whole one, zeros past n
  const std::int64_t chunks = padded / 64;
  // Heads wider than 64 in passes or, for few heads, composed of causal products that split into G <=
  // c / 32 segments, each crossed adding 2 to a state's chain of each product (docs/gpu.md).
  if (variant == Variant::hla3) {
    const bool wide = key_dim > fast_width || value_dim > fast_width;
    const std::int64_t more = wide ? 108 + (3 * chunks + 15) / 16 : 0;  // three products: 6 G <= 3 c / 16
    return decayed ? FastRoundings{wide ? 8 : 7, 111 * chunks + 228 + more}
                   : FastRoundings{5, 108 * chunks + 216 + more};
  }
  if (key_dim > fast_width)  // two products: 4 G <= c / 8; hla2's ridge 3 on U's chain
    return decayed ? FastRoundings{5, 10 * (padded / 8 + 24)}
                   : FastRoundings{3, 72 * chunks + 219 + (chunks + 7) / 8};
  return decayed ? FastRoundings{4, 10 * (padded / 8 + 24)} : FastRoundings{3, 9 * (padded / 8 + 24)};
}

FastRoundings fast_backward_roundings(const OperatorSpec& spec, std::int64_t n, std::ptrdiff_t key_dim,
                                      std::ptrdiff_t value_dim, bool head_decays) {
  const bool decayed = spec.decayed() || head_decays;  // the kernels' decaying path
  if (key_dim > fast_width || value_dim > fast_width) {
    // Composed of causal products (docs/gpu.md): two products deep, the decayed float32 count in every
    // case; bf16 three, four normalized (d_den's own rounding), six with decay.
    const FastRoundings decayed_counts = fast_roundings(spec.variant, true, n, fast_width, fast_width);
    return {decayed ? 6 : spec.normalize ? 4 : 3, decayed_counts.float32};
  }
  FastRoundings counts = fast_roundings(spec.variant, decayed, n, fast_width, fast_width);  // heads up to 64
  if (decayed) counts.bf16 = 6;
  // The rank-one terms of a normalized operator and the ridge's add at most four float32 roundings at
  // 2^-24 to a chain (docs/gpu.md): one unit of 2^-22, for which only hla2's count without decay lacks
  // room.
  if ((spec.normalize || spec.ridge != 0) && spec.variant == Variant::hla2 && !decayed) counts.float32 += 1;
  return counts;
}

namespace {

// The first `count` bf16 values of a device array, downloaded and widened to float32 (exactly).
std::vector<float> widened(const DeviceArray<BFloat16>& narrow, std::size_t count) {
  std::vector<BFloat16> host(count);
  narrow.download(host.data(), 0, count);
  std::vector<float> wide(count);
  for (std::size_t i = 0; i < count; ++i) wide[i] = to_float(host[i]);
  return wide;
}

// The fast path on host sequences: its terms (`terms`) or its outputs, float32 either way.
std::vector<Terms<float>> fast_round_trip(const OperatorSpec& spec, const std::vector<Sequence<float>>& heads,
                                          bool terms, bool bf16, std::span<const double> head_decays) {
  return round_trip<BFloat16, float>(
      heads, "fast path", [](float x) { return to_bfloat16(x); },
      [&](const Problem& problem, const BFloat16* q, const BFloat16* k, const BFloat16* v, float* num,
          float* den) {
        const std::int64_t rows = problem.batch * problem.heads * problem.length;
        check(cudaMemset(den, 0, rows * sizeof(float)), "cudaMemset");
        if (!bf16) {
          fast_forward(spec, problem, q, k, v, {num, false, terms && spec.normalize ? den : nullptr}, nullptr,
                       head_decays);
          return;
        }
        DeviceArray<BFloat16> narrow(rows * problem.value_dim);
        fast_forward(spec, problem, q, k, v, {narrow.data(), true, nullptr}, nullptr, head_decays);
        const std::vector<float> wide = widened(narrow, rows * problem.value_dim);
        check(cudaMemcpy(num, wide.data(), wide.size() * sizeof(float), cudaMemcpyHostToDevice),
              "cudaMemcpy");
      });
}

}  // namespace

std::vector<Terms<float>> fast_terms(const OperatorSpec& spec, const std::vector<Sequence<float>>& heads,
                                     std::span<const double> head_decays) {
  return fast_round_trip(spec, heads, true, false, head_decays);
}

std::vector<Matrix<float>> fast_outputs(const OperatorSpec& spec, const std::vector<Sequence<float>>& heads,
                                        bool bf16, std::span<const double> head_decays) {
  std::vector<Matrix<float>> outputs;
  for (Terms<float>& t : fast_round_trip(spec, heads, false, bf16, head_decays))
    outputs.push_back(std::move(t.num));
  return outputs;
}

std::int64_t fast_rank_exchange_bytes(const OperatorSpec& spec, const Problem& slice) {
  return slice.batch * slice.heads * detail::fast_summary_floats(spec.variant == Variant::hla3) *
         static_cast<std::int64_t>(sizeof(float));
}

std::vector<Matrix<float>> ranks_fast_outputs(const OperatorSpec& spec,
                                              const std::vector<Sequence<float>>& heads, const Slices& slices,
                                              bool bf16) {
  if (heads.empty()) return {};
  check_same_shapes(heads, "fast path across ranks");
  const Index n = heads.front().length(), dv = heads.front().value_dim();
  validate(slices, n, 1);
  std::vector<Matrix<float>> out(heads.size(), Matrix<float>(n, dv));
  on_simulated_ranks(slices, [&](int r, RankExchange& exchange, cudaStream_t stream) {
    const Index begin = slices.begin(r), length = slices.length(r);
    std::vector<Sequence<float>> mine;
    for (const Sequence<float>& s : heads) mine.push_back(tokens_of(s, begin, length));
    DeviceHeads<BFloat16> in(mine, "fast path across ranks", [](float x) { return to_bfloat16(x); });
    const std::size_t values = in.values;
    std::vector<float> host(heads.size() * values);
    if (bf16) {
      DeviceArray<BFloat16> narrow(host.size());
      rank_fast_forward(spec, in.problem, slices, in.q.data(), in.k.data(), in.v.data(),
                        {narrow.data(), true}, exchange, stream);
      check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
      host = widened(narrow, host.size());
    } else {
      DeviceArray<float> wide(host.size());
      rank_fast_forward(spec, in.problem, slices, in.q.data(), in.k.data(), in.v.data(), {wide.data(), false},
                        exchange, stream);
      check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
      wide.download(host.data(), 0, host.size());
    }
    for (std::size_t h = 0; h < heads.size(); ++h)
      for (Index i = 0; i < length * dv; ++i) out[h].data()[begin * dv + i] = host[h * values + i];
  });
  return out;
}

std::vector<Gradients<float>> ranks_fast_gradients(const OperatorSpec& spec,
                                                   const std::vector<Sequence<float>>& heads,
                                                   const std::vector<Matrix<float>>& d_outs,
                                                   const Slices& slices) {
  if (const auto why = ranks_unavailable(spec, Implementation::gpu_fast, Form::published, true))
    throw Error(*why);
  if (d_outs.size() != heads.size()) throw Error("fast backward across ranks: one dO per sequence-head");
  if (heads.empty()) return {};
  check_same_shapes(heads, "fast backward across ranks");
  const Index n = heads.front().length(), d = heads.front().key_dim(), dv = heads.front().value_dim();
  for (const Matrix<float>& d_out : d_outs)
    if (d_out.rows() != n || d_out.cols() != dv)
      throw Error("fast backward across ranks: dO must have the output's shape");
  validate(slices, n, 1);
  std::vector<Gradients<float>> out(
      heads.size(),
      Gradients<float>{Matrix<float>(n, d), Matrix<float>(n, d), Matrix<float>(n, dv), Matrix<float>(n, dv),
                       Terms<float>{Matrix<float>(n, dv), Vector<float>::Zero(n)}});
  on_simulated_ranks(slices, [&](int r, RankExchange& exchange, cudaStream_t stream) {
    const Index begin = slices.begin(r), length = slices.length(r);
    std::vector<Sequence<float>> mine;
    for (const Sequence<float>& s : heads) mine.push_back(tokens_of(s, begin, length));
    DeviceHeads<BFloat16> in(mine, "fast backward across ranks", [](float x) { return to_bfloat16(x); });
    const Problem& slice = in.problem;
    const auto q = in.q.data(), k = in.k.data(), v = in.v.data();
    const std::vector<Gradients<float>> part = fast_train_pass(
        spec, in, slice, stream,
        [&](const FastOutput& output) {
          rank_fast_forward(spec, slice, slices, q, k, v, output, exchange, stream);
        },
        [&](const BFloat16* d_num, const float* d_den, const void* checkpoints, float* dq, float* dk,
            float* dvalue) {
          rank_fast_backward(spec, slice, slices, q, k, v, d_num, d_den, checkpoints, dq, dk, dvalue,
                             exchange, stream);
        },
        [&](std::size_t i, const Terms<float>& terms) {
          return reference::finish_adjoint(spec, terms, Matrix<float>(d_outs[i].middleRows(begin, length)),
                                           begin);
        });
    for (std::size_t h = 0; h < heads.size(); ++h) {
      out[h].dq.middleRows(begin, length) = part[h].dq;
      out[h].dk.middleRows(begin, length) = part[h].dk;
      out[h].dv.middleRows(begin, length) = part[h].dv;
      out[h].output.middleRows(begin, length) = part[h].output;
      out[h].terms.num.middleRows(begin, length) = part[h].terms.num;
      out[h].terms.den.segment(begin, length) = part[h].terms.den;
    }
  });
  return out;
}

template <class In>
void fill_gaussian(In* data, std::int64_t count, std::uint64_t seed, float scale, CUstream_st* stream) {
  detail::launch_fill_gaussian(data, count, seed, scale, stream);
}
template void fill_gaussian<float>(float*, std::int64_t, std::uint64_t, float, CUstream_st*);
template void fill_gaussian<BFloat16>(BFloat16*, std::int64_t, std::uint64_t, float, CUstream_st*);

#define HLA_GPU_INSTANTIATE(In, T)                                                                    \
  template void terms<In, T>(const OperatorSpec&, Form, Implementation, const Problem&, std::int64_t, \
                             const In*, const In*, const In*, T*, T*, CUstream_st*);
HLA_GPU_INSTANTIATE(float, float)
HLA_GPU_INSTANTIATE(BFloat16, float)
HLA_GPU_INSTANTIATE(double, double)
HLA_GPU_INSTANTIATE(double, Gauge<double>)
HLA_GPU_INSTANTIATE(ModP, ModP)
#undef HLA_GPU_INSTANTIATE

#define HLA_GPU_INSTANTIATE_BACKWARD(In, T)                                                         \
  template void gradients<In, T>(const OperatorSpec&, Form, const Problem&, const BackwardOptions&, \
                                 const In*, const In*, const In*, const T*, const T*, T*, T*, T*,   \
                                 CUstream_st*);
HLA_GPU_INSTANTIATE_BACKWARD(float, float)
HLA_GPU_INSTANTIATE_BACKWARD(BFloat16, float)
HLA_GPU_INSTANTIATE_BACKWARD(double, double)
HLA_GPU_INSTANTIATE_BACKWARD(double, Gauge<double>)
HLA_GPU_INSTANTIATE_BACKWARD(ModP, ModP)
#undef HLA_GPU_INSTANTIATE_BACKWARD

template void finish<float>(const OperatorSpec&, const Problem&, const float*, const float*, float*,
                            CUstream_st*);
template void finish<double>(const OperatorSpec&, const Problem&, const double*, const double*, double*,
                             CUstream_st*);
template void finish<ModP>(const OperatorSpec&, const Problem&, const ModP*, const ModP*, ModP*,
                           CUstream_st*);

}  // namespace hla::fast::gpu
