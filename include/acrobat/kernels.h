// CPU kernels: the backend boundary between acrobat's engines and the machine. Every function works on
// row-major float32 buffers the caller owns, is single-threaded (the runtime owns threading), and
// allocates nothing per call except where noted. A GPU backend would implement the same set.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace acrobat::kernels {

// ---- GEMM ---------------------------------------------------------------------------------------
// C[M,N] = A[M,K] * B[K,N]  (C += ... when accumulate). lda/ldb/ldc are row strides in elements.
// For a B used once (both operands computed per instance); a parameter is packed instead (below).
// Uses choose_plain_gemm_path(M, N, K); the first Xsmm call for a new (M, N, K, lda, ldb, ldc,
// accumulate) on a thread JIT-compiles its kernel and caches it.
void gemm(int M, int N, int K, const float* A, int lda, const float* B, int ldb, float* C, int ldc,
          bool accumulate);

// C[M,N] = alpha op(A) op(B) (+ C) where op(X) is X, or X^T when trans_x (then X is stored
// [K, M] or [N, K], row-major with its row stride). For products of per-instance operands read
// where they lie: column slices, heads and transposed views (runtime/ragged_blocks.h).
void gemm_strided(bool trans_a, bool trans_b, int M, int N, int K, const float* A, int lda,
                  const float* B, int ldb, float* C, int ldc, bool accumulate, float alpha = 1.0f);
// gemm_strided's path for C = A^T B (+ C) over many rows on the JIT kernels, which it takes when
// OpenBLAS runs narrower vectors than the JIT (A stored [K, M]); forced, for tests and benchmarks.
// False, with C untouched, when libxsmm cannot JIT a kernel it needs.
bool gemm_at_jit(int M, int N, int K, const float* A, int lda, const float* B, int ldb, float* C, int ldc,
                 bool accumulate);
// gemm_strided's path for the same product over many rows (K >= 1024) when OpenBLAS runs vectors as
// wide as the JIT: chunks of A transposed and of B packed for gemm_packed's JIT kernels; forced, for
// tests and benchmarks.
void gemm_at_packed(int M, int N, int K, const float* A, int lda, const float* B, int ldb, float* C, int ldc,
                    bool accumulate);
// Which of the two gemm_strided takes for a weight-sized A^T B (or cblas_sgemm with A transposed):
// the JIT path where OpenBLAS is narrower and libxsmm can JIT the kernels (`jit_available`), else the
// packed path for K >= 1024 rows and N >= 128, else sgemm.
enum class WeightGradientPath { Jit, Packed, Blas };
WeightGradientPath weight_gradient_path(int N, int K, bool jit_available = true);
const char* weight_gradient_path_name(WeightGradientPath path);

// The ways a GEMM can be carried out; the dispatcher picks one from M, N, K by rules measured on this
// machine (bench/gemm_bench prints the table the rules come from).
enum class GemmPath {
  Gemv,  // cblas_sgemv on the row-major weights, one call per row of A (meant for M == 1)
  Xsmm,  // libxsmm JIT micro-kernels over pre-packed K x 128 weight panels (small and medium K),
         // in 64-row blocks of A; for N <= 8, an AVX-512 dot-product kernel on a copy of W^T
  Blas,  // single-threaded OpenBLAS sgemm on the row-major weights (large K and M)
};
const char* gemm_path_name(GemmPath path);
GemmPath choose_gemm_path(int M, int N, int K);
// For a plain B: Gemv for M == 1, else Xsmm (one JIT kernel reading B in place) up to 512^3, Blas.
GemmPath choose_plain_gemm_path(int M, int N, int K);
// gemm with the path forced (for benchmarks and tests of every path).
void gemm_via(GemmPath path, int M, int N, int K, const float* A, int lda, const float* B, int ldb,
              float* C, int ldc, bool accumulate);

