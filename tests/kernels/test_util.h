// Helpers shared by the kernel tests: seeded random inputs.
#pragma once

#include <cstddef>
#include <random>
#include <vector>

namespace acrobat::kernels::testing_util {

inline std::vector<float> random_floats(size_t n, float lo, float hi, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

}  // namespace acrobat::kernels::testing_util
