// The kernels of my_hla2_chunked.hpp, as a kernel author would write them: plain CUDA, the state
// of one chunk in shared memory, templated on the scalar so that the same code runs in float32
// for production and in the prime field hla::ModP for an exact check.

#include <hla/reference/mod_prime.hpp>

#include <cuda_runtime.h>

#include <string>

#include "my_hla2_chunked.hpp"

namespace {

void check(cudaError_t status, const char* what) {
  if (status != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(status));
}

// One chunk's running state in shared memory: S [d, d], C and G [d, dv], and the token's vectors.
template <class T>
struct State {
  T *S, *C, *G, *q, *k, *v, *kC, *qS;

  __device__ State(T* shared, int d, int dv)
      : S(shared), C(S + d * d), G(C + d * dv), q(G + d * dv), k(q + d), v(k + d), kC(v + dv), qS(kC + dv) {}

  static constexpr std::size_t bytes(int d, int dv) { return sizeof(T) * (d * d + 2 * d * dv + 3 * d + 2 * dv); }

  // Every thread of the block: the state from `from` (three arrays in a row: S, C, G), or zero.
  __device__ void load(const T* from, int d, int dv) {
    for (int e = threadIdx.x; e < d * d + 2 * d * dv; e += blockDim.x) S[e] = from ? from[e] : T(0);
    __syncthreads();
  }

  // Token t enters the state; out (dv values) receives q_t^T (S C - G) when not null.
  __device__ void step(const T* qt, const T* kt, const T* vt, T* out, int d, int dv) {
    for (int i = threadIdx.x; i < d; i += blockDim.x) q[i] = qt[i], k[i] = kt[i];
    for (int j = threadIdx.x; j < dv; j += blockDim.x) v[j] = vt[j];
    __syncthreads();
    for (int j = threadIdx.x; j < dv; j += blockDim.x) {  // k^T C with C before this token
      T sum(0);
      for (int i = 0; i < d; ++i) sum += k[i] * C[i * dv + j];
      kC[j] = sum;
    }
    __syncthreads();
    for (int e = threadIdx.x; e < d * dv; e += blockDim.x) {
      const int i = e / dv, j = e % dv;
      G[e] += k[i] * kC[j];
      C[e] += q[i] * v[j];
    }
    for (int e = threadIdx.x; e < d * d; e += blockDim.x) S[e] += k[e / d] * k[e % d];
    __syncthreads();
    if (!out) return;
    for (int j = threadIdx.x; j < d; j += blockDim.x) {
      T sum(0);
      for (int i = 0; i < d; ++i) sum += q[i] * S[i * d + j];
      qS[j] = sum;
    }
    __syncthreads();
    for (int j = threadIdx.x; j < dv; j += blockDim.x) {
      T sum(0);
      for (int i = 0; i < d; ++i) sum += qS[i] * C[i * dv + j] - q[i] * G[i * dv + j];
      out[j] = sum;
    }
    __syncthreads();  // the next token overwrites q
  }
};

// 1. summaries[c] = (dS, dC, dG) of chunk c, from a zero state.
template <class T>
__global__ void chunk_summaries(const T* q, const T* k, const T* v, T* summaries, int n, int d, int dv,
                                int chunk) {
  extern __shared__ unsigned char shared[];
  State<T> state(reinterpret_cast<T*>(shared), d, dv);
  state.load(nullptr, d, dv);
  const int first = blockIdx.x * chunk, last = min(n, first + chunk);
  for (int t = first; t < last; ++t) state.step(q + t * d, k + t * d, v + t * dv, nullptr, d, dv);
  T* mine = summaries + static_cast<long>(blockIdx.x) * (d * d + 2 * d * dv);
  for (int e = threadIdx.x; e < d * d + 2 * d * dv; e += blockDim.x) mine[e] = state.S[e];
}

// 2. carries[c] = (S, C, G) after the chunks before c; one block walks the chunks in order.
template <class T>
__global__ void chunk_carries(const T* summaries, T* carries, int chunks, int d, int dv, bool broken) {
  extern __shared__ unsigned char shared[];
  State<T> state(reinterpret_cast<T*>(shared), d, dv);
  state.load(nullptr, d, dv);
  const int size = d * d + 2 * d * dv;
  for (int c = 0; c < chunks; ++c) {
    const T* dS = summaries + static_cast<long>(c) * size;
    const T *dC = dS + d * d, *dG = dC + d * dv;
    T* carry = carries + static_cast<long>(c) * size;
    for (int e = threadIdx.x; e < size; e += blockDim.x) carry[e] = state.S[e];
    __syncthreads();  // written before G changes
    for (int e = threadIdx.x; e < d * dv; e += blockDim.x) {  // G_in += dG + dS C_in
      const int i = e / dv, j = e % dv;
      T cross(0);
      if (!broken)
        for (int l = 0; l < d; ++l) cross += dS[i * d + l] * state.C[l * dv + j];
      state.G[e] += dG[e] + cross;
    }
    __syncthreads();  // every G read C_in
    for (int e = threadIdx.x; e < d * d; e += blockDim.x) state.S[e] += dS[e];
    for (int e = threadIdx.x; e < d * dv; e += blockDim.x) state.C[e] += dC[e];
    __syncthreads();
  }
}

// 3. The outputs of chunk c, from carries[c].
template <class T>
__global__ void chunk_outputs(const T* q, const T* k, const T* v, const T* carries, T* o, int n, int d,
                              int dv, int chunk) {
  extern __shared__ unsigned char shared[];
  State<T> state(reinterpret_cast<T*>(shared), d, dv);
  state.load(carries + static_cast<long>(blockIdx.x) * (d * d + 2 * d * dv), d, dv);
  const int first = blockIdx.x * chunk, last = min(n, first + chunk);
  for (int t = first; t < last; ++t) state.step(q + t * d, k + t * d, v + t * dv, o + t * dv, d, dv);
}

}  // namespace

