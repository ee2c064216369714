// Elementwise kernels: the accuracy of the fast transcendental functions measured against libm in
// double precision over dense sweeps and special values, and binary ops with broadcasting against
// an index-by-index reference.
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <vector>

#include <gtest/gtest.h>

#include "acrobat/kernels.h"
#include "test_util.h"

namespace acrobat::kernels {
namespace {

using testing_util::random_floats;

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kMax = std::numeric_limits<float>::max();
constexpr float kMinNormal = std::numeric_limits<float>::min();
constexpr float kDenormMin = std::numeric_limits<float>::denorm_min();

// Inputs for the accuracy sweeps: every 2^-12 step of [-20, 20]; a stride through all float bit
// patterns, so every binade from subnormals to FLT_MAX is sampled (both signs); and special values.
std::vector<float> sweep_inputs() {
  std::vector<float> x;
  for (int i = -20 * 4096; i <= 20 * 4096; ++i) x.push_back(i / 4096.0f);
  for (uint64_t bits = 0; bits < 0x7f800000u; bits += 1021) {
    const float v = std::bit_cast<float>(static_cast<uint32_t>(bits));
    x.push_back(v);
    x.push_back(-v);
  }
  for (float v : {0.0f, kDenormMin, kMinNormal, 1e-30f, 1e-7f, 0.625f, 1.0f, 9.0f, 44.0f, 88.0f,
                  88.7228f, 89.0f, 103.9f, 104.0f, 1e30f, kMax, kInf}) {
    for (float s : {v, std::nextafter(v, 0.0f), std::nextafter(v, kInf)}) {
      x.push_back(s);
      x.push_back(-s);
    }
  }
  return x;
}

std::vector<float> evaluate(void (*f)(const float*, float*, size_t), const std::vector<float>& x) {
  std::vector<float> y(x.size());
  f(x.data(), y.data(), x.size());
  return y;
}

// The largest error of y against ref(x) over the sweep, and where it occurred.
struct MaxError {
  double error = 0;
  float at = 0;
  void update(double e, float x) {
    if (e > error) {
      error = e;
      at = x;
    }
  }
};

void report(const char* what, const MaxError& e) {
  std::printf("[ measured ] %s %.3g at x = %.9g\n", what, e.error, e.at);
  testing::Test::RecordProperty(what, std::to_string(e.error));
}

TEST(Elementwise, TanhMaxAbsError) {
  const auto x = sweep_inputs();
  const auto y = evaluate(kernels::tanh, x);
  MaxError max;
  for (size_t i = 0; i < x.size(); ++i) {
    ASSERT_FALSE(std::isnan(y[i])) << "tanh(" << x[i] << ")";
    max.update(std::fabs(y[i] - std::tanh(double(x[i]))), x[i]);
  }
  report("tanh max abs error", max);
  EXPECT_LE(max.error, kTanhMaxAbsError);
}

TEST(Elementwise, SigmoidMaxAbsError) {
  const auto x = sweep_inputs();
  const auto y = evaluate(kernels::sigmoid, x);
  MaxError max;
  for (size_t i = 0; i < x.size(); ++i) {
    ASSERT_FALSE(std::isnan(y[i])) << "sigmoid(" << x[i] << ")";
    max.update(std::fabs(y[i] - 1.0 / (1.0 + std::exp(-double(x[i])))), x[i]);
  }
  report("sigmoid max abs error", max);
  EXPECT_LE(max.error, kSigmoidMaxAbsError);
}

TEST(Elementwise, ExpMaxRelError) {
  const auto x = sweep_inputs();
  const auto y = evaluate(kernels::exp, x);
  MaxError max;
  for (size_t i = 0; i < x.size(); ++i) {
    const double want = std::exp(double(x[i]));
    if (std::isinf(float(want))) {
      EXPECT_EQ(y[i], kInf) << "exp(" << x[i] << ") must overflow";
    } else if (want < kMinNormal) {
      // Subnormal results carry fewer bits; they must be right to the last one.
      EXPECT_LE(std::fabs(y[i] - want), kDenormMin) << "exp(" << x[i] << ")";
    } else {
      max.update(std::fabs(y[i] - want) / want, x[i]);
    }
  }
  report("exp max rel error", max);
  EXPECT_LE(max.error, kExpMaxRelError);
}

TEST(Elementwise, LogMaxRelError) {
  std::vector<float> x;
  for (float v : sweep_inputs()) {
    if (v > 0 && v < kInf) x.push_back(v);
  }
  const auto y = evaluate(kernels::log, x);
  MaxError max;
  for (size_t i = 0; i < x.size(); ++i) {
    const double want = std::log(double(x[i]));
    if (want == 0) {
      EXPECT_EQ(y[i], 0.0f);
    } else {
      max.update(std::fabs(y[i] - want) / std::fabs(want), x[i]);
    }
  }
  report("log max rel error", max);
  EXPECT_LE(max.error, kLogMaxRelError);
}

TEST(Elementwise, SpecialValues) {
  const std::vector<float> x = {kInf, -kInf, 1e30f, -1e30f, kMax, -kMax, 0.0f, -0.0f, kNaN};
  const auto t = evaluate(kernels::tanh, x);
  const auto s = evaluate(kernels::sigmoid, x);
  const auto e = evaluate(kernels::exp, x);
  const std::vector<float> tanh_want = {1, -1, 1, -1, 1, -1, 0, -0.0f};
  const std::vector<float> sigmoid_want = {1, 0, 1, 0, 1, 0, 0.5f, 0.5f};
  const std::vector<float> exp_want = {kInf, 0, kInf, 0, kInf, 0, 1, 1};
  for (size_t i = 0; i + 1 < x.size(); ++i) {
    EXPECT_EQ(t[i], tanh_want[i]) << "tanh(" << x[i] << ")";
    EXPECT_EQ(std::signbit(t[i]), std::signbit(tanh_want[i])) << "tanh(" << x[i] << ")";
    EXPECT_EQ(s[i], sigmoid_want[i]) << "sigmoid(" << x[i] << ")";
    EXPECT_EQ(e[i], exp_want[i]) << "exp(" << x[i] << ")";
  }
  EXPECT_TRUE(std::isnan(t.back()));
  EXPECT_TRUE(std::isnan(s.back()));
  EXPECT_TRUE(std::isnan(e.back()));

  const std::vector<float> lx = {0.0f, -0.0f, -1.0f, -kInf, kInf, 1.0f, kDenormMin, kNaN};
  const auto l = evaluate(kernels::log, lx);
  EXPECT_EQ(l[0], -kInf);
  EXPECT_EQ(l[1], -kInf);
  EXPECT_TRUE(std::isnan(l[2]));
  EXPECT_TRUE(std::isnan(l[3]));
  EXPECT_EQ(l[4], kInf);
  EXPECT_EQ(l[5], 0.0f);
  EXPECT_NEAR(l[6], std::log(double(kDenormMin)), 1e-5);
  EXPECT_TRUE(std::isnan(l[7]));
}

TEST(Elementwise, TanhIsOddAndExactForTinyInputs) {
  for (float v : {1e-30f, 1e-10f, 1e-5f, 0.3f, 0.624f, 0.626f, 2.0f, 9.5f}) {
    float y[2];
    const float in[2] = {v, -v};
    kernels::tanh(in, y, 2);
    EXPECT_EQ(y[1], -y[0]) << v;
    if (v < 1e-5f) {
      EXPECT_EQ(y[0], v);
    }
  }
}

TEST(Elementwise, ResultDoesNotDependOnPositionAndMayAlias) {
  // Lengths around the vector width exercise the tail; results must match element-wise calls.
  for (size_t n : {1, 7, 15, 16, 17, 33, 100}) {
    const auto x = random_floats(n, -5, 5, unsigned(n));
    for (auto f : {kernels::tanh, kernels::sigmoid, kernels::exp, kernels::relu, kernels::neg}) {
      std::vector<float> y = x;
      f(y.data(), y.data(), n);
      for (size_t i = 0; i < n; ++i) {
        float one;
        f(&x[i], &one, 1);
        ASSERT_EQ(y[i], one) << "n=" << n << " i=" << i;
      }
    }
  }
}

TEST(Elementwise, ReluAndNeg) {
  const std::vector<float> x = {-2.0f, -0.0f, 0.0f, 3.5f, -kInf, kInf, kNaN};
  const auto r = evaluate(kernels::relu, x);
  const auto n = evaluate(kernels::neg, x);
  const std::vector<float> relu_want = {0, 0, 0, 3.5f, 0, kInf};
  const std::vector<float> neg_want = {2.0f, 0.0f, -0.0f, -3.5f, kInf, -kInf};
  for (size_t i = 0; i + 1 < x.size(); ++i) {
    EXPECT_EQ(r[i], relu_want[i]) << x[i];
    EXPECT_EQ(n[i], neg_want[i]) << x[i];
    EXPECT_EQ(std::signbit(n[i]), std::signbit(neg_want[i])) << x[i];
  }
  EXPECT_TRUE(std::isnan(r.back()));
  EXPECT_TRUE(std::isnan(n.back()));
}

float reference_op(BinaryOp op, float a, float b) {
  switch (op) {
    case BinaryOp::Add: return a + b;
    case BinaryOp::Sub: return a - b;
    case BinaryOp::Mul: return a * b;
    case BinaryOp::Div: return a / b;
  }
  return kNaN;
}

constexpr BinaryOp kAllOps[] = {BinaryOp::Add, BinaryOp::Sub, BinaryOp::Mul, BinaryOp::Div};

TEST(Elementwise, BinaryContiguous) {
  const size_t n = 1007;
  const auto a = random_floats(n, -3, 3, 1);
  const auto b = random_floats(n, 0.5f, 3, 2);
  for (BinaryOp op : kAllOps) {
    std::vector<float> y(n);
    binary(op, a.data(), b.data(), y.data(), n);
    for (size_t i = 0; i < n; ++i) ASSERT_EQ(y[i], reference_op(op, a[i], b[i])) << i;
  }
}

// binary_broadcast against a reference that computes every output element's operand offsets from
// its multi-index directly.
struct BroadcastCase {
  const char* name;
  std::vector<int64_t> dims, a_strides, b_strides;
};

int64_t extent(const std::vector<int64_t>& dims, const std::vector<int64_t>& strides) {
  int64_t last = 0;  // largest offset reached
  for (size_t d = 0; d < dims.size(); ++d) {
    if (dims[d] == 0) return 0;
    last += (dims[d] - 1) * strides[d];
  }
  return last + 1;
}

TEST(Elementwise, BinaryBroadcast) {
  const std::vector<BroadcastCase> cases = {
      {"contiguous", {2, 3, 4}, {12, 4, 1}, {12, 4, 1}},
      {"bias row", {64, 768}, {768, 1}, {0, 1}},
      {"per-row scalar", {4, 5}, {5, 1}, {1, 0}},
      {"scalar left", {4, 5}, {0, 0}, {5, 1}},
      {"outer product", {3, 4, 5}, {5, 0, 1}, {0, 1, 0}},
      {"transposed operand", {4, 5}, {1, 4}, {5, 1}},
      {"unit dims with odd strides", {3, 1, 6, 1}, {6, 99, 1, 7}, {0, 5, 1, 3}},
      {"strided inner", {3, 7}, {14, 2}, {0, 3}},
      {"rank 1", {37}, {1}, {0}},
      {"empty", {3, 0, 2}, {0, 2, 1}, {0, 2, 1}},
  };
  for (const BroadcastCase& c : cases) {
    const int rank = static_cast<int>(c.dims.size());
    const auto a = random_floats(size_t(extent(c.dims, c.a_strides)), -3, 3, 3);
    const auto b = random_floats(size_t(extent(c.dims, c.b_strides)), 0.5f, 3, 4);
    int64_t total = 1;
    for (int64_t d : c.dims) total *= d;
    for (BinaryOp op : kAllOps) {
      std::vector<float> y(size_t(total) + 1, kNaN);
      y.back() = 42.0f;  // must stay: the output has exactly `total` elements
      binary_broadcast(op, rank, c.dims.data(), a.data(), c.a_strides.data(), b.data(),
                       c.b_strides.data(), y.data());
      for (int64_t flat = 0; flat < total; ++flat) {
        int64_t rest = flat, a_off = 0, b_off = 0;
        for (int d = rank - 1; d >= 0; --d) {
          const int64_t i = rest % c.dims[d];
          rest /= c.dims[d];
          a_off += i * c.a_strides[d];
          b_off += i * c.b_strides[d];
        }
        ASSERT_EQ(y[flat], reference_op(op, a[a_off], b[b_off])) << c.name << " at " << flat;
      }
      EXPECT_EQ(y.back(), 42.0f) << c.name;
    }
  }
}

TEST(Elementwise, BinaryBroadcastRankZero) {
  const float a = 6.0f, b = 4.0f;
  float y = 0;
  binary_broadcast(BinaryOp::Div, 0, nullptr, &a, nullptr, &b, nullptr, &y);
  EXPECT_EQ(y, 1.5f);
}

}  // namespace
}  // namespace acrobat::kernels
