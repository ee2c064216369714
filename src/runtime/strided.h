// One instance's value of a ragged block's operator where it lies: packed, or a view of another
// value (a column slice, heads, a transpose: the ragged plan's views, analysis/ragged_plan.h),
// read in place by the forward (ragged_blocks.cpp) and by the backward (autodiff/ragged_reverse.cpp).
#pragma once

#include <cstddef>
#include <cstdint>

#include "analysis/ragged_plan.h"
#include "ops/ops.h"

namespace acrobat {

// A value as a stack of matrices [H, M, N] (a matrix has H = 1; a lower rank is one row): element
// (h, i, j) at p + h * hs + i * ld + j, or at p + h * hs + j * ld + i when transposed. A packed
// value has hs = M * N and ld = N.
struct Strided {
  float* p = nullptr;
  int64_t hs = 0, ld = 0;
  bool trans = false;
};

// Rows, columns and matrices of a shape (any rank: the leading axes are the stack).
struct Matrix {
  int64_t H, M, N;
};
inline Matrix matrix_of(const int64_t* d, size_t rank) {
  if (rank == 0) return {1, 1, 1};
  if (rank == 1) return {1, 1, d[0]};
  int64_t H = 1;
  for (size_t i = 0; i + 2 < rank; ++i) H *= d[i];
  return {H, d[rank - 2], d[rank - 1]};
}

inline Strided packed_value(float* p, const int64_t* d, size_t rank) {
  Matrix m = matrix_of(d, rank);
  return Strided{p, m.M * m.N, m.N, false};
}

// Value `u` seen through a view operator (`attrs` its attributes, `d` its value's dims).
inline Strided through_view(Strided u, analysis::RaggedView view, const OpAttrs& attrs, const int64_t* d) {
  switch (view) {
    case analysis::RaggedView::Columns: u.p += attrs.ints[0]; break;
    case analysis::RaggedView::Heads: u.hs = d[2]; break;
    case analysis::RaggedView::Transpose: u.trans = !u.trans; break;
    case analysis::RaggedView::None: break;
  }
  return u;
}

}  // namespace acrobat
