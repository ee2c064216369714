// GEMMs with a few rows of A (a decode step's query row against its cache), inside the kernels
// library: gemm_strided's path for them (kernels/gemm.cpp).
#pragma once

#include <cstdint>

namespace acrobat::kernels {

// With B transposed, up to kFewRows rows of A take few_rows_dot (the path before it copied B^T
// for the JIT kernels first); else one row of A and a B of at most kFewRowsMaxPlainB floats take
// few_rows_axpy (sgemv's call costs more than such a product). Measured on an Intel Xeon with
// AVX-512, warm, [M, H] @ [H, H] in us, these loops against the path before them: B transposed,
// M = 4: 0.69 and 1.43 at H = 64, 1.65 and 1.77 at 128, 5.8 and 6.2 at 256, 93 and 95 at 512
// (M = 1 here: 0.18, 0.98, 3.6 and 15). B plain, M = 1 against sgemv: 0.08 and 0.14 at H = 64,
// 0.85 and 0.85 at 128, 3.6 and 3.3 at 256, 15.8 and 13.4 at 512; M = 4 against the JIT kernels:
// 0.43 and 0.22 at 64, 13.9 and 4.4 at 256 (these loops read B once per row of A).
inline constexpr int kFewRows = 4;
inline constexpr int64_t kFewRowsMaxPlainB = 128 * 128;

// C[m, n] = alpha A[m, :] . B[n, :] (+ C): B transposed, read where its rows lie.
void few_rows_dot(int M, int N, int K, const float* A, int lda, const float* B, int ldb, float* C, int ldc,
                  bool accumulate, float alpha);
// C[m, :] = alpha sum_k A[m, k] B[k, :] (+ C).
void few_rows_axpy(int M, int N, int K, const float* A, int lda, const float* B, int ldb, float* C, int ldc,
                   bool accumulate, float alpha);

}  // namespace acrobat::kernels
