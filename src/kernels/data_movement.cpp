// Data movement kernels: strided block copies (concat, slice, split), row gathers (embedding
// lookups) and transposes.
#include <algorithm>
#include <cstring>

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

void transpose_2d(const float* x, float* y, int64_t rows, int64_t cols) {
  // Square tiles keep both the rows read and the rows written in L1; a 32 x 32 float tile is 4 KiB.
  constexpr int64_t kTile = 32;
  for (int64_t r0 = 0; r0 < rows; r0 += kTile) {
    const int64_t r1 = std::min(rows, r0 + kTile);
    for (int64_t c0 = 0; c0 < cols; c0 += kTile) {
      const int64_t c1 = std::min(cols, c0 + kTile);
      for (int64_t r = r0; r < r1; ++r) {
        for (int64_t c = c0; c < c1; ++c) y[c * rows + r] = x[r * cols + c];
      }
    }
  }
}

}  // namespace acrobat::kernels
