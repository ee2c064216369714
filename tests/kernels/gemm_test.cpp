// GEMM: every path (and the dispatcher, and unpacked gemm) against a naive double-precision product
// over many shapes, with padded strides whose padding must be neither read nor written.
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "acrobat/kernels.h"
#include "test_util.h"

namespace acrobat::kernels {
namespace {

using testing_util::random_floats;

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kSentinel = 12345.0f;  // fills C's padding columns, which no kernel may touch

// A row-major rows x cols matrix stored with row stride ld; the padding columns hold `pad`.
std::vector<float> padded(const std::vector<float>& dense, int rows, int cols, int ld, float pad) {
  std::vector<float> out(size_t(rows) * ld, pad);
  for (int r = 0; r < rows; ++r) {
    for (int c = 0; c < cols; ++c) out[size_t(r) * ld + c] = dense[size_t(r) * cols + c];
  }
  return out;
}

// The transpose of a row-major rows x cols matrix, stored [cols, rows] with row stride ld (B^T of
// gemm_strided's transposed B); the padding columns hold NaN.
std::vector<float> transposed_padded(const std::vector<float>& dense, int rows, int cols, int ld) {
  std::vector<float> out(size_t(cols) * ld, kNaN);
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < cols; ++c) out[size_t(c) * ld + r] = dense[size_t(r) * cols + c];
  return out;
}

// A * B in double, and sum |a||b| per element, which bounds the rounding error of any float
// summation order: |error| <= K * 2^-24 * sum|a||b| (plus one rounding for accumulation into C).
struct Reference {
  std::vector<double> product;
  std::vector<double> magnitude;
};

Reference reference_product(int M, int N, int K, const std::vector<float>& A,
                            const std::vector<float>& B) {
  Reference ref{std::vector<double>(size_t(M) * N), std::vector<double>(size_t(M) * N)};
  for (int m = 0; m < M; ++m) {
    for (int k = 0; k < K; ++k) {
      const double a = A[size_t(m) * K + k];
      for (int n = 0; n < N; ++n) {
        const double b = B[size_t(k) * N + n];
        ref.product[size_t(m) * N + n] += a * b;
        ref.magnitude[size_t(m) * N + n] += std::fabs(a * b);
      }
    }
  }
  return ref;
}

// Checks C (stride ldc) against C0 * accumulate + A*B, and that C's padding is untouched.
testing::AssertionResult matches(const std::vector<float>& C, int ldc, const std::vector<float>& C0,
                                 bool accumulate, const Reference& ref, int M, int N, int K) {
  constexpr double kUnitRoundoff = 0x1p-24;
  int bad = 0;
  std::string first;
  for (int m = 0; m < M; ++m) {
    for (int n = 0; n < ldc; ++n) {
      const float got = C[size_t(m) * ldc + n];
      if (n >= N) {
        if (got != kSentinel && bad++ == 0) first = fmt::format("padding C[{},{}] = {}", m, n, got);
        continue;
      }
      const double c0 = accumulate ? C0[size_t(m) * N + n] : 0.0;
      const double want = c0 + ref.product[size_t(m) * N + n];
      const double tol =
          (K + 2) * kUnitRoundoff * (std::fabs(c0) + ref.magnitude[size_t(m) * N + n]) + 1e-30;
      if (!(std::fabs(got - want) <= tol) && bad++ == 0) {
        first = fmt::format("C[{},{}] = {}, want {} (tolerance {})", m, n, got, want, tol);
      }
    }
  }
  if (bad == 0) return testing::AssertionSuccess();
  return testing::AssertionFailure() << bad << " wrong elements; first: " << first;
}

class GemmShapes : public testing::TestWithParam<std::tuple<int, int, int>> {};

TEST_P(GemmShapes, EveryPathMatchesDoubleReference) {
  // Named copies, not a structured binding: the lambdas below capture them (clang before 16
  // cannot capture a binding).
  const int M = std::get<0>(GetParam()), N = std::get<1>(GetParam()), K = std::get<2>(GetParam());
  // Strides wider than the rows; NaN in the padding of A and B poisons any result that reads it.
  const int lda = K + 3;
  const int ldb = N + 2;
  const int ldc = N + 5;
  const auto A = random_floats(size_t(M) * K, -1, 1, 11 + M);
  const auto B = random_floats(size_t(K) * N, -1, 1, 17 + N + K);
  const auto C0 = random_floats(size_t(M) * N, -1, 1, 23);
  const auto A_padded = padded(A, M, K, lda, kNaN);
  const auto B_padded = padded(B, K, N, ldb, kNaN);
  const Reference ref = reference_product(M, N, K, A, B);
  const auto W = pack_weights(K, N, B_padded.data(), ldb);
  ASSERT_EQ(W->K(), K);
  ASSERT_EQ(W->N(), N);
  // B^T [N, K] with rows K + 4 wide, NaN in the padding; packed again after a first packing of
  // other values, as a training step repacks it.
  const int ldbt = K + 4;
  std::vector<float> Bt(size_t(N) * ldbt, kNaN);
  for (int k = 0; k < K; ++k)
    for (int n = 0; n < N; ++n) Bt[size_t(n) * ldbt + k] = B[size_t(k) * N + n];
  const std::vector<float> other(Bt.size(), 3.0f);
  const auto Wt = pack_transposed_weights(K, N, other.data(), ldbt);
  Wt->repack_transposed(Bt.data(), ldbt);
  ASSERT_EQ(Wt->K(), K);
  ASSERT_EQ(Wt->N(), N);

  for (bool accumulate : {false, true}) {
    // Without accumulation C starts as NaN, which must be overwritten, not scaled by beta = 0.
    const auto C_init =
        padded(accumulate ? C0 : std::vector<float>(C0.size(), kNaN), M, N, ldc, kSentinel);
    auto run = [&](const std::string& what, auto&& call) {
      std::vector<float> C = C_init;
      call(C.data());
      EXPECT_TRUE(matches(C, ldc, C0, accumulate, ref, M, N, K))
          << what << (accumulate ? ", accumulate" : ", overwrite");
    };
    for (GemmPath path : {GemmPath::Gemv, GemmPath::Xsmm, GemmPath::Blas}) {
      run(gemm_path_name(path), [&](float* C) {
        gemm_packed_via(path, M, A_padded.data(), lda, *W, C, ldc, accumulate);
      });
    }
    run("dispatcher",
        [&](float* C) { gemm_packed(M, A_padded.data(), lda, *W, C, ldc, accumulate); });
    // The same B packed from its transpose (dX = dY W^T in the backward pass).
    for (GemmPath path : {GemmPath::Gemv, GemmPath::Xsmm, GemmPath::Blas}) {
      run(std::string("from the transpose, ") + gemm_path_name(path), [&](float* C) {
        gemm_packed_via(path, M, A_padded.data(), lda, *Wt, C, ldc, accumulate);
      });
    }
    run("unpacked gemm", [&](float* C) {
      gemm(M, N, K, A_padded.data(), lda, B_padded.data(), ldb, C, ldc, accumulate);
    });
    for (GemmPath path : {GemmPath::Gemv, GemmPath::Xsmm, GemmPath::Blas}) {
      run(std::string("unpacked ") + gemm_path_name(path), [&](float* C) {
        gemm_via(path, M, N, K, A_padded.data(), lda, B_padded.data(), ldb, C, ldc, accumulate);
      });
    }
  }
}

std::string shape_name(const testing::TestParamInfo<GemmShapes::ParamType>& info) {
  const auto [M, N, K] = info.param;
  return fmt::format("M{}_N{}_K{}", M, N, K);
}

INSTANTIATE_TEST_SUITE_P(Shapes, GemmShapes,
                         testing::Combine(testing::Values(1, 2, 3, 7, 8, 16, 63, 64, 65, 200),
                                          testing::Values(5, 128, 200, 768, 1024),
                                          testing::Values(1, 17, 256, 300, 512)),
                         shape_name);

// The Xsmm path runs M > 64 as 64-row blocks plus one remainder block: M around one and two
// blocks, and a large M with several blocks and a remainder.
INSTANTIATE_TEST_SUITE_P(RowBlocks, GemmShapes,
                         testing::Combine(testing::Values(127, 128, 129, 2000),
                                          testing::Values(5, 200), testing::Values(17, 256)),
                         shape_name);

// K over 512 (a quarter of a 1 MiB L2 in a panel; 1024 with 2 MiB) runs the Xsmm path's panels in
// chunks of 512 of their rows: K around and over one chunk boundary, and with a partial last chunk.
INSTANTIATE_TEST_SUITE_P(LongPanels, GemmShapes,
                         testing::Combine(testing::Values(1, 5, 64, 65, 300), testing::Values(200),
                                          testing::Values(1025, 1536, 2600, 4100)),
                         shape_name);

// N <= 8 takes a dot-product kernel on the Xsmm path: every N it covers and the first it does
// not, M around its 3- and 4-row groups, K around its 16-float vectors.
INSTANTIATE_TEST_SUITE_P(SmallN, GemmShapes,
                         testing::Combine(testing::Values(1, 3, 4, 5, 130),
                                          testing::Values(1, 2, 3, 4, 6, 7, 8, 9),
                                          testing::Values(1, 15, 16, 33)),
                         shape_name);

// gemm_strided with A transposed (A stored [K, M]: a weight's gradient X^T dY), C accumulating or
// not, alpha: a thin B (N <= 8, a classifier's gradient) takes its one-pass kernel from M = 128 on,
// M around its 16-column registers; wider B and smaller M take sgemm or the copy to the JIT path.
TEST(Gemm, StridedWithATransposed) {
  for (int M : {3, 127, 128, 143, 256, 300})
    for (int N : {1, 5, 8, 9, 40})
      for (int K : {1, 17, 300})
        for (bool accumulate : {false, true}) {
          const int lda = M + 3, ldc = N + 2;
          const auto At = random_floats(size_t(K) * M, -1, 1, 11);  // A^T: [K, M]
          const auto B = random_floats(size_t(K) * N, -1, 1, 12);
          std::vector<float> A(size_t(M) * K);                     // A: [M, K] for the reference
          for (int k = 0; k < K; ++k)
            for (int m = 0; m < M; ++m) A[size_t(m) * K + k] = 0.5f * At[size_t(k) * M + m];
          const Reference ref = reference_product(M, N, K, A, B);
          const auto C0 = random_floats(size_t(M) * N, -1, 1, 13);
          std::vector<float> C = padded(C0, M, N, ldc, kSentinel);
          gemm_strided(true, false, M, N, K, padded(At, K, M, lda, kNaN).data(), lda, B.data(), N, C.data(), ldc,
                       accumulate, 0.5f);
          EXPECT_TRUE(matches(C, ldc, C0, accumulate, ref, M, N, K))
              << "M " << M << " N " << N << " K " << K << " accumulate " << accumulate;
        }
}

// C = A^T B (+ C) over K rows by `path` (a forced path; false: it cannot run here) and by
// gemm_strided, whichever path this machine's rule picks: strided operands, C accumulating or not
// (not: NaN in C is overwritten).
using TransposedAPath = std::function<bool(int, int, int, const float*, int, const float*, int, float*, int, bool)>;
void check_transposed_a(const char* name, const TransposedAPath& path, int M, int N, int K, bool accumulate) {
  const int lda = M + 3, ldb = N + 5, ldc = N + 2;
  const auto At = random_floats(size_t(K) * M, -1, 1, 31);  // A^T: [K, M]
  const auto B = random_floats(size_t(K) * N, -1, 1, 32);
  std::vector<float> A(size_t(M) * K);
  for (int k = 0; k < K; ++k)
    for (int m = 0; m < M; ++m) A[size_t(m) * K + k] = At[size_t(k) * M + m];
  const Reference ref = reference_product(M, N, K, A, B);
  const auto C0 = random_floats(size_t(M) * N, -1, 1, 33);
  const auto stored_a = padded(At, K, M, lda, kNaN);
  const auto stored_b = padded(B, K, N, ldb, kNaN);
  std::vector<float> C = padded(C0, M, N, ldc, kSentinel);
  if (!accumulate)
    for (int m = 0; m < M; ++m) std::fill_n(C.begin() + size_t(m) * ldc, N, kNaN);
  if (!path(M, N, K, stored_a.data(), lda, stored_b.data(), ldb, C.data(), ldc, accumulate)) {
    GTEST_SKIP() << "libxsmm cannot JIT kernels here";
  }
  EXPECT_TRUE(matches(C, ldc, C0, accumulate, ref, M, N, K))
      << name << ": M " << M << " N " << N << " K " << K << " accumulate " << accumulate;
  C = padded(C0, M, N, ldc, kSentinel);
  gemm_strided(true, false, M, N, K, stored_a.data(), lda, stored_b.data(), ldb, C.data(), ldc, accumulate);
  EXPECT_TRUE(matches(C, ldc, C0, accumulate, ref, M, N, K))
      << "gemm_strided: M " << M << " N " << N << " K " << K << " accumulate " << accumulate;
}

// The JIT path of A^T B over many rows (a weight's gradient, which gemm_strided takes when OpenBLAS
// runs narrower vectors than the JIT), forced: around its 128-row chunks of K, 64-row blocks of M and
// 512-column blocks of N.
TEST(Gemm, TransposedAOverManyRowsOnTheJitKernels) {
  for (int M : {128, 200, 512})
    for (int N : {9, 130, 600})
      for (int K : {128, 129, 300, 1000})
        for (bool accumulate : {false, true}) check_transposed_a("jit", gemm_at_jit, M, N, K, accumulate);
}

// The path of A^T B over many rows on packed chunks of B (a weight's gradient, which gemm_strided
// takes from 1024 rows when OpenBLAS's vectors are as wide as the JIT's), forced: around its
// 256-row chunks of K (a last partial chunk), 64-row blocks of M, 128-column panels of N.
TEST(Gemm, TransposedAOverManyRowsOnPackedChunks) {
  auto packed = [](int M, int N, int K, const float* A, int lda, const float* B, int ldb, float* C, int ldc,
                   bool accumulate) {
    gemm_at_packed(M, N, K, A, lda, B, ldb, C, ldc, accumulate);
    return true;
  };
  for (int M : {128, 200})
    for (int N : {9, 130, 600})
      for (int K : {200, 256, 300, 1100})
        for (bool accumulate : {false, true}) check_transposed_a("packed", packed, M, N, K, accumulate);
}

// gemm_strided with a few rows of A (a decode step's query row) reads B where it lies: dot
// products against B's rows when B is transposed (q k^T, up to four rows of A), row sums of B
// scaled by A otherwise (p V: one row, B of at most 128 x 128); around the 16-float vectors, the
// four rows of B at a time and the 64 columns in registers, C accumulating or not, alpha, strided
// operands; beyond those, the general path.
TEST(Gemm, StridedWithFewRowsOfA) {
  for (int M : {1, 2, 4, 5})
    for (int N : {1, 3, 4, 5, 63, 64, 65, 130})
      for (int K : {1, 15, 16, 17, 64, 100, 200})
        for (bool trans_b : {false, true})
          for (bool accumulate : {false, true}) {
            const int lda = K + 2, ldc = N + 2, ldb = (trans_b ? K : N) + 5;
            const auto A = random_floats(size_t(M) * K, -1, 1, 21);
            const auto B = random_floats(size_t(K) * N, -1, 1, 22);  // [K, N]
            const auto stored = trans_b ? transposed_padded(B, K, N, ldb) : padded(B, K, N, ldb, kNaN);
            std::vector<float> half(A);
            for (float& x : half) x *= 0.5f;
            const Reference ref = reference_product(M, N, K, half, B);
            const auto C0 = random_floats(size_t(M) * N, -1, 1, 23);
            std::vector<float> C = padded(C0, M, N, ldc, kSentinel);
            gemm_strided(false, trans_b, M, N, K, padded(A, M, K, lda, kNaN).data(), lda, stored.data(), ldb,
                         C.data(), ldc, accumulate, 0.5f);
            EXPECT_TRUE(matches(C, ldc, C0, accumulate, ref, M, N, K))
                << "M " << M << " N " << N << " K " << K << " trans_b " << trans_b << " accumulate " << accumulate;
          }
}

// gemm_strided with B transposed (B stored [N, K]: P V's adjoint dC V^T, a head's keys) on more rows
// of A than the few-row kernels take: B copied row-major by 8 x 8 blocks, then scaled by alpha, for
// the JIT path; sizes around the 8-float blocks, strided B.
TEST(Gemm, StridedWithBTransposed) {
  for (int M : {5, 17, 64})
    for (int N : {1, 7, 8, 9, 33, 64})
      for (int K : {1, 7, 8, 9, 64, 100})
        for (float alpha : {1.0f, 0.5f})
          for (bool accumulate : {false, true}) {
            const int lda = K + 1, ldb = K + 3, ldc = N + 2;
            const auto A = random_floats(size_t(M) * K, -1, 1, 41);
            const auto B = random_floats(size_t(K) * N, -1, 1, 42);  // [K, N]
            const auto stored = transposed_padded(B, K, N, ldb);  // B^T: [N, K]
            std::vector<float> scaled(A);
            for (float& x : scaled) x *= alpha;
            const Reference ref = reference_product(M, N, K, scaled, B);
            const auto C0 = random_floats(size_t(M) * N, -1, 1, 43);
            std::vector<float> C = padded(C0, M, N, ldc, kSentinel);
            gemm_strided(false, true, M, N, K, padded(A, M, K, lda, kNaN).data(), lda, stored.data(), ldb, C.data(),
                         ldc, accumulate, alpha);
            EXPECT_TRUE(matches(C, ldc, C0, accumulate, ref, M, N, K))
                << "M " << M << " N " << N << " K " << K << " alpha " << alpha << " accumulate " << accumulate;
          }
}

TEST(Gemm, ZeroKClearsOrKeepsC) {
  const int M = 3, N = 4;
  const auto W = pack_weights(0, N, nullptr, N);
  for (GemmPath path : {GemmPath::Gemv, GemmPath::Xsmm, GemmPath::Blas}) {
    std::vector<float> C(M * N, 7.0f);
    gemm_packed_via(path, M, nullptr, 0, *W, C.data(), N, /*accumulate=*/true);
    EXPECT_EQ(C, std::vector<float>(M * N, 7.0f)) << gemm_path_name(path);
    gemm_packed_via(path, M, nullptr, 0, *W, C.data(), N, /*accumulate=*/false);
    EXPECT_EQ(C, std::vector<float>(M * N, 0.0f)) << gemm_path_name(path);
  }
}

TEST(Gemm, PackedWeightsOwnACopy) {
  const int M = 4, N = 130, K = 9;
  auto B = random_floats(size_t(K) * N, -1, 1, 5);
  const auto A = random_floats(size_t(M) * K, -1, 1, 6);
  const Reference ref = reference_product(M, N, K, A, B);
  const auto W = pack_weights(K, N, B.data(), N);
  std::fill(B.begin(), B.end(), kNaN);
  for (GemmPath path : {GemmPath::Gemv, GemmPath::Xsmm, GemmPath::Blas}) {
    std::vector<float> C(size_t(M) * N);
    gemm_packed_via(path, M, A.data(), K, *W, C.data(), N, false);
    EXPECT_TRUE(matches(C, N, /*C0=*/{}, false, ref, M, N, K)) << gemm_path_name(path);
  }
}

TEST(Gemm, InPlaceWeightsFollowTheirMatrixWhenRepacked) {
  // A param's packing: the row-major paths read B itself, the panels are repacked after B changes.
  const int M = 5, N = 130, K = 40;
  auto B = random_floats(size_t(K) * N, -1, 1, 15);
  const auto A = random_floats(size_t(M) * K, -1, 1, 16);
  const auto W = pack_weights_in_place(K, N, B.data(), N);
  for (int round = 0; round < 2; ++round) {
    const Reference ref = reference_product(M, N, K, A, B);
    for (GemmPath path : {GemmPath::Gemv, GemmPath::Xsmm, GemmPath::Blas}) {
      std::vector<float> C(size_t(M) * N);
      gemm_packed_via(path, M, A.data(), K, *W, C.data(), N, false);
      EXPECT_TRUE(matches(C, N, /*C0=*/{}, false, ref, M, N, K)) << gemm_path_name(path) << ", round " << round;
    }
    for (float& b : B) b = 0.5f - b;  // changed in place, as an optimiser step does
    W->repack(B.data(), N);
  }
}

// Panels [p0, p1) of a packed product (what threads sharing one product each compute) give its
// columns the bits of the whole product, whatever the cut: a last narrower panel, row blocks of
// more than 64 rows and a remainder, a long K computed in chunks of the panel's rows (K 1100 on any
// L2 of 1 or 2 MiB), accumulating or not; no column outside the range is written.
TEST(Gemm, PackedPanelsGiveTheBitsOfTheWholeProduct) {
  for (const auto& [M, K, N] : {std::tuple{3, 40, 300}, std::tuple{130, 1100, 260}, std::tuple{64, 512, 1280}}) {
    const int lda = K + 3, ldc = N + 5;
    const auto B = random_floats(size_t(K) * N, -1, 1, 21);
    const auto A = padded(random_floats(size_t(M) * K, -1, 1, 22), M, K, lda, kNaN);
    const auto C0 = padded(random_floats(size_t(M) * N, -1, 1, 23), M, N, ldc, kSentinel);
    const auto W = pack_weights(K, N, B.data(), N);
    const int panels = packed_panels(M, *W);
    ASSERT_EQ(panels, (N + 127) / 128) << M << "x" << K << "x" << N;
    for (bool accumulate : {false, true}) {
      std::vector<float> whole = C0;
      gemm_packed(M, A.data(), lda, *W, whole.data(), ldc, accumulate);
      // Cuts after every panel, and into two uneven parts; the parts computed last to first.
      for (const int step : {1, panels - 1}) {
        std::vector<float> parts = C0;
        std::vector<int> cuts{0};
        for (int p = step; p < panels; p += step) cuts.push_back(p);
        cuts.push_back(panels);
        for (size_t i = cuts.size() - 1; i-- > 0;) {
          std::vector<float> before = parts;
          gemm_packed_panels(M, A.data(), lda, *W, parts.data(), ldc, accumulate, cuts[i], cuts[i + 1]);
          for (int m = 0; m < M; ++m)
            for (int n = 0; n < ldc; ++n) {
              const bool inside = n >= cuts[i] * 128 && n < std::min(N, cuts[i + 1] * 128);
              if (!inside) {
                ASSERT_EQ(std::memcmp(&parts[size_t(m) * ldc + n], &before[size_t(m) * ldc + n], 4), 0);
              }
            }
        }
        EXPECT_EQ(std::memcmp(parts.data(), whole.data(), whole.size() * sizeof(float)), 0)
            << M << "x" << K << "x" << N << ", accumulate " << accumulate << ", panels by " << step;
      }
    }
  }
  // Products that take no panels: one row by a large weight (sgemv), no rows.
  const auto big = pack_weights(1024, 1024, random_floats(size_t(1024) * 1024, -1, 1, 24).data(), 1024);
  EXPECT_EQ(packed_panels(1, *big), choose_gemm_path(1, 1024, 1024) == GemmPath::Xsmm ? 8 : 0);
  EXPECT_EQ(packed_panels(0, *big), 0);
}

TEST(Gemm, ThreadsShareWeightsSafely) {
  // Each thread has its own JIT kernel cache; the packed weights are shared read-only.
  const int N = 300, K = 64;
  const auto B = random_floats(size_t(K) * N, -1, 1, 8);
  const auto W = pack_weights(K, N, B.data(), N);
  std::vector<std::thread> threads;
  std::vector<int> ok(4, 0);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      const int M = 5 + 7 * t;
      const auto A = random_floats(size_t(M) * K, -1, 1, 100 + t);
      const Reference ref = reference_product(M, N, K, A, B);
      bool all = true;
      for (int rep = 0; rep < 20; ++rep) {
        std::vector<float> C(size_t(M) * N);
        gemm_packed_via(GemmPath::Xsmm, M, A.data(), K, *W, C.data(), N, false);
        all = all && matches(C, N, /*C0=*/{}, false, ref, M, N, K);
      }
      ok[t] = all;
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(ok, std::vector<int>(4, 1));
}

}  // namespace
}  // namespace acrobat::kernels
