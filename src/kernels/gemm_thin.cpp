#include "kernels/gemm_thin.h"

#include <cstddef>
#include <type_traits>

#include "kernels/simd.h"  // and <immintrin.h>
#include "support/diagnostics.h"

namespace acrobat::kernels {
namespace {

// Calls f(std::integral_constant<int, N>{}) for N in 1..8, the kernels templated on a thin
// operand's width; false for any other N.
template <class F>
bool with_small_n(int N, F&& f) {
  switch (N) {
    case 1: f(std::integral_constant<int, 1>{}); return true;
    case 2: f(std::integral_constant<int, 2>{}); return true;
    case 3: f(std::integral_constant<int, 3>{}); return true;
    case 4: f(std::integral_constant<int, 4>{}); return true;
    case 5: f(std::integral_constant<int, 5>{}); return true;
    case 6: f(std::integral_constant<int, 6>{}); return true;
    case 7: f(std::integral_constant<int, 7>{}); return true;
    case 8: f(std::integral_constant<int, 8>{}); return true;
  }
  return false;
}

}  // namespace

// ---- Dot-product kernel for N <= kDotMaxN ------------------------------------------------------
// C[m, n] = A[m, :] . W^T[n, :]: R rows of A at a time against all N rows of W^T, R * N vector
// accumulators, each reduced once at the end. W^T (5 KiB for K = 256, N = 5) stays in L1.
#if defined(__AVX512F__)
namespace {

// Sum of the 16 lanes. Unlike _mm512_reduce_add_ps on an array element, this lets GCC 12 keep the
// accumulator array in registers in the loop above instead of storing it to the stack each step.
inline float sum_lanes(__m512 v) {
  const __m256 h = _mm256_add_ps(_mm512_castps512_ps256(v),
                                 _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)));
  __m128 x = _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
  x = _mm_add_ps(x, _mm_movehl_ps(x, x));
  x = _mm_add_ss(x, _mm_movehdup_ps(x));
  return _mm_cvtss_f32(x);
}

template <int N, int R>
void dot_rows(const float* A, int lda, const float* Wt, int ldw, int K, float* C, int ldc,
              bool accumulate) {
  __m512 acc[R][N];
  #pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
    #pragma GCC unroll 8
    for (int n = 0; n < N; ++n) acc[r][n] = _mm512_setzero_ps();
  }
  // One loop for whole and partial vectors. The unroll pragmas let GCC 12 keep acc in registers
  // (without them it stores all R * N accumulators to the stack on every step).
  for (int k = 0; k < K; k += kDotKStep) {
    const __mmask16 mask = K - k >= kDotKStep ? __mmask16(0xFFFF) : __mmask16((1u << (K - k)) - 1);
    __m512 a[R];
    // Masked loads never touch A past its row; W^T's padding is zero, so it needs no mask.
    #pragma GCC unroll 8
    for (int r = 0; r < R; ++r) a[r] = _mm512_maskz_loadu_ps(mask, A + size_t(r) * lda + k);
    #pragma GCC unroll 8
    for (int n = 0; n < N; ++n) {
      const __m512 w = _mm512_load_ps(Wt + size_t(n) * ldw + k);
      #pragma GCC unroll 8
      for (int r = 0; r < R; ++r) acc[r][n] = _mm512_fmadd_ps(a[r], w, acc[r][n]);
    }
  }
  #pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
    #pragma GCC unroll 8
    for (int n = 0; n < N; ++n) {
      const float sum = sum_lanes(acc[r][n]);
      float& c = C[size_t(r) * ldc + n];
      c = accumulate ? c + sum : sum;
    }
  }
}

template <int N>
void gemm_dot_n(int M, const float* A, int lda, const float* Wt, int ldw, int K, float* C, int ldc,
                bool accumulate) {
  // R * N accumulators plus R rows of A must fit in 32 registers.
  constexpr int R = N <= 6 ? 4 : 3;
  int m = 0;
  for (; m + R <= M; m += R) {
    dot_rows<N, R>(A + size_t(m) * lda, lda, Wt, ldw, K, C + size_t(m) * ldc, ldc, accumulate);
  }
  for (; m < M; ++m) {
    dot_rows<N, 1>(A + size_t(m) * lda, lda, Wt, ldw, K, C + size_t(m) * ldc, ldc, accumulate);
  }
}

}  // namespace

void gemm_dot(int M, int N, int K, const float* A, int lda, const float* Wt, int ldw, float* C, int ldc,
              bool accumulate) {
  const bool ran = with_small_n(N, [&](auto n) {
    gemm_dot_n<decltype(n)::value>(M, A, lda, Wt, ldw, K, C, ldc, accumulate);
  });
  ACROBAT_ASSERT(ran, "gemm_dot: N out of range");
}
#else
void gemm_dot(int, int, int, const float*, int, const float*, int, float*, int, bool) {
  ACROBAT_ASSERT(false, "gemm_dot needs AVX-512");
}
#endif

// ---- A^T B for a thin B ------------------------------------------------------------------------
// C[M, N] = alpha A^T B (+ C) for a thin B (N <= kDotMaxN: a classifier's weight gradient, X^T dY
// with N = 5 classes): per 16 columns of C^T, N registers of sums over every row of A and B, each
// row of A read once. sgemm packs A^T for N = 5 and ran at 7-14 GFLOP/s there (M = 256 or 512,
// K = 1800 rows); one pass over A runs at the load ports' pace. The sums run over k in order:
// the same bits for any cut of the columns.
#if defined(__AVX512F__)
namespace {

template <int N>
void gemm_at_thin_n(int M, int K, const float* A, int lda, const float* B, int ldb, float* C, int ldc,
                    bool accumulate, float alpha) {
  int m0 = 0;
  for (; m0 + simd::kLanes <= M; m0 += simd::kLanes) {
    simd::Vec acc[N];
    #pragma GCC unroll 8
    for (int n = 0; n < N; ++n) acc[n] = simd::splat(0.0f);
    for (int k = 0; k < K; ++k) {
      const simd::Vec a = simd::load(A + size_t(k) * lda + m0);
      #pragma GCC unroll 8
      for (int n = 0; n < N; ++n) acc[n] = simd::fmadd(simd::splat(B[size_t(k) * ldb + n]), a, acc[n]);
    }
    float lanes[N][simd::kLanes];
    #pragma GCC unroll 8
    for (int n = 0; n < N; ++n) simd::store(lanes[n], acc[n]);
    for (int i = 0; i < simd::kLanes; ++i)
      for (int n = 0; n < N; ++n) {
        float& c = C[size_t(m0 + i) * ldc + n];
        c = (accumulate ? c : 0.0f) + alpha * lanes[n][i];
      }
  }
  for (; m0 < M; ++m0)
    for (int n = 0; n < N; ++n) {
      float sum = 0;
      for (int k = 0; k < K; ++k) sum += A[size_t(k) * lda + m0] * B[size_t(k) * ldb + n];
      float& c = C[size_t(m0) * ldc + n];
      c = (accumulate ? c : 0.0f) + alpha * sum;
    }
}

}  // namespace

bool gemm_at_thin(int M, int N, int K, const float* A, int lda, const float* B, int ldb, float* C, int ldc,
                  bool accumulate, float alpha) {
  return with_small_n(N, [&](auto n) {
    gemm_at_thin_n<decltype(n)::value>(M, K, A, lda, B, ldb, C, ldc, accumulate, alpha);
  });
}
#else
bool gemm_at_thin(int, int, int, const float*, int, const float*, int, float*, int, bool, float) { return false; }
#endif

}  // namespace acrobat::kernels