// A weight matrix B[K,N] used by many GEMMs (a model parameter), prepared once for every path:
// B row-major for Gemv/Blas (a copy, or the caller's matrix read in place: pack_weights_in_place,
// pack_transposed_weights) and column panels for the JIT kernels (plus W^T when N <= 8).
class PackedWeights {
 public:
  virtual ~PackedWeights() = default;
  virtual int K() const = 0;
  virtual int N() const = 0;
  // Packs B (of the same K x N) again into the same storage: the weights changed in place
  // (training), and every kernel holding this object reads the new values. Not while a kernel runs.
  virtual void repack(const float* B, int ldb) = 0;
  // The same from B's transpose: B = W^T for a W[N, K] of row stride ldw (a product by a weight's
  // transpose, dX = dY W^T, packed straight from the weight).
  virtual void repack_transposed(const float* W, int ldw) = 0;
};
std::shared_ptr<PackedWeights> pack_weights(int K, int N, const float* B, int ldb);
// The same with the row-major paths (Gemv, Blas) reading B in place instead of a copy: B must
// outlive the object's use, and after B changes the object must be repacked (its panels are a
// copy). A model parameter's matrices, updated in place by training and repacked after each step.
std::shared_ptr<PackedWeights> pack_weights_in_place(int K, int N, const float* B, int ldb);
// B = W^T packed from W[N, K] (row stride ldw), read in place like pack_weights_in_place's B.
std::shared_ptr<PackedWeights> pack_transposed_weights(int K, int N, const float* W, int ldw);

// C[M,N] = A[M,K] * W (+ C). Uses choose_gemm_path(M, N, K). The first Xsmm call for a new
// (min(M, 64) or M % 64, N, K, lda, ldc, accumulate) on a thread JIT-compiles its kernels and
// caches them: at most 64 kernel pairs per (N, K, lda, ldc, accumulate) whatever the M.
void gemm_packed(int M, const float* A, int lda, const PackedWeights& W, float* C, int ldc,
                 bool accumulate);
// The same with the path forced (for benchmarks and tests of every path).
void gemm_packed_via(GemmPath path, int M, const float* A, int lda, const PackedWeights& W, float* C,
                     int ldc, bool accumulate);
// The JIT path computes a product panel by panel of W's columns (128 each, the last narrower), each
// on its own: packed_panels(M, W) is how many panels gemm_packed(M, ..., W, ...) computes so (0 when
// it takes another path), and gemm_packed_panels computes panels [p0, p1) only, with the bits
// gemm_packed gives those columns, so that threads can share one product (where libxsmm cannot JIT
// its kernels, sgemm computes them, with bits that may depend on the cut).
int packed_panels(int M, const PackedWeights& W);
void gemm_packed_panels(int M, const float* A, int lda, const PackedWeights& W, float* C, int ldc,
                        bool accumulate, int p0, int p1);

// ---- Elementwise ---------------------------------------------------------------------------------
// y may alias x. The fast transcendental functions are vectorised approximations; their maximum
// errors over all finite floats (absolute for tanh/sigmoid, relative for exp/log, where exp's result
// is a normal float) are the constants below (tests measure them). They saturate, overflow and
// underflow like std::, and NaN in gives NaN out.
inline constexpr float kTanhMaxAbsError = 5e-7f;
inline constexpr float kSigmoidMaxAbsError = 5e-7f;
inline constexpr float kExpMaxRelError = 5e-7f;
inline constexpr float kLogMaxRelError = 5e-7f;

void tanh(const float* x, float* y, size_t n);
void sigmoid(const float* x, float* y, size_t n);
void exp(const float* x, float* y, size_t n);
void log(const float* x, float* y, size_t n);
void relu(const float* x, float* y, size_t n);
// The adjoint of an elementwise y = f(x): dx = dy * f'(x) from x (relu) or from y (tanh, sigmoid,
// exp), written to dx (which may be dy itself) or added to it with `accumulate`.
enum class UnaryBackward { Relu, Tanh, Sigmoid, Exp };
void unary_backward(UnaryBackward f, const float* x, const float* y, const float* dy, float* dx, size_t n,
                    bool accumulate);
void neg(const float* x, float* y, size_t n);

enum class BinaryOp { Add, Sub, Mul, Div };
// y[i] = a[i] op b[i]
void binary(BinaryOp op, const float* a, const float* b, float* y, size_t n);
// Broadcasting form: out_dims has `rank` entries; a_strides/b_strides are element strides per output
// dimension, 0 where that operand is broadcast. Output is contiguous.
void binary_broadcast(BinaryOp op, int rank, const int64_t* out_dims, const float* a,
                      const int64_t* a_strides, const float* b, const int64_t* b_strides, float* y);

