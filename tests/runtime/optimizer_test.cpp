// The optimisers' steps (engines/train.h) against the element kernels applied to every element.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "acrobat/kernels.h"
#include "engines/train.h"

namespace acrobat {
namespace {

// One param of n elements, uniform in [-1, 1].
ParamStore one_param(int64_t n, unsigned seed) {
  ParamStore s;
  ParamValue p;
  p.tensor = Tensor::allocate({n});
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1, 1);
  for (int64_t i = 0; i < n; ++i) p.tensor.data[i] = u(rng);
  s.params.push_back(std::move(p));
  return s;
}

bool same_bits(const float* a, const float* b, int64_t n) { return std::memcmp(a, b, size_t(n) * sizeof(float)) == 0; }

// Steps where most of the gradient is zero, like an embedding's rows no instance of the batch used:
// the optimiser, which skips chunks whose state and gradient are zero, must leave the same bits as
// the element kernel run over every element with PyTorch's definitions.
// `with_written`: the steps are told which chunks the gradient was written in (GradResult::written)
// instead of reading them.
void check_sparse_steps(const OptimizerOptions& o, bool with_written = false) {
  const int64_t n = 3000;  // not a whole number of chunks
  ParamStore params = one_param(n, 1);
  std::vector<float> p(params.params[0].tensor.data.get(), params.params[0].tensor.data.get() + n);
  std::vector<float> m(size_t(n), 0.0f), v(size_t(n), 0.0f), g(size_t(n), 0.0f);
  Optimizer opt(o, params);
  std::vector<Tensor> grads{Tensor::allocate({n})};
  std::fill_n(grads[0].data.get(), n, 0.0f);
  // Step t touches a few elements; later steps leave earlier ones at zero gradient (their state
  // still moves), and the elements at 2000.. are never touched.
  const std::vector<std::vector<int64_t>> touched = {{3, 255, 256}, {700, 2999}, {}, {1, 1500}};
  for (size_t t = 0; t < touched.size(); ++t) {
    std::fill(g.begin(), g.end(), 0.0f);
    for (int64_t i : touched[t]) g[size_t(i)] = grads[0].data[i] = 0.25f * float(i % 7) - 0.5f + 0.01f * float(t);
    const float scale = 0.5f;
    WrittenChunks written(1, std::vector<uint8_t>(size_t((n + kGradChunk - 1) / kGradChunk), 0));
    for (int64_t i : touched[t]) written[0][size_t(i / kGradChunk)] = 1;
    opt.step(params, grads, scale, with_written ? &written : nullptr);
    const double step = double(t + 1);
    if (o.kind == "adam") {
      const kernels::AdamStep s{scale,
                                float(o.weight_decay),
                                float(o.beta1),
                                float(o.beta2),
                                float(o.eps),
                                float(o.lr / (1 - std::pow(o.beta1, step))),
                                float(std::sqrt(1 - std::pow(o.beta2, step)))};
      kernels::adam_update(s, p.data(), g.data(), m.data(), v.data(), size_t(n));
    } else {
      const kernels::SgdStep s{scale, float(o.weight_decay), float(o.lr), float(o.momentum), t == 0};
      kernels::sgd_update(s, p.data(), g.data(), m.data(), size_t(n));
    }
    ASSERT_TRUE(same_bits(params.params[0].tensor.data.get(), p.data(), n)) << o.kind << " step " << t + 1;
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(grads[0].data[i], 0.0f) << "the gradient is left zero";
  }
  // The untouched elements kept their values exactly (with weight decay they moved too); the
  // touched ones moved.
  const ParamStore initial = one_param(n, 1);
  EXPECT_EQ(same_bits(params.params[0].tensor.data.get() + 2000, initial.params[0].tensor.data.get() + 2000, 999),
            o.weight_decay == 0);
  EXPECT_NE(params.params[0].tensor.data[700], initial.params[0].tensor.data[700]);
  EXPECT_NE(params.params[0].tensor.data[2999], initial.params[0].tensor.data[2999]);
}

TEST(Optimizer, AdamOnASparseGradientEqualsTheFullUpdate) {
  OptimizerOptions o;
  o.kind = "adam";
  o.lr = 0.01;
  check_sparse_steps(o);
}

TEST(Optimizer, AdamToldWhereTheGradientWasWrittenEqualsTheFullUpdate) {
  OptimizerOptions o;
  o.kind = "adam";
  o.lr = 0.01;
  check_sparse_steps(o, true);
}

TEST(Optimizer, AdamWithWeightDecayEqualsTheFullUpdate) {
  OptimizerOptions o;
  o.kind = "adam";
  o.lr = 0.01;
  o.weight_decay = 0.1;  // every element moves: nothing may be skipped
  check_sparse_steps(o);
}

TEST(Optimizer, SgdWithMomentumOnASparseGradientEqualsTheFullUpdate) {
  OptimizerOptions o;
  o.kind = "sgd";
  o.lr = 0.1;
  o.momentum = 0.9;
  check_sparse_steps(o);
}

TEST(Optimizer, AllZeroSeesEveryElement) {
  std::vector<float> x(1000, 0.0f);
  x[3] = -0.0f;
  EXPECT_TRUE(kernels::all_zero(x.data(), x.size()));
  for (size_t i : {size_t(0), size_t(255), size_t(256), size_t(999)}) {
    std::vector<float> y = x;
    y[i] = 1e-40f;  // a denormal is not zero
    EXPECT_FALSE(kernels::all_zero(y.data(), y.size())) << i;
    EXPECT_TRUE(kernels::all_zero(y.data(), i)) << i;
  }
}

}  // namespace
}  // namespace acrobat