template <class T>
void my_hla2_chunked(const T* q, const T* k, const T* v, T* o, int n, int d, int dv, int chunk, bool broken) {
  if (n < 1 || d < 1 || dv < 1 || chunk < 1) throw std::invalid_argument("my_hla2_chunked: n, d, dv and chunk must be positive");
  const int chunks = (n + chunk - 1) / chunk;
  const std::size_t shared = State<T>::bytes(d, dv), size = d * d + 2 * d * dv;
  // The state of a wide head in Z/p (8-byte values) passes the default 48 KB of shared memory.
  check(cudaFuncSetAttribute(chunk_summaries<T>, cudaFuncAttributeMaxDynamicSharedMemorySize, shared), "shared memory");
  check(cudaFuncSetAttribute(chunk_carries<T>, cudaFuncAttributeMaxDynamicSharedMemorySize, shared), "shared memory");
  check(cudaFuncSetAttribute(chunk_outputs<T>, cudaFuncAttributeMaxDynamicSharedMemorySize, shared), "shared memory");
  T *summaries = nullptr, *carries = nullptr;
  check(cudaMalloc(&summaries, chunks * size * sizeof(T)), "cudaMalloc");
  check(cudaMalloc(&carries, chunks * size * sizeof(T)), "cudaMalloc");
  chunk_summaries<<<chunks, 256, shared>>>(q, k, v, summaries, n, d, dv, chunk);
  check(cudaGetLastError(), "chunk_summaries");
  chunk_carries<<<1, 1024, shared>>>(summaries, carries, chunks, d, dv, broken);
  check(cudaGetLastError(), "chunk_carries");
  chunk_outputs<<<chunks, 256, shared>>>(q, k, v, carries, o, n, d, dv, chunk);
  check(cudaGetLastError(), "chunk_outputs");
  const cudaError_t done = cudaDeviceSynchronize();
  cudaFree(summaries);
  cudaFree(carries);
  check(done, "my_hla2_chunked");
}

template void my_hla2_chunked<hla::ModP>(const hla::ModP*, const hla::ModP*, const hla::ModP*, hla::ModP*, int, int,
                                         int, int, bool);
template void my_hla2_chunked<float>(const float*, const float*, const float*, float*, int, int, int, int, bool);
