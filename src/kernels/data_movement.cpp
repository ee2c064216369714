// Data movement kernels: strided block copies (concat, slice, split), row gathers (embedding
// lookups) and transposes.
#include <algorithm>
#include <cstring>

#if defined(__AVX__)
#include <immintrin.h>
#endif

#include "acrobat/kernels.h"

namespace acrobat::kernels {

void copy_2d(const float* src, int64_t src_ld, float* dst, int64_t dst_ld, int64_t rows,
             int64_t cols) {
  if (rows <= 0 || cols <= 0) return;
  if (src_ld == cols && dst_ld == cols) {
    std::memcpy(dst, src, sizeof(float) * rows * cols);
    return;
  }
  for (int64_t r = 0; r < rows; ++r) {
    std::memcpy(dst + r * dst_ld, src + r * src_ld, sizeof(float) * cols);
  }
}

void gather_rows(const float* table, int64_t row_len, const int64_t* index, int64_t n, float* out) {
  for (int64_t i = 0; i < n; ++i) {
    std::memcpy(out + i * row_len, table + index[i] * row_len, sizeof(float) * row_len);
  }
}

namespace {

#if defined(__AVX__)
// y[8 x 8] (row stride ldy) = x[8 x 8]^T (row stride ldx), in registers.
inline void transpose_8x8(const float* x, int64_t ldx, float* y, int64_t ldy) {
  __m256 r[8], t[8];
  for (int i = 0; i < 8; ++i) r[i] = _mm256_loadu_ps(x + i * ldx);
  for (int i = 0; i < 8; i += 2) {
    t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
    t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
  }
  for (int i = 0; i < 8; i += 4) {
    r[i] = _mm256_shuffle_ps(t[i], t[i + 2], _MM_SHUFFLE(1, 0, 1, 0));
    r[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], _MM_SHUFFLE(3, 2, 3, 2));
    r[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], _MM_SHUFFLE(1, 0, 1, 0));
    r[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], _MM_SHUFFLE(3, 2, 3, 2));
  }
  for (int i = 0; i < 4; ++i) {
    _mm256_storeu_ps(y + i * ldy, _mm256_permute2f128_ps(r[i], r[i + 4], 0x20));
    _mm256_storeu_ps(y + (i + 4) * ldy, _mm256_permute2f128_ps(r[i], r[i + 4], 0x31));
  }
}
#endif

}  // namespace

void transpose_2d(const float* x, float* y, int64_t rows, int64_t cols) { transpose_2d(x, cols, y, rows, rows, cols); }

void transpose_2d(const float* x, int64_t ldx, float* y, int64_t ldy, int64_t rows, int64_t cols) {
  // Square tiles keep both the rows read and the rows written in L1; a 32 x 32 float tile is 4 KiB.
  // Inside a tile, 8 x 8 blocks go through registers where the target has AVX.
  constexpr int64_t kTile = 32;
  for (int64_t r0 = 0; r0 < rows; r0 += kTile) {
    const int64_t r1 = std::min(rows, r0 + kTile);
    for (int64_t c0 = 0; c0 < cols; c0 += kTile) {
      const int64_t c1 = std::min(cols, c0 + kTile);
      int64_t r = r0;
#if defined(__AVX__)
      for (; r + 8 <= r1; r += 8) {
        int64_t c = c0;
        for (; c + 8 <= c1; c += 8) transpose_8x8(x + r * ldx + c, ldx, y + c * ldy + r, ldy);
        for (; c < c1; ++c)
          for (int64_t i = r; i < r + 8; ++i) y[c * ldy + i] = x[i * ldx + c];
      }
#endif
      for (; r < r1; ++r) {
        for (int64_t c = c0; c < c1; ++c) y[c * ldy + r] = x[r * ldx + c];
      }
    }
  }
}

}  // namespace acrobat::kernels
