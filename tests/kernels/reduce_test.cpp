// Reductions over each axis of a 3-d tensor against a double-precision reference, NaN propagation,
// and argmax's choice among ties.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include <gtest/gtest.h>

#include "acrobat/kernels.h"
#include "kernels/vec_math.h"
#include "test_util.h"

namespace acrobat::kernels {
namespace {

using testing_util::random_floats;

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

double reference_reduce(ReduceOp op, const std::vector<float>& x, int64_t o, int64_t len,
                        int64_t inner, int64_t j) {
  double acc = op == ReduceOp::Max ? -INFINITY : 0.0;
  for (int64_t l = 0; l < len; ++l) {
    const double v = x[(o * len + l) * inner + j];
    acc = op == ReduceOp::Max ? std::max(acc, v) : acc + v;
  }
  return op == ReduceOp::Mean ? acc / len : acc;
}

TEST(Reduce, EachAxisOfA3dTensor) {
  // x has shape [6, 35, 19]; reducing axis d views it as [prod(dims < d), dims[d], prod(dims > d)].
  const int64_t dims[3] = {6, 35, 19};
  const auto x = random_floats(6 * 35 * 19, -10, 0, 1);  // all negative: Max must not start at 0
  for (int axis = 0; axis < 3; ++axis) {
    int64_t outer = 1, inner = 1;
    for (int d = 0; d < axis; ++d) outer *= dims[d];
    for (int d = axis + 1; d < 3; ++d) inner *= dims[d];
    const int64_t len = dims[axis];
    for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Mean, ReduceOp::Max}) {
      std::vector<float> y(size_t(outer * inner));
      reduce(op, x.data(), y.data(), outer, len, inner);
      for (int64_t o = 0; o < outer; ++o) {
        for (int64_t j = 0; j < inner; ++j) {
          const double want = reference_reduce(op, x, o, len, inner, j);
          EXPECT_NEAR(y[o * inner + j], want, 1e-5 * (1 + std::fabs(want)))
              << "axis " << axis << " op " << int(op) << " at " << o << "," << j;
        }
      }
    }
  }
}

TEST(Reduce, LongContiguousRows) {
  const int64_t len = 1003;
  const auto x = random_floats(2 * len, -1, 1, 2);
  for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Mean, ReduceOp::Max}) {
    float y[2];
    reduce(op, x.data(), y, 2, len, 1);
    for (int o = 0; o < 2; ++o) {
      const double want = reference_reduce(op, x, o, len, 1, 0);
      EXPECT_NEAR(y[o], want, 1e-5 * (1 + std::fabs(want))) << int(op);
    }
  }
}

TEST(Reduce, MaxPropagatesNaN) {
  for (int64_t inner : {1, 3}) {
    for (int64_t pos : {0, 5, 40, 99}) {  // first lane, inside a vector, in the tail
      std::vector<float> x(100 * inner, 1.0f);
      x[pos * inner] = kNaN;
      std::vector<float> y(inner);
      reduce(ReduceOp::Max, x.data(), y.data(), 1, 100, inner);
      EXPECT_TRUE(std::isnan(y[0])) << "inner " << inner << " pos " << pos;
      for (int64_t j = 1; j < inner; ++j) EXPECT_EQ(y[j], 1.0f);
    }
  }
}

TEST(Argmax, FirstOfTies) {
  EXPECT_EQ(argmax(std::vector<float>{1, 3, 3, 2}.data(), 4), 1);
  EXPECT_EQ(argmax(std::vector<float>(50, 7.0f).data(), 50), 0);
  EXPECT_EQ(argmax(std::vector<float>(50, -kInf).data(), 50), 0);
  for (int64_t first : {0, 3, 15, 16, 31, 40}) {
    std::vector<float> x(45, -1.0f);
    x[first] = 5.0f;
    x[44] = 5.0f;  // a later tie, in the tail
    EXPECT_EQ(argmax(x.data(), 45), first);
  }
}

TEST(Argmax, MatchesLinearScanOnRandomData) {
  for (int64_t n : {1, 2, 17, 1000, 50257}) {
    const auto x = random_floats(size_t(n), -100, 100, unsigned(n));
    int64_t want = 0;
    for (int64_t i = 1; i < n; ++i) {
      if (x[i] > x[want]) want = i;
    }
    EXPECT_EQ(argmax(x.data(), n), want) << n;
  }
}

