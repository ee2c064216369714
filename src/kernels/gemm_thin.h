// GEMMs with a thin operand (at most kDotMaxN columns: a classifier's 5 classes), inside the
// kernels library: a thin packed weight's product and a weight gradient X^T dY by a thin dY
// (kernels/gemm.cpp takes them).
#pragma once

namespace acrobat::kernels {

// Weights with at most this many columns (a classifier's output layer, N = 5) get a dot-product
// kernel instead of libxsmm panels, whose m = N micro-kernel would use N of 16 vector lanes.
// Needs AVX-512; without it such weights take the panel kernels like any other.
#if defined(__AVX512F__)
inline constexpr int kDotMaxN = 8;
#else
inline constexpr int kDotMaxN = 0;
#endif
inline constexpr int kDotKStep = 16;  // floats per AVX-512 register

// C[m, n] = A[m, :] . Wt[n, :] (+ C) for N in 1..kDotMaxN: Wt is W^T, its rows ldw apart, zero
// beyond K up to a multiple of kDotKStep.
void gemm_dot(int M, int N, int K, const float* A, int lda, const float* Wt, int ldw, float* C, int ldc,
              bool accumulate);
// C[M, N] = alpha A^T B (+ C), A stored [K, M], for N in 1..kDotMaxN; false (C untouched) where
// there is no such kernel.
bool gemm_at_thin(int M, int N, int K, const float* A, int lda, const float* B, int ldb, float* C, int ldc,
                  bool accumulate, float alpha);

}  // namespace acrobat::kernels
