#pragma once

// Where the fast kernel's warpgroups spend a chunk's cycles (docs/perf.md, "Where a chunk's cycles
// go"): built with -DHLA_FAST_PHASES, every thread adds the clock64 cycles since its last mark to the
// phase that the mark closes, in registers; lane 0 of each of the two warpgroups' eight warps stores its
// sums at the end, and the launch prints each side's mean cycles per chunk to stderr, its first warp's
// (thread 0 of the warpgroup) and then each warp's (tensor_core.cu, PhaseSums): where the warps of a
// side reach a barrier at different times, the earlier ones' phase before it holds the difference.
// hla2's and ahla's producer warps (their first threads, the ninth and tenth warps) keep their own in
// the same slots, printed under their own names (producer_names).
// Without the macro a mark is empty and the kernel is unchanged.

namespace hla::fast::gpu::detail::phases {

// The parts of one chunk on either side of the block, in the order they close.
enum Phase {
  inputs,    // waiting for the chunk's inputs (a wide decayed key side: the next chunk's too, for D K)
  partner,   // waiting for the other side: the key side for the buffers of c % 2, the value side for U
             // (hla3: its key side issuing no loads, as hla2's and ahla's, whose producer warp does)
  publish,   // the warpgroup's barrier (hla3's value side: with the last chunk's outputs' store issued)
  first,     // the products up to the wait for the masked operand's product
  masked,    // the masked operand and the products after it
  buffer,    // hla2's and ahla's value side: waiting for the staging buffer to come back from the
             // producer's store
  handover,  // the key side: U (X) rounded into the buffers; the value side: the outputs staged (the
             // wide heads' and hla3's: with the buffer's wait and the fence)
  fence,     // hla2's and ahla's value side: the staged outputs' proxy fence and the producer's barrier
  state,     // the barrier before the state's rounding, the rounding, the decay
  count
};
inline constexpr const char* names[count] = {"inputs", "partner",  "publish", "first", "masked",
                                             "buffer", "handover", "fence",   "state"};

// The producer's: waiting for a stage's buffers to be free (partner), issuing a chunk's loads (inputs),
// waiting for the chunk's staged outputs (publish), issuing their store (state), waiting for the store
// of an earlier chunk to have read its buffer (handover); first, masked, buffer and fence unused.
inline constexpr const char* producer_names[count] = {
    "issuing loads", "stage free", "outputs staged", "-", "-", "-", "store read", "-", "issuing store"};

inline constexpr int side_warps = 8;          // the two warpgroups'
inline constexpr int warps = side_warps + 2;  // and the producer warps' (hla2 and ahla)

struct Clock {
#if defined(HLA_FAST_PHASES)
  long long sums[count] = {};
  long long last = now();
  __device__ static long long now() {
#if defined(__CUDA_ARCH__)
    return clock64();
#else
    return 0;  // the host pass of nvcc: never called there
#endif
  }
  __device__ void mark(Phase phase) {
    const long long at = now();
    sums[phase] += at - last;
    last = at;
  }
  // to[(block * warps + warp) * count + phase], warps 0-3 the key side's, 4-7 the value side's, 8 and 9
  // the producers'.
  __device__ void store(long long* to) const {
    if (to == nullptr || threadIdx.x % 32 != 0 || threadIdx.x / 32 >= warps) return;
    for (int i = 0; i < count; ++i) to[(blockIdx.x * warps + threadIdx.x / 32) * count + i] = sums[i];
  }
#else
  __device__ void mark(Phase) {}
  __device__ void store(long long*) const {}
#endif
};

}  // namespace hla::fast::gpu::detail::phases