// ---- Row-wise ------------------------------------------------------------------------------------
// Each of `rows` rows of `cols` contiguous elements independently; y may alias x.
void softmax(const float* x, float* y, int rows, int cols);
void log_softmax(const float* x, float* y, int rows, int cols);
// Their adjoints for dy [rows, cols], from their values y: softmax's dx = y * (dy - <dy, y>),
// log_softmax's dx = dy - exp(y) * sum(dy), per row, written to dx (which may be dy itself) or
// added to it with `accumulate`. softmax's `scale` multiplies its dx before it is written or added
// (the adjoint of x in softmax(x * scale), with x * scale's adjoint rounded to float first).
void softmax_backward(const float* y, const float* dy, float* dx, int rows, int cols, bool accumulate,
                      float scale = 1.0f);
void log_softmax_backward(const float* y, const float* dy, float* dx, int rows, int cols, bool accumulate);
// The eps of the language's layer_norm (PyTorch's default).
inline constexpr float kLayerNormEps = 1e-5f;
// y = (x - mean) / sqrt(var + eps) * gamma + beta, gamma/beta of length cols (biased variance).
void layer_norm(const float* x, const float* gamma, const float* beta, float eps, float* y, int rows,
                int cols);
// Its adjoint for dy [rows, cols]: dx = rstd * (g - mean(g) - xhat * mean(g * xhat)) with g = dy *
// gamma, written to dx, or added to it with `accumulate` (null: not wanted); dgamma += the sum over
// the rows of dy * xhat and dbeta += that of dy, the rows in order (each may be null).
void layer_norm_backward(const float* x, const float* gamma, const float* dy, float eps, int rows, int cols,
                         float* dx, bool accumulate, float* dgamma, float* dbeta);

// ---- Reductions ---------------------------------------------------------------------------------
// x viewed as [outer, len, inner]; reduces the middle dimension into y[outer, inner].
enum class ReduceOp { Sum, Mean, Max };
void reduce(ReduceOp op, const float* x, float* y, int64_t outer, int64_t len, int64_t inner);
// Index of the first maximum of x[0..n).
int64_t argmax(const float* x, int64_t n);

// ---- Data movement ------------------------------------------------------------------------------
// Copies a rows x cols block between buffers with row strides (concat, slice, split use this).
void copy_2d(const float* src, int64_t src_ld, float* dst, int64_t dst_ld, int64_t rows,
             int64_t cols);
// out[i, :] = table[index[i], :] for n rows of row_len elements. Indices must be in range (the caller
// checks them against the table size and reports a user error).
void gather_rows(const float* table, int64_t row_len, const int64_t* index, int64_t n, float* out);
// y[c, r] = x[r, c] for an x of rows x cols.
void transpose_2d(const float* x, float* y, int64_t rows, int64_t cols);
// The same with row strides: y[c * ldy + r] = x[r * ldx + c].
void transpose_2d(const float* x, int64_t ldx, float* y, int64_t ldy, int64_t rows, int64_t cols);

// ---- Optimiser updates ---------------------------------------------------------------------------
// One step on n elements of a param p with its gradient g (read as g * grad_scale, then set to 0,
// ready for the next step's gradient), in place; the definitions are PyTorch's (torch.optim.Adam
// and SGD). Every element goes through the same code, so a step split over threads at any element
// boundary gives the same bits.
struct AdamStep {
  float grad_scale, weight_decay, beta1, beta2, eps;
  float step_size;   // lr / (1 - beta1^t)
  float sqrt_bias2;  // sqrt(1 - beta2^t)
};
// g' = g * grad_scale + weight_decay * p; m = beta1 m + (1 - beta1) g'; v = beta2 v + (1 - beta2) g'^2;
// p -= step_size * m / (sqrt(v) / sqrt_bias2 + eps).
void adam_update(const AdamStep& s, float* p, float* g, float* m, float* v, size_t n);
struct SgdStep {
  float grad_scale, weight_decay, lr, momentum;
  bool first;  // the first step: the momentum buffer starts as the gradient
};
// g' = g * grad_scale + weight_decay * p; b = momentum b + g' (b = g' when first or momentum is 0);
// p -= lr * b.
void sgd_update(const SgdStep& s, float* p, float* g, float* b, size_t n);
// The sum of the squares of x[0, n) in double (a gradient's norm for clipping).
double sum_squares(const float* x, size_t n);
// Whether every x[0, n) is zero (+0 or -0).
bool all_zero(const float* x, size_t n);

}  // namespace acrobat::kernels
