// The fast backward of heads wider than 64 (d or dv up to 128): masked hla2 and ahla, normalized or
// not, decay gamma in (0, 1] per head or hla2's ridge (gamma = 1), the composition of first-order
// causal products of wide_composition.hpp (its header gives the algebra) run on the wide heads' matrix
// units (launch_causal_product, tensor_core.cu); and the forward of such heads (hla2, ahla, hla3) for
// few heads, where the products split into segments, composed alike.
// Every operand of a product is rounded to bf16 once (the forward's and the adjoints' intermediates
// from their float32 products, each once for all its uses, d_den from float32; the inputs enter as they
// are), the products' sums are float32, and the terms of a gradient are added in float32 by the
// products that give them (docs/gpu.md gives the bound). A product over the future walks the chunks
// from the last one, a decayed product scales its keys on chip, and a product whose sums are only read
// rounded writes them in bf16 (CausalProduct::rounded, the rounding a copy would make), so that the
// only copies are the roundings of the sums of two terms or the ridge's (operand_kernel), the ones and
// d_den. Device memory: the intermediates live until the products that read them are issued (stream
// order), at most about 1 KB a token and head at once at d = dv = 128 (hla2 normalized or with the
// ridge; 0.5 KB without).

#include <cuda_bf16.h>

#include <cstdint>
#include <optional>

#include "launch.hpp"
#include "segments.cuh"
#include "wide_composition.hpp"

namespace hla::fast::gpu::detail {
namespace {

using Bf = __nv_bfloat16;

constexpr int group = 8;   // a thread's columns: 16 bytes of bf16
constexpr int threads = 256;

// Rows of a source: float32 or bf16 [heads, length, columns], or (both null) a column of ones.
struct Rows {
  const float* f = nullptr;
  const Bf* b = nullptr;
  int columns = 1;
  __device__ float at(std::int64_t row, int column) const {
    if (column >= columns) return 0.0f;
    if (f) return f[row * columns + column];
    if (b) return __bfloat162float(b[row * columns + column]);
    return column == 0 ? 1.0f : 0.0f;
  }
};

// An operand [heads, length, to_columns] in bf16: `from`'s rows rounded to bf16 and zero-padded.
__global__ void __launch_bounds__(threads)
    operand_kernel(Rows from, std::int64_t rows, Bf* to, int to_columns) {
  const int groups = to_columns / group;
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < rows * groups;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::int64_t row = i / groups;
    const int first = static_cast<int>(i % groups) * group;
    alignas(16) Bf out[group];
#pragma unroll
    for (int j = 0; j < group; ++j) out[j] = __float2bfloat16_rn(from.at(row, first + j));
    *reinterpret_cast<uint4*>(to + row * to_columns + first) = *reinterpret_cast<uint4*>(out);
  }
}

// to += scale * from (`add`) or to = from, [heads * length, columns] float32.
__global__ void __launch_bounds__(threads)
    float_rows_kernel(Rows from, std::int64_t rows, float* to, int columns, float scale, bool add) {
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < rows * columns;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const float x = from.at(i / columns, static_cast<int>(i % columns));
    to[i] = add ? __fadd_rn(to[i], __fmul_rn(scale, x)) : x;
  }
}

// An operand in device memory: an input as it is, or a copy (freed in stream order).
struct Operand {
  const BFloat16* data;
  int columns;
  std::optional<StreamScratch> copy{};
};
// Float32 rows in device memory, freed in stream order.
struct Floats {
  StreamScratch data;
  int columns;
};
struct Target {
  float* data;
  int columns;
};

// The composition's products on the device (wide_composition.hpp's Run), over `heads` sequence-heads
// of `length` tokens: the backward's (into how's gradients) or, given `forward`, the forward's (into its
// outputs; `how` then its decay, ridge and sizes).
class DeviceRun {
 public:
  static constexpr int vector_columns = 8;  // the vector and seven zero columns
  DeviceRun(const FastBackwardLaunch& how, std::int64_t heads, std::int64_t length, const BFloat16* q,
            const BFloat16* k, const BFloat16* v, const BFloat16* d_num, CUstream_st* stream,
            const FastLaunch* forward = nullptr)
      : how_(how),
        forward_(forward),
        heads_(heads),
        length_(length),
        inputs_{q, k, v, d_num},
        stream_(stream) {}

  int key_dim() const { return how_.key_dim; }
  int value_dim() const { return how_.value_dim; }
  bool normalized() const { return how_.normalize; }
  bool ridge() const { return how_.ridge != 0; }

  Rows rows(wide::Input which) const {
    if (which == wide::Input::d_den) return {how_.d_den, nullptr, 1};
    return {nullptr, reinterpret_cast<const Bf*>(input(which).data), input(which).columns};
  }
  Rows ones() const { return {}; }
  Rows of(const Floats& from) const { return {from.data.get(), nullptr, from.columns}; }

