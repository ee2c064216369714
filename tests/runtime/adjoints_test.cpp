// Every differentiable operator's adjoint (autodiff/adjoints.h) against central finite differences of
// its forward in double precision, on shapes that exercise broadcasting, stacks and every axis; the
// float adjoint against the double one; and the double forward against the engines' float kernels
// (runtime/reference_kernels.h), so the rule checked and the operator run are one operator.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "acrobat/kernels.h"
#include "ops/ops.h"
#include "autodiff/adjoints.h"
#include "runtime/reference_kernels.h"
#include "runtime/value.h"

namespace acrobat {
namespace {

struct Case {
  OpId op;
  std::vector<std::vector<int64_t>> shapes;
  std::vector<int64_t> ints;  // attributes
  // Inputs drawn away from where the operator has no derivative (log, div: positive; relu, max:
  // away from ties and kinks).
  bool positive = false;
};

std::vector<Case> cases() {
  using V = std::vector<std::vector<int64_t>>;
  std::vector<Case> c = {
      {OpId::MatMul, V{{3, 4}, {4, 5}}, {}},
      {OpId::MatMul, V{{2, 3, 4}, {4, 5}}, {}},
      {OpId::MatMul, V{{2, 3, 4}, {2, 4, 5}}, {}},
      {OpId::MatMul, V{{1, 6}, {6, 1}}, {}},
      {OpId::Add, V{{3, 4}, {3, 4}}, {}},
      {OpId::Add, V{{3, 4}, {1, 4}}, {}},
      {OpId::Add, V{{2, 3, 4}, {4}}, {}},
      {OpId::Sub, V{{3, 4}, {3, 1}}, {}},
      {OpId::Sub, V{{1, 4}, {3, 4}}, {}},
      {OpId::Mul, V{{3, 4}, {3, 4}}, {}},
      {OpId::Mul, V{{3, 4}, {1, 1}}, {}},
      {OpId::Div, V{{3, 4}, {1, 4}}, {}, true},
      {OpId::Div, V{{3, 4}, {3, 4}}, {}, true},
      {OpId::Neg, V{{3, 5}}, {}},
      {OpId::Sigmoid, V{{3, 5}}, {}},
      {OpId::Tanh, V{{3, 5}}, {}},
      {OpId::Relu, V{{3, 5}}, {}},
      {OpId::Exp, V{{3, 5}}, {}},
      {OpId::Log, V{{3, 5}}, {}, true},
      {OpId::Softmax, V{{3, 6}}, {-1}},
      {OpId::Softmax, V{{2, 2, 5}}, {-1}},
      {OpId::LogSoftmax, V{{3, 6}}, {-1}},
      {OpId::LayerNorm, V{{3, 8}, {1, 8}, {8}}, {}},
      {OpId::LayerNorm, V{{2, 2, 5}, {5}, {1, 5}}, {}},
      {OpId::Sum, V{{3, 4, 5}}, {0}},
      {OpId::Sum, V{{3, 4, 5}}, {1}},
      {OpId::Sum, V{{3, 4, 5}}, {-1}},
      {OpId::Mean, V{{3, 4, 5}}, {1}},
      {OpId::Mean, V{{3, 4}}, {-1}},
      {OpId::Max, V{{3, 4, 5}}, {0}},
      {OpId::Max, V{{3, 4, 5}}, {-1}},
      {OpId::Concat, V{{2, 3}, {2, 4}}, {-1}},
      {OpId::Concat, V{{1, 3}, {2, 3}, {1, 3}}, {0}},
      {OpId::Slice, V{{4, 6}}, {1, 4, -1}},
      {OpId::Slice, V{{4, 6}}, {0, 2, 0}},
      {OpId::Slice, V{{2, 5, 3}}, {2, 5, 1}},
      {OpId::Transpose, V{{3, 5}}, {}},
      {OpId::Transpose, V{{2, 3, 5}}, {}},
      {OpId::Heads, V{{4, 6}}, {2}},
      {OpId::MergeHeads, V{{2, 4, 3}}, {}},
      {OpId::Causal, V{{4, 4}}, {}},
      {OpId::Causal, V{{2, 3, 3}}, {}},
  };
  return c;
}

std::string describe(const Case& c) {
  std::string s = op_info(c.op).name;
  for (const auto& shape : c.shapes) {
    s += " [";
    for (size_t i = 0; i < shape.size(); ++i) s += (i ? "," : "") + std::to_string(shape[i]);
    s += "]";
  }
  for (int64_t a : c.ints) s += " " + std::to_string(a);
  return s;
}

template <class T>
std::vector<TensorArg<T>> args(const Case& c, const std::vector<std::vector<T>>& data) {
  std::vector<TensorArg<T>> out;
  for (size_t i = 0; i < c.shapes.size(); ++i) out.push_back({c.shapes[i], data[i].data()});
  return out;
}

template <class T>
std::vector<T> run_forward(const Case& c, const std::vector<std::vector<T>>& data, const std::vector<int64_t>& out_shape) {
  std::vector<T> out(static_cast<size_t>(num_elements(out_shape)));
  const auto a = args(c, data);
  forward<T>(c.op, OpAttrs{c.ints}, a, out_shape, out.data());
  return out;
}

TEST(Adjoints, EveryDifferentiableOperatorHasACheck) {
  std::set<OpId> checked;
  for (const Case& c : cases()) checked.insert(c.op);
  for (int i = 0; i < kNumOps; ++i) {
    const OpId op = static_cast<OpId>(i);
    EXPECT_EQ(differentiable(op), checked.count(op) == 1) << op_info(op).name;
  }
}

TEST(Adjoints, MatchFiniteDifferencesInDoublePrecision) {
  std::mt19937_64 rng(7);
  for (const Case& c : cases()) {
    SCOPED_TRACE(describe(c));
    const ShapeResult shape = op_info(c.op).shape(c.shapes, OpAttrs{c.ints});
    ASSERT_TRUE(shape.error.empty()) << shape.error;
    const std::vector<int64_t> out_shape = shape.type->shape;
    std::uniform_real_distribution<double> value(c.positive ? 0.5 : -1.5, 1.5);
    std::vector<std::vector<double>> x;
    for (const auto& s : c.shapes) {
      std::vector<double> v(static_cast<size_t>(num_elements(s)));
      for (double& e : v) {
        e = value(rng);
        // Away from relu's kink and from ties of max: no entry within 0.05 of 0 or of another.
        if (c.op == OpId::Relu && std::abs(e) < 0.05) e = 0.3;
      }
      if (c.op == OpId::Max)
        for (size_t j = 0; j < v.size(); ++j) v[j] = double(j % 7) * 0.25 + double((j * 37) % 11) * 0.01 + value(rng) * 1e-3;
      x.push_back(v);
    }
    const std::vector<double> y = run_forward(c, x, out_shape);
    std::vector<double> dy(y.size());
    for (double& e : dy) e = value(rng);

    // The adjoint in double, accumulated onto a nonzero start (adjoints add).
    std::vector<std::vector<double>> din;
    std::vector<double*> din_ptr;
    for (const auto& v : x) din.emplace_back(v.size(), 0.5);
    for (auto& v : din) din_ptr.push_back(v.data());
    const auto a = args(c, x);
    adjoint<double>(c.op, OpAttrs{c.ints}, a, out_shape, y.data(), dy.data(), din_ptr);

    // L(x) = <dy, op(x)>; central differences, one entry at a time.
    const double h = 1e-6;
    for (size_t i = 0; i < x.size(); ++i)
      for (size_t j = 0; j < x[i].size(); ++j) {
        auto loss = [&](double delta) {
          std::vector<std::vector<double>> xp = x;
          xp[i][j] += delta;
          const std::vector<double> yp = run_forward(c, xp, out_shape);
          double l = 0;
          for (size_t k = 0; k < yp.size(); ++k)
            if (std::isfinite(yp[k])) l += dy[k] * yp[k];  // causal's -inf entries are constants
          return l;
        };
        const double numeric = (loss(h) - loss(-h)) / (2 * h);
        const double analytic = din[i][j] - 0.5;
        EXPECT_NEAR(analytic, numeric, 1e-6 * (1 + std::abs(numeric))) << "operand " << i << ", entry " << j;
      }

    // The float adjoint equals the double one.
    std::vector<std::vector<float>> xf, dinf;
    for (const auto& v : x) xf.emplace_back(v.begin(), v.end());
    const std::vector<float> yf = run_forward(c, xf, out_shape);
    const std::vector<float> dyf(dy.begin(), dy.end());
    std::vector<float*> dinf_ptr;
    for (const auto& v : x) dinf.emplace_back(v.size(), 0.0f);
    for (auto& v : dinf) dinf_ptr.push_back(v.data());
    const auto af = args(c, xf);
    adjoint<float>(c.op, OpAttrs{c.ints}, af, out_shape, yf.data(), dyf.data(), dinf_ptr);
    for (size_t i = 0; i < x.size(); ++i)
      for (size_t j = 0; j < x[i].size(); ++j)
        EXPECT_NEAR(dinf[i][j], din[i][j] - 0.5, 1e-4 * (1 + std::abs(din[i][j]))) << "float, operand " << i;
  }
}

// The double forward is the operator the engines run: the float reference kernels agree with it.
TEST(Adjoints, DoubleForwardIsTheEnginesOperator) {
  std::mt19937_64 rng(11);
  std::vector<Case> all = cases();
  all.push_back({OpId::Zeros, {}, {2, 3}});
  all.push_back({OpId::Ones, {}, {2, 3}});
  all.push_back({OpId::Argmax, {{2, 3}}, {0}});
  all.push_back({OpId::Argmax, {{2, 3}}, {2}});  // rank 2
  for (const Case& c : all) {
    SCOPED_TRACE(describe(c));
    const ShapeResult shape = op_info(c.op).shape(c.shapes, OpAttrs{c.ints});
    ASSERT_TRUE(shape.error.empty()) << shape.error;
    std::uniform_real_distribution<double> value(c.positive ? 0.5 : -1.5, 1.5);
    std::vector<std::vector<double>> x;
    std::vector<Tensor> tensors;
    for (const auto& s : c.shapes) {
      Tensor t = Tensor::allocate(s);
      std::vector<double> v(static_cast<size_t>(t.size()));
      for (size_t j = 0; j < v.size(); ++j) t.data[j] = static_cast<float>(v[j] = value(rng));
      // Exactly representable in float, so both sides see the same input.
      for (size_t j = 0; j < v.size(); ++j) v[j] = t.data[j];
      x.push_back(v);
      tensors.push_back(std::move(t));
    }
    std::vector<const Tensor*> ptrs;
    for (const Tensor& t : tensors) ptrs.push_back(&t);
    Tensor out = Tensor::allocate(shape.type->shape);
    reference_kernel(c.op)(OpAttrs{c.ints}, ptrs, out);
    const std::vector<double> y = run_forward(c, x, shape.type->shape);
    for (size_t j = 0; j < y.size(); ++j) {
      if (std::isinf(y[j])) {
        EXPECT_EQ(out.data[j], y[j]) << j;
      } else {
        EXPECT_NEAR(out.data[j], y[j], 2e-5 * (1 + std::abs(y[j]))) << j;
      }
    }
  }
}

// The SIMD kernels the batched backward takes for some operators (unary_backward_kernel,
// kernels::softmax_backward, log_softmax_backward, layer_norm_backward) compute the adjoint
// above: added onto what dx holds, written, and written over dy itself; rows of every length
// against the SIMD width (a tail, one lane, several registers).
TEST(Adjoints, TheBackwardKernelsAreTheAdjoint) {
  std::mt19937_64 rng(13);
  std::uniform_real_distribution<double> value(-1.5, 1.5);
  for (int cols : {1, 7, 16, 17, 33, 512}) {
    const int rows = 3;
    for (OpId op : {OpId::Relu, OpId::Tanh, OpId::Sigmoid, OpId::Exp, OpId::Softmax, OpId::LogSoftmax, OpId::LayerNorm}) {
      // A row of one element has no variance: its dx is 0 up to rounding times 1 / sqrt(eps).
      if (op == OpId::LayerNorm && cols == 1) continue;
      Case c{op, {{rows, cols}}, {}};
      if (op == OpId::Softmax || op == OpId::LogSoftmax) c.ints = {-1};
      if (op == OpId::LayerNorm) c.shapes = {{rows, cols}, {1, cols}, {cols}};
      SCOPED_TRACE(describe(c));
      // Inputs exactly representable in float, so both sides see the same ones.
      std::vector<std::vector<double>> x;
      for (const auto& shape : c.shapes) {
        std::vector<double> v(static_cast<size_t>(num_elements(shape)));
        for (double& e : v) {
          e = static_cast<float>(value(rng));
          if (op == OpId::Relu && std::abs(e) < 0.05) e = 0.3;  // away from the kink
        }
        x.push_back(v);
      }
      const std::vector<int64_t> out_shape = c.shapes[0];
      const std::vector<double> y = run_forward(c, x, out_shape);
      std::vector<double> dy(y.size());
      for (double& e : dy) e = static_cast<float>(value(rng));
      std::vector<std::vector<double>> din;
      std::vector<double*> din_ptr;
      for (const auto& v : x) din.emplace_back(v.size(), 0.0);
      for (auto& v : din) din_ptr.push_back(v.data());
      adjoint<double>(op, OpAttrs{c.ints}, args(c, x), out_shape, y.data(), dy.data(), din_ptr);

      std::vector<std::vector<float>> xf;
      for (const auto& v : x) xf.emplace_back(v.begin(), v.end());
      const std::vector<float> yf = run_forward(c, xf, out_shape);
      const std::vector<float> dyf(dy.begin(), dy.end());
      const auto n = dyf.size();
      for (int mode = 0; mode < 3; ++mode) {  // added onto 0.5, written, written over dy
        SCOPED_TRACE(mode == 0 ? "added" : mode == 1 ? "written" : "over dy");
        std::vector<float> dx(n, mode == 0 ? 0.5f : -7.0f), dg(size_t(cols), 0.25f), db(size_t(cols), 0.25f);
        std::vector<float> g = dyf;
        float* out = mode == 2 ? g.data() : dx.data();
        const bool add = mode == 0;
        if (op == OpId::LayerNorm) {
          if (mode == 2) continue;  // written into fresh memory, not over dy
          kernels::layer_norm_backward(xf[0].data(), xf[1].data(), g.data(), kernels::kLayerNormEps, rows, cols, out,
                                       add, dg.data(), db.data());
        } else if (op == OpId::Softmax) {
          kernels::softmax_backward(yf.data(), g.data(), out, rows, cols, add);
        } else if (op == OpId::LogSoftmax) {
          kernels::log_softmax_backward(yf.data(), g.data(), out, rows, cols, add);
        } else {
          kernels::unary_backward(*unary_backward_kernel(op), xf[0].data(), yf.data(), g.data(), out, n, add);
        }
        for (size_t j = 0; j < n; ++j)
          EXPECT_NEAR(out[j] - (add ? 0.5f : 0.0f), din[0][j], 1e-5 * (1 + std::abs(din[0][j]))) << "dx " << j;
        if (op != OpId::LayerNorm) continue;
        for (int j = 0; j < cols; ++j) {
          EXPECT_NEAR(dg[size_t(j)] - 0.25f, din[1][size_t(j)], 1e-5 * (1 + std::abs(din[1][size_t(j)]))) << "dgamma " << j;
          EXPECT_NEAR(db[size_t(j)] - 0.25f, din[2][size_t(j)], 1e-5 * (1 + std::abs(din[2][size_t(j)]))) << "dbeta " << j;
        }
      }
    }
  }
  for (OpId op : {OpId::Neg, OpId::Log, OpId::Mul, OpId::LayerNorm}) EXPECT_FALSE(unary_backward_kernel(op)) << op_info(op).name;
}

// softmax_backward's scale (the adjoint of x in softmax(x * c), which the ragged backward computes
// in one pass): written, and over dy, the same bits as the adjoint written first and then
// multiplied by c; added, the same up to one rounding (the product and the sum may be one FMA); for
// rows of every length against the SIMD width.
TEST(Adjoints, SoftmaxBackwardScaledIsTheAdjointTimesTheScale) {
  std::mt19937_64 rng(17);
  std::uniform_real_distribution<float> value(-1.5f, 1.5f);
  for (int cols : {1, 7, 16, 17, 33, 512}) {
    const int rows = 3;
    const size_t n = size_t(rows) * cols;
    std::vector<float> x(n), y(n), dy(n);
    for (float& e : x) e = value(rng);
    for (float& e : dy) e = value(rng);
    kernels::softmax(x.data(), y.data(), rows, cols);
    for (float c : {0.125f, -3.0f}) {
      std::vector<float> want(n);
      kernels::softmax_backward(y.data(), dy.data(), want.data(), rows, cols, false);
      for (float& e : want) e *= c;
      std::vector<float> got(n, -7.0f), over = dy, added(n, 0.5f);
      kernels::softmax_backward(y.data(), dy.data(), got.data(), rows, cols, false, c);
      kernels::softmax_backward(y.data(), over.data(), over.data(), rows, cols, false, c);
      kernels::softmax_backward(y.data(), dy.data(), added.data(), rows, cols, true, c);
      for (size_t j = 0; j < n; ++j) {
        EXPECT_EQ(got[j], want[j]) << "cols " << cols << " scale " << c << " element " << j;
        EXPECT_EQ(over[j], want[j]) << "cols " << cols << " scale " << c << " element " << j;
        EXPECT_NEAR(added[j], 0.5f + want[j], 1e-7f) << "cols " << cols << " scale " << c << " element " << j;
      }
    }
  }
}

}  // namespace
}  // namespace acrobat
