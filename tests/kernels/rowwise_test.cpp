// Row-wise kernels against double-precision references: softmax, log_softmax (including inputs that
// overflow a naive exp) and layer_norm (including a large mean, which breaks a one-pass variance).
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include <gtest/gtest.h>

#include "acrobat/kernels.h"
#include "test_util.h"

namespace acrobat::kernels {
namespace {

using testing_util::random_floats;

constexpr float kInf = std::numeric_limits<float>::infinity();

std::vector<double> reference_log_softmax(const float* x, int cols) {
  const double max = *std::max_element(x, x + cols);
  double sum = 0;
  for (int i = 0; i < cols; ++i) sum += std::exp(x[i] - max);
  std::vector<double> out(cols);
  for (int i = 0; i < cols; ++i) out[i] = x[i] - max - std::log(sum);
  return out;
}

const int kColCounts[] = {1, 7, 16, 17, 33, 1000};

TEST(Rowwise, SoftmaxMatchesReferenceAndSumsToOne) {
  for (int cols : kColCounts) {
    const int rows = 5;
    auto x = random_floats(size_t(rows) * cols, -8, 8, unsigned(cols));
    x[0] = 1000.0f;  // would overflow exp without subtracting the max
    std::vector<float> y(x.size());
    softmax(x.data(), y.data(), rows, cols);
    for (int r = 0; r < rows; ++r) {
      const auto want = reference_log_softmax(x.data() + r * cols, cols);
      double sum = 0;
      for (int i = 0; i < cols; ++i) {
        const float got = y[size_t(r) * cols + i];
        sum += got;
        EXPECT_NEAR(got, std::exp(want[i]), 1e-6) << "cols=" << cols << " r=" << r << " i=" << i;
      }
      EXPECT_NEAR(sum, 1.0, 1e-5) << "cols=" << cols << " r=" << r;
    }
  }
}

TEST(Rowwise, SoftmaxInPlaceWithHugeAndInfiniteInputs) {
  std::vector<float> x = {3e38f, 3e38f, -kInf, 1.0f, -3e38f};
  softmax(x.data(), x.data(), 1, 5);
  const std::vector<float> want = {0.5f, 0.5f, 0.0f, 0.0f, 0.0f};
  EXPECT_EQ(x, want);
}

TEST(Rowwise, LogSoftmaxMatchesReference) {
  for (int cols : kColCounts) {
    const int rows = 4;
    auto x = random_floats(size_t(rows) * cols, -30, 30, unsigned(cols) + 1);
    x[size_t(rows - 1) * cols] = -500.0f;  // exp underflows to 0, log_softmax stays finite
    std::vector<float> y = x;
    log_softmax(y.data(), y.data(), rows, cols);
    for (int r = 0; r < rows; ++r) {
      const auto want = reference_log_softmax(x.data() + r * cols, cols);
      for (int i = 0; i < cols; ++i) {
        EXPECT_NEAR(y[size_t(r) * cols + i], want[i], 2e-6 * std::max(1.0, std::fabs(want[i])))
            << "cols=" << cols << " r=" << r << " i=" << i;
      }
    }
  }
}

TEST(Rowwise, LayerNormMatchesReference) {
  for (int cols : kColCounts) {
    for (float offset : {0.0f, 1e4f}) {  // a large mean relative to the spread
      const int rows = 3;
      auto x = random_floats(size_t(rows) * cols, -2, 2, unsigned(cols) + 2);
      for (float& v : x) v += offset;
      const auto gamma = random_floats(cols, 0.5f, 1.5f, 7);
      const auto beta = random_floats(cols, -1, 1, 8);
      const float eps = 1e-5f;
      std::vector<float> y(x.size());
      layer_norm(x.data(), gamma.data(), beta.data(), eps, y.data(), rows, cols);
      for (int r = 0; r < rows; ++r) {
        const float* xr = x.data() + size_t(r) * cols;
        double mean = 0, var = 0;
        for (int i = 0; i < cols; ++i) mean += xr[i];
        mean /= cols;
        for (int i = 0; i < cols; ++i) var += (xr[i] - mean) * (xr[i] - mean);
        var /= cols;
        const double rstd = 1.0 / std::sqrt(var + eps);
        for (int i = 0; i < cols; ++i) {
          const double want = (xr[i] - mean) * rstd * gamma[i] + beta[i];
          EXPECT_NEAR(y[size_t(r) * cols + i], want, 2e-6 * (1 + std::fabs(want)))
              << "cols=" << cols << " offset=" << offset << " r=" << r << " i=" << i;
        }
      }
    }
  }
}

TEST(Rowwise, LayerNormOfConstantRowIsBeta) {
  const int cols = 20;
  std::vector<float> x(cols, 3.25f);
  const std::vector<float> gamma(cols, 2.0f);
  const auto beta = random_floats(cols, -1, 1, 9);
  layer_norm(x.data(), gamma.data(), beta.data(), 1e-5f, x.data(), 1, cols);
  EXPECT_EQ(x, beta);
}

}  // namespace
}  // namespace acrobat::kernels