  Operand input(wide::Input which) const {
    const int index = static_cast<int>(which);
    return {inputs_[index], which == wide::Input::q || which == wide::Input::k ? key_dim() : value_dim()};
  }
  Operand rows_of(const Rows& from, int columns) const {
    StreamScratch scratch(static_cast<std::size_t>(heads_ * length_) * columns / 2, stream_);
    Bf* to = reinterpret_cast<Bf*>(scratch.get());
    operand_kernel<<<1024, threads, 0, stream_>>>(from, heads_ * length_, to, columns);
    check_launch("fast backward (a wide head's operands)");
    return {reinterpret_cast<const BFloat16*>(to), columns, std::move(scratch)};
  }

  Floats floats(int columns) const {
    return {StreamScratch(static_cast<std::size_t>(heads_ * length_) * columns, stream_), columns};
  }
  Target target(Floats& to) const { return {to.data.get(), to.columns}; }
  Target gradient(wide::Input which) const {
    switch (which) {
      case wide::Input::q:
        return {how_.dq, key_dim()};
      case wide::Input::k:
        return {how_.dk, key_dim()};
      default:
        return {how_.dv, value_dim()};
    }
  }

  void product(wide::Over over, int power, const Operand& a, const Operand& b, const Operand& c, Target out,
               bool add) const {
    launch(over, power, a, b, c, out.data, nullptr, add);
  }
  Operand rounded(wide::Over over, int power, const Operand& a, const Operand& b, const Operand& c) const {
    StreamScratch scratch(static_cast<std::size_t>(heads_ * length_) * c.columns / 2, stream_);
    auto* to = reinterpret_cast<BFloat16*>(scratch.get());
    launch(over, power, a, b, c, nullptr, to, false);
    return {to, c.columns, std::move(scratch)};
  }
  void add_ridge(Target to, const Rows& from) const {
    float_rows_kernel<<<1024, threads, 0, stream_>>>(from, heads_ * length_, to.data, to.columns, how_.ridge,
                                                     true);
    check_launch("fast backward (a wide head's ridge)");
  }
  // The forward's num = LA_p(a, b, c) into its outputs (float32 or bf16), normalized divided by den's
  // column 0 as the kernels divide, or (FastLaunch::den, the terms) num in float32 and den beside it.
  void outputs(int power, const Operand& a, const Operand& b, const Operand& c, const Floats* den) const {
    const FastLaunch& to = *forward_;
    const bool terms = den && to.den;
    const bool bf16 = to.bf16_out && !terms;
    CausalProduct product = product_of(wide::Over::past, power, a, b, c);
    if (bf16) {
      product.rounded = static_cast<BFloat16*>(to.out);
    } else {
      product.out = static_cast<float*>(to.out);
    }
    if (den && !terms) {
      product.den_in = den->data.get();
      product.den_in_stride = den->columns;
      product.eps = to.eps;
    }
    launch_causal_product(how_, product, heads_, length_, stream_);
    if (terms) {
      float_rows_kernel<<<1024, threads, 0, stream_>>>(of(*den), heads_ * length_, to.den, 1, 1.0f, false);
      check_launch("fast kernel (a wide head's denominators)");
    }
  }

 private:
  static CausalProduct product_of(wide::Over over, int power, const Operand& a, const Operand& b,
                                  const Operand& c) {
    return {.power = power,
            .a = a.data,
            .a_dim = a.columns,
            .b = b.data,
            .b_dim = b.columns,
            .c = c.data,
            .c_dim = c.columns,
            .reversed = over == wide::Over::future};
  }
  void launch(wide::Over over, int power, const Operand& a, const Operand& b, const Operand& c, float* out,
              BFloat16* rounded, bool add) const {
    CausalProduct product = product_of(over, power, a, b, c);
    product.out = out;
    product.rounded = rounded;
    product.accumulate = add;
    launch_causal_product(how_, product, heads_, length_, stream_);
  }

  const FastBackwardLaunch& how_;
  const FastLaunch* forward_;
  std::int64_t heads_, length_;
  const BFloat16* inputs_[4];  // q, k, v, d_num
  CUstream_st* stream_;
};

}  // namespace

void launch_wide_backward(const FastBackwardLaunch& how, std::int64_t heads, std::int64_t length,
                          const BFloat16* q, const BFloat16* k, const BFloat16* v, const BFloat16* d_num,
                          CUstream_st* stream) {
  if (heads == 0 || length == 0) return;
  wide::wide_backward(how.ahla, DeviceRun(how, heads, length, q, k, v, d_num, stream));
}

void launch_wide_forward(const FastLaunch& how, std::int64_t heads, std::int64_t length, const BFloat16* q,
                         const BFloat16* k, const BFloat16* v, CUstream_st* stream) {
  if (heads == 0 || length == 0) return;
  const FastBackwardLaunch products{.ahla = how.variant == Variant::ahla,
                                    .key_dim = how.key_dim,
                                    .value_dim = how.value_dim,
                                    .normalize = how.normalize,
                                    .decay = how.decay,
                                    .ridge = how.ridge,
                                    .head_decays = how.head_decays,
                                    .heads_per_batch = how.heads_per_batch};
  wide::wide_forward(how.variant, DeviceRun(products, heads, length, q, k, v, nullptr, stream, &how));
}

}  // namespace hla::fast::gpu::detail