TEST(Argmax, NaNCountsAsTheMaximum) {
  std::vector<float> x(40, 0.0f);
  x[10] = kInf;
  x[25] = kNaN;
  x[33] = kNaN;
  EXPECT_EQ(argmax(x.data(), 40), 25);
}

// The generated code's scalar form and the library's vectorised one pick the same index, NaNs,
// infinities and ties included, at every length and position.
TEST(Argmax, ScalarAndVectorisedFormsAgree) {
  for (int64_t n : {1, 2, 15, 16, 17, 40, 100}) {
    for (int64_t at = 0; at < n; at += 3) {
      for (float special : {kNaN, kInf, -kInf, 0.0f}) {
        auto x = random_floats(size_t(n), -10, 10, unsigned(n * 131 + at));
        x[at] = special;
        if (n > 4) x[(at + n / 2) % n] = special;
        EXPECT_EQ(argmax_scalar(x.data(), n), argmax(x.data(), n)) << n << " " << at << " " << special;
      }
    }
  }
}

// ranked_argmax(x, n, r) is entry r of the order a stable sort gives (NaNs first, then the values from
// the largest, ties by position), with rank 0 argmax; values drawn from a few so that ties are common.
TEST(Argmax, RanksFollowAStableSortNaNsFirst) {
  for (int64_t n : {1, 2, 7, 33, 100}) {
    for (unsigned seed = 0; seed < 4; ++seed) {
      auto x = random_floats(size_t(n), 0, 5, seed * 977 + unsigned(n));
      for (float& v : x) v = std::floor(v);
      if (n > 3) x[size_t(n) / 3] = kNaN;
      if (n > 5) x[size_t(n) - 1] = kNaN;
      std::vector<int64_t> order(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i) order[size_t(i)] = i;
      std::stable_sort(order.begin(), order.end(), [&](int64_t i, int64_t j) {
        const bool nan_i = x[size_t(i)] != x[size_t(i)], nan_j = x[size_t(j)] != x[size_t(j)];
        return nan_i != nan_j ? nan_i : !nan_i && x[size_t(i)] > x[size_t(j)];
      });
      for (int64_t r = 0; r < n; ++r) EXPECT_EQ(ranked_argmax(x.data(), n, r), order[size_t(r)]) << n << " " << r;
      EXPECT_EQ(ranked_argmax(x.data(), n, 0), argmax(x.data(), n)) << n;
    }
  }
}

// sample draws index k with probability softmax(x)_k: over 200000 seeds each frequency is within
// five standard deviations of its probability; a NaN gives the first NaN, every weight zero the
// first index, and one seed always the same index.
TEST(Sample, DrawsFromTheSoftmaxDistribution) {
  const std::vector<float> x = {0.5f, -1.0f, 2.0f, 0.0f, -30.0f, 1.25f};
  double total = 0;
  std::vector<double> p;
  for (float v : x) total += std::exp(double(v));
  for (float v : x) p.push_back(std::exp(double(v)) / total);
  const int draws = 200000;
  std::vector<int> count(x.size());
  for (int s = 0; s < draws; ++s) ++count[static_cast<size_t>(sample_scalar(x.data(), 6, s))];
  for (size_t k = 0; k < x.size(); ++k) {
    const double sd = std::sqrt(p[k] * (1 - p[k]) / draws);
    EXPECT_NEAR(count[k] / double(draws), p[k], 5 * sd + 1e-9) << k;
  }
  EXPECT_EQ(sample_scalar(x.data(), 6, 42), sample_scalar(x.data(), 6, 42));
  const std::vector<float> nan = {1.0f, std::nanf(""), 3.0f};
  EXPECT_EQ(sample_scalar(nan.data(), 3, 7), 1);
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> none = {-inf, -inf};
  EXPECT_EQ(sample_scalar(none.data(), 2, 7), 0);
  const std::vector<float> sure = {-inf, 0.0f, -inf};
  for (int s = 0; s < 100; ++s) EXPECT_EQ(sample_scalar(sure.data(), 3, s), 1);
}

}  // namespace
}  // namespace acrobat::kernels
