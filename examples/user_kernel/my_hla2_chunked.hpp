#pragma once

// A kernel author's chunk-parallel masked hla2 on the GPU, written once for any scalar T (only +,
// -, * and T(0) on values; my_hla2_chunked.cuh), for one head on device arrays, row-major:
// q, k [n, d], v and o [n, dv]. The sequence is cut into chunks of `chunk` tokens and run in
// three launches:
//   1. each chunk's own summaries, from zero (one block per chunk):
//        dS = sum k k^T,  dC = sum q v^T,  dG = sum k (k^T C_local)
//   2. the carries into each chunk, chunk after chunk (one block):
//        G_in += dG + dS C_in,  S_in += dS,  C_in += dC
//   3. each chunk's outputs: the recurrence of my_hla2.hpp run over the chunk from its carry-in
//      (one block per chunk), o_t = q_t^T (S C - G).
// Its broken twin (`broken`) forgets the cross term dS C_in of the G carry: a missing carry,
// the kind of bug that appears only from the third chunk on.
//
// Defined for T = hla::ModP and T = float (my_hla2_chunked.cu); this header needs no CUDA.

#include <stdexcept>

template <class T>
void my_hla2_chunked(const T* q, const T* k, const T* v, T* o, int n, int d, int dv, int chunk, bool broken);
