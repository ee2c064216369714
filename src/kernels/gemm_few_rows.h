// GEMMs with a few rows of A (a decode step's query row against its cache), inside the kernels
// library: gemm_strided's path for them (kernels/gemm.cpp).
#pragma once

namespace acrobat::kernels {

// Up to this many rows of A take the functions below.
inline constexpr int kFewRows = 4;

// C[m, n] = alpha A[m, :] . B[n, :] (+ C): B transposed, read where its rows lie.
void few_rows_dot(int M, int N, int K, const float* A, int lda, const float* B, int ldb, float* C, int ldc,
                  bool accumulate, float alpha);
// C[m, :] = alpha sum_k A[m, k] B[k, :] (+ C).
void few_rows_axpy(int M, int N, int K, const float* A, int lda, const float* B, int ldb, float* C, int ldc,
                   bool accumulate, float alpha);

}  // namespace acrobat::kernels
