#include "kernels/gemm_few_rows.h"

#include <cstddef>

#include "kernels/simd.h"

namespace acrobat::kernels {

// One row of A (a decode step's query row against its cache; kernels/gemm_few_rows.h): products
// that read B where it lies. With B transposed (q k^T over a cache's rows): C[m, n] = alpha A[m, :] . B[n, :], four rows
// of B at a time; else (p V): C[m, :] = alpha sum_k A[m, k] B[k, :], 64 columns at a time in
// registers. Before, a transposed head was copied for the JIT kernel and p V went to sgemv:
// gpt.acr's 64 instances at batch 64 on one thread of an Intel Xeon with AVX-512 (one query row, 8
// heads of 64 against caches of 8 to 190 rows) spent 1.84 s in the attention layer's blocks with
// those, 1.20 s with these (acrobat run --block-stats).
void few_rows_dot(int M, int N, int K, const float* A, int lda, const float* B, int ldb, float* C, int ldc,
                  bool accumulate, float alpha) {
  namespace v = simd;
  const int KV = K / v::kLanes * v::kLanes;
  for (int m = 0; m < M; ++m) {
    const float* a = A + size_t(m) * lda;
    float* c = C + size_t(m) * ldc;
    int n = 0;
    for (; n + 4 <= N; n += 4) {
      const float* b0 = B + size_t(n) * ldb;
      const float* b1 = b0 + ldb;
      const float* b2 = b1 + ldb;
      const float* b3 = b2 + ldb;
      v::Vec s0 = v::splat(0.0f), s1 = s0, s2 = s0, s3 = s0;
      for (int k = 0; k < KV; k += v::kLanes) {
        const v::Vec x = v::load(a + k);
        s0 = v::fmadd(x, v::load(b0 + k), s0);
        s1 = v::fmadd(x, v::load(b1 + k), s1);
        s2 = v::fmadd(x, v::load(b2 + k), s2);
        s3 = v::fmadd(x, v::load(b3 + k), s3);
      }
      float d[4] = {v::reduce_add(s0), v::reduce_add(s1), v::reduce_add(s2), v::reduce_add(s3)};
      for (int k = KV; k < K; ++k) {
        d[0] += a[k] * b0[k];
        d[1] += a[k] * b1[k];
        d[2] += a[k] * b2[k];
        d[3] += a[k] * b3[k];
      }
      for (int j = 0; j < 4; ++j) c[n + j] = alpha * d[j] + (accumulate ? c[n + j] : 0.0f);
    }
    for (; n < N; ++n) {
      const float* b = B + size_t(n) * ldb;
      v::Vec s0 = v::splat(0.0f);
      for (int k = 0; k < KV; k += v::kLanes) s0 = v::fmadd(v::load(a + k), v::load(b + k), s0);
      float d = v::reduce_add(s0);
      for (int k = KV; k < K; ++k) d += a[k] * b[k];
      c[n] = alpha * d + (accumulate ? c[n] : 0.0f);
    }
  }
}

void few_rows_axpy(int M, int N, int K, const float* A, int lda, const float* B, int ldb, float* C, int ldc,
                   bool accumulate, float alpha) {
  namespace v = simd;
  constexpr int kBlock = 4 * v::kLanes;
  for (int m = 0; m < M; ++m) {
    const float* a = A + size_t(m) * lda;
    float* c = C + size_t(m) * ldc;
    int j = 0;
    for (; j + kBlock <= N; j += kBlock) {
      v::Vec s0 = v::splat(0.0f), s1 = s0, s2 = s0, s3 = s0;
      for (int k = 0; k < K; ++k) {
        const v::Vec x = v::splat(a[k]);
        const float* b = B + size_t(k) * ldb + j;
        s0 = v::fmadd(x, v::load(b), s0);
        s1 = v::fmadd(x, v::load(b + v::kLanes), s1);
        s2 = v::fmadd(x, v::load(b + 2 * v::kLanes), s2);
        s3 = v::fmadd(x, v::load(b + 3 * v::kLanes), s3);
      }
      const v::Vec al = v::splat(alpha);
      v::Vec out[4] = {s0 * al, s1 * al, s2 * al, s3 * al};
      for (int q = 0; q < 4; ++q) {
        float* cq = c + j + q * v::kLanes;
        v::store(cq, accumulate ? out[q] + v::load(cq) : out[q]);
      }
    }
    for (; j < N; ++j) {
      float d = 0;
      for (int k = 0; k < K; ++k) d += a[k] * B[size_t(k) * ldb + j];
      c[j] = alpha * d + (accumulate ? c[j] : 0.0f);
    }
  }
}

}  // namespace acrobat::kernels
