#include "runtime/fused_loops.h"

#include <algorithm>
#include <vector>

#include "ops/ops.h"
#include "kernels/simd.h"
#include "kernels/vec_math.h"
#include "runtime/batch_operands.h"

namespace acrobat {

namespace {

namespace simd = kernels::simd;
using simd::Vec;

// out[0, n) = f(a[0, n), b[0, n)); the last partial register goes through padded buffers, as in the
// generated kernels, so every element sees the same code.
template <class F>
void apply(int64_t n, const float* a, const float* b, float* out, F f) {
  int64_t j = 0;
  for (; j + simd::kLanes <= n; j += simd::kLanes)
    simd::store(out + j, f(simd::load(a + j), b ? simd::load(b + j) : Vec{}));
  if (j < n) {
    float pa[simd::kLanes] = {}, pb[simd::kLanes] = {}, po[simd::kLanes];
    std::copy(a + j, a + n, pa);
    if (b) std::copy(b + j, b + n, pb);
    simd::store(po, f(simd::load(pa), simd::load(pb)));
    std::copy(po, po + (n - j), out + j);
  }
}

// One entry per operator of ops.def: its fused SIMD expression over a tile (null for operators
// that are not elementwise).
const TileFn kTileFns[] = {
#define ACROBAT_OP(id, name, arity, attrs, cls, simd_expr, adjoint)                              \
  OpClass::cls != OpClass::Elementwise                                                           \
      ? TileFn{nullptr}                                                                          \
      : TileFn{[](int64_t n, const float* pa, const float* pb, float* out) {                     \
          apply(n, pa, pb, out, [](Vec a, Vec b) -> Vec {                                        \
            (void)a;                                                                             \
            (void)b;                                                                             \
            return Vec simd_expr;                                                                \
          });                                                                                    \
        }},
#include "ops/ops.def"
#undef ACROBAT_OP
};

// Floats per tile when no operand broadcasts a row (then a tile is one row of the result).
constexpr int64_t kTile = 512;

}  // namespace

TileFn fused_tile_fn(OpId op) { return kTileFns[static_cast<int>(op)]; }

void run_fused_step(const analysis::StaticBlock& s, const analysis::KernelPlan& k,
                    const analysis::KernelStep& step, int64_t B, const aot::Operand* args,
                    const aot::Operand* values, Arena& scratch) {
  using analysis::FusedLoad;
  const int64_t size = step.size;
  const int g = k.group[step.begin];
  std::vector<int> ops;
  int64_t tile = std::min(size, kTile);
  for (int i = step.begin; i < step.end; ++i) {
    if (k.group[i] != g) continue;
    ops.push_back(i);
    for (FusedLoad l : k.loads[i])
      if (l == FusedLoad::RowBroadcast) tile = s.ops[i].shape[1];
  }
  // Tiles: one per operator (its value, when not stored) and two per operator for loads that are
  // computed (a splat, a bias add).
  const size_t n = s.ops.size();
  float* tiles = scratch.alloc(static_cast<size_t>(3 * ops.size() * tile));
  std::vector<float*> own(n, nullptr), temp_a(n, nullptr), temp_b(n, nullptr);
  for (size_t t = 0; t < ops.size(); ++t) {
    own[ops[t]] = tiles + (3 * t) * tile;
    temp_a[ops[t]] = tiles + (3 * t + 1) * tile;
    temp_b[ops[t]] = tiles + (3 * t + 2) * tile;
  }
  std::vector<const float*> cur(n, nullptr);  // each operator's values in the current tile
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t j0 = 0; j0 < size; j0 += tile) {
      const int64_t len = std::min(tile, size - j0);
      for (int i : ops) {
        const analysis::BlockOp& op = s.ops[i];
        const float* in[2] = {nullptr, nullptr};
        for (size_t a = 0; a < op.operands.size(); ++a) {
          const analysis::BlockOperand& o = op.operands[a];
          float* temp = a == 0 ? temp_a[i] : temp_b[i];
          const float* row = o.local ? values[o.index].data + b * values[o.index].stride
                                     : operand_row(args[o.index], b);
          switch (k.loads[i][a]) {
            case FusedLoad::Register: in[a] = cur[o.index]; break;
            case FusedLoad::Full: in[a] = row + j0; break;
            case FusedLoad::Splat:
              std::fill(temp, temp + len, row[0]);
              in[a] = temp;
              break;
            case FusedLoad::RowBroadcast: in[a] = row + j0 % s.ops[i].shape[1]; break;
            case FusedLoad::FullPlusBias: {
              const analysis::ValueLoc& l = k.loc[o.index];
              const float* bias = operand_row(args[l.bias], b) + l.bias_offset + j0;
              kTileFns[static_cast<int>(OpId::Add)](len, row + j0, bias, temp);
              in[a] = temp;
              break;
            }
          }
        }
        float* out = k.stored[i] ? const_cast<float*>(values[i].data) + b * values[i].stride + j0 : own[i];
        kTileFns[static_cast<int>(op.rhs->op)](len, in[0], in[1], out);
        cur[i] = out;
      }
    }
  }
}

}  // namespace acrobat
