// One SIMD register of floats behind a small fixed set of operations, chosen at compile time
// (AVX-512, AVX2+FMA, or scalar), so that the kernels' math is written once for every target.
#pragma once

#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>

#if defined(__AVX512F__) || (defined(__AVX2__) && defined(__FMA__))
// GCC 12's AVX-512 headers trip -W(maybe-)uninitialized on their own _mm512_undefined_* helpers
// (GCC bug 105593, fixed in 12.3 and 13).
#pragma GCC diagnostic push
#if !defined(__clang__)  // clang has no -Wmaybe-uninitialized (and warns of the unknown name)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop
#endif

namespace acrobat::kernels::simd {

// min/max follow the x86 rule on NaN: when either operand is NaN the second one is returned.
// Kernels rely on it to keep or drop NaN deliberately, so the scalar fallback does the same.

#if defined(__AVX512F__)

inline constexpr int kLanes = 16;
struct Vec {
  __m512 v;
};
struct Mask {
  __mmask16 m;
};

inline Vec load(const float* p) { return {_mm512_loadu_ps(p)}; }
inline void store(float* p, Vec a) { _mm512_storeu_ps(p, a.v); }
inline Vec splat(float x) { return {_mm512_set1_ps(x)}; }

inline Vec operator+(Vec a, Vec b) { return {_mm512_add_ps(a.v, b.v)}; }
inline Vec operator-(Vec a, Vec b) { return {_mm512_sub_ps(a.v, b.v)}; }
inline Vec operator*(Vec a, Vec b) { return {_mm512_mul_ps(a.v, b.v)}; }
inline Vec operator/(Vec a, Vec b) { return {_mm512_div_ps(a.v, b.v)}; }
inline Vec operator-(Vec a) {
  return {_mm512_castsi512_ps(
      _mm512_xor_si512(_mm512_castps_si512(a.v), _mm512_set1_epi32(INT32_MIN)))};
}
inline Vec fmadd(Vec a, Vec b, Vec c) { return {_mm512_fmadd_ps(a.v, b.v, c.v)}; }
inline Vec min(Vec a, Vec b) { return {_mm512_min_ps(a.v, b.v)}; }
inline Vec max(Vec a, Vec b) { return {_mm512_max_ps(a.v, b.v)}; }
inline Vec abs(Vec a) { return {_mm512_abs_ps(a.v)}; }
inline Vec sqrt(Vec a) { return {_mm512_sqrt_ps(a.v)}; }
// |magnitude| with the sign of `sign`.
inline Vec copysign(Vec magnitude, Vec sign) {
  const __m512i sign_bit = _mm512_set1_epi32(INT32_MIN);
  return {_mm512_castsi512_ps(
      _mm512_or_si512(_mm512_andnot_si512(sign_bit, _mm512_castps_si512(magnitude.v)),
                      _mm512_and_si512(sign_bit, _mm512_castps_si512(sign.v))))};
}
// Nearest integer, ties to even.
inline Vec round(Vec a) {
  return {_mm512_roundscale_ps(a.v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)};
}
// a * 2^n for integral n, rounded once; overflows to inf and underflows through subnormals to 0.
inline Vec ldexp(Vec a, Vec n) { return {_mm512_scalef_ps(a.v, n.v)}; }
// For finite x > 0 (subnormals included): returns m in [0.5, 1) and sets e so that x = m * 2^e.
inline Vec frexp(Vec x, Vec& e) {
  e = {_mm512_add_ps(_mm512_getexp_ps(x.v), _mm512_set1_ps(1.0f))};
  return {_mm512_getmant_ps(x.v, _MM_MANT_NORM_p5_1, _MM_MANT_SIGN_zero)};
}

inline Mask operator<(Vec a, Vec b) { return {_mm512_cmp_ps_mask(a.v, b.v, _CMP_LT_OQ)}; }
inline Mask operator>(Vec a, Vec b) { return {_mm512_cmp_ps_mask(a.v, b.v, _CMP_GT_OQ)}; }
inline Mask operator==(Vec a, Vec b) { return {_mm512_cmp_ps_mask(a.v, b.v, _CMP_EQ_OQ)}; }
inline Mask is_nan(Vec a) { return {_mm512_cmp_ps_mask(a.v, a.v, _CMP_UNORD_Q)}; }
inline Mask operator|(Mask a, Mask b) { return {static_cast<__mmask16>(a.m | b.m)}; }
// Lane-wise m ? a : b.
inline Vec select(Mask m, Vec a, Vec b) { return {_mm512_mask_blend_ps(m.m, b.v, a.v)}; }
inline bool any(Mask m) { return m.m != 0; }
// Index of the lowest set lane; m must have one.
inline int first_set(Mask m) { return std::countr_zero(static_cast<unsigned>(m.m)); }

inline float reduce_add(Vec a) { return _mm512_reduce_add_ps(a.v); }
inline float reduce_max(Vec a) { return _mm512_reduce_max_ps(a.v); }

#elif defined(__AVX2__) && defined(__FMA__)

inline constexpr int kLanes = 8;
struct Vec {
  __m256 v;
};
struct Mask {
  __m256 m;
};

inline Vec load(const float* p) { return {_mm256_loadu_ps(p)}; }
inline void store(float* p, Vec a) { _mm256_storeu_ps(p, a.v); }
inline Vec splat(float x) { return {_mm256_set1_ps(x)}; }

inline Vec operator+(Vec a, Vec b) { return {_mm256_add_ps(a.v, b.v)}; }
inline Vec operator-(Vec a, Vec b) { return {_mm256_sub_ps(a.v, b.v)}; }
inline Vec operator*(Vec a, Vec b) { return {_mm256_mul_ps(a.v, b.v)}; }
inline Vec operator/(Vec a, Vec b) { return {_mm256_div_ps(a.v, b.v)}; }
inline Vec operator-(Vec a) { return {_mm256_xor_ps(a.v, _mm256_set1_ps(-0.0f))}; }
inline Vec fmadd(Vec a, Vec b, Vec c) { return {_mm256_fmadd_ps(a.v, b.v, c.v)}; }
inline Vec min(Vec a, Vec b) { return {_mm256_min_ps(a.v, b.v)}; }
inline Vec max(Vec a, Vec b) { return {_mm256_max_ps(a.v, b.v)}; }
inline Vec abs(Vec a) { return {_mm256_andnot_ps(_mm256_set1_ps(-0.0f), a.v)}; }
inline Vec sqrt(Vec a) { return {_mm256_sqrt_ps(a.v)}; }
inline Vec copysign(Vec magnitude, Vec sign) {
  const __m256 sign_bit = _mm256_set1_ps(-0.0f);
  return {_mm256_or_ps(_mm256_andnot_ps(sign_bit, magnitude.v), _mm256_and_ps(sign_bit, sign.v))};
}
inline Vec round(Vec a) {
  return {_mm256_round_ps(a.v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)};
}
// Without scalef, 2^n is built in the exponent field. Splitting it into two factors keeps each a
// normal float, so the product still rounds once into the subnormal range; needs |n| <= 252.
inline Vec ldexp(Vec a, Vec n) {
  const __m256i ni = _mm256_cvtps_epi32(n.v);
  const __m256i n1 = _mm256_srai_epi32(ni, 1);
  const __m256i n2 = _mm256_sub_epi32(ni, n1);
  const __m256i bias = _mm256_set1_epi32(127);
  const __m256 p1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n1, bias), 23));
  const __m256 p2 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n2, bias), 23));
  return {_mm256_mul_ps(_mm256_mul_ps(a.v, p1), p2)};
}
inline Vec frexp(Vec x, Vec& e) {
  // Subnormals have no implicit leading bit; scaling them into the normal range first makes the
  // exponent field meaningful.
  const __m256 subnormal =
      _mm256_cmp_ps(x.v, _mm256_set1_ps(std::numeric_limits<float>::min()), _CMP_LT_OQ);
  const __m256 scaled =
      _mm256_blendv_ps(x.v, _mm256_mul_ps(x.v, _mm256_set1_ps(0x1p25f)), subnormal);
  const __m256i bits = _mm256_castps_si256(scaled);
  const __m256i biased = _mm256_srli_epi32(bits, 23);
  e = {_mm256_sub_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(biased, _mm256_set1_epi32(126))),
                     _mm256_and_ps(subnormal, _mm256_set1_ps(25.0f)))};
  const __m256i mantissa = _mm256_or_si256(_mm256_and_si256(bits, _mm256_set1_epi32(0x007fffff)),
                                           _mm256_set1_epi32(0x3f000000));
  return {_mm256_castsi256_ps(mantissa)};
}

inline Mask operator<(Vec a, Vec b) { return {_mm256_cmp_ps(a.v, b.v, _CMP_LT_OQ)}; }
inline Mask operator>(Vec a, Vec b) { return {_mm256_cmp_ps(a.v, b.v, _CMP_GT_OQ)}; }
inline Mask operator==(Vec a, Vec b) { return {_mm256_cmp_ps(a.v, b.v, _CMP_EQ_OQ)}; }
inline Mask is_nan(Vec a) { return {_mm256_cmp_ps(a.v, a.v, _CMP_UNORD_Q)}; }
inline Mask operator|(Mask a, Mask b) { return {_mm256_or_ps(a.m, b.m)}; }
inline Vec select(Mask m, Vec a, Vec b) { return {_mm256_blendv_ps(b.v, a.v, m.m)}; }
inline bool any(Mask m) { return _mm256_movemask_ps(m.m) != 0; }
inline int first_set(Mask m) {
  return std::countr_zero(static_cast<unsigned>(_mm256_movemask_ps(m.m)));
}

inline float reduce_add(Vec a) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(a.v), _mm256_extractf128_ps(a.v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}
inline float reduce_max(Vec a) {
  __m128 s = _mm_max_ps(_mm256_castps256_ps128(a.v), _mm256_extractf128_ps(a.v, 1));
  s = _mm_max_ps(s, _mm_movehl_ps(s, s));
  s = _mm_max_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

#else

inline constexpr int kLanes = 1;
struct Vec {
  float v;
};
struct Mask {
  bool m;
};

inline Vec load(const float* p) { return {*p}; }
inline void store(float* p, Vec a) { *p = a.v; }
inline Vec splat(float x) { return {x}; }

inline Vec operator+(Vec a, Vec b) { return {a.v + b.v}; }
inline Vec operator-(Vec a, Vec b) { return {a.v - b.v}; }
inline Vec operator*(Vec a, Vec b) { return {a.v * b.v}; }
inline Vec operator/(Vec a, Vec b) { return {a.v / b.v}; }
inline Vec operator-(Vec a) { return {-a.v}; }
// Without hardware FMA std::fma is a slow exact emulation; the approximations don't need the single
// rounding, so a separate multiply and add is used instead.
inline Vec fmadd(Vec a, Vec b, Vec c) {
#ifdef FP_FAST_FMAF
  return {std::fma(a.v, b.v, c.v)};
#else
  return {a.v * b.v + c.v};
#endif
}
inline Vec min(Vec a, Vec b) { return {a.v < b.v ? a.v : b.v}; }
inline Vec max(Vec a, Vec b) { return {a.v > b.v ? a.v : b.v}; }
inline Vec abs(Vec a) { return {std::fabs(a.v)}; }
inline Vec sqrt(Vec a) { return {std::sqrt(a.v)}; }
inline Vec copysign(Vec magnitude, Vec sign) { return {std::copysign(magnitude.v, sign.v)}; }
inline Vec round(Vec a) { return {std::nearbyint(a.v)}; }
inline Vec ldexp(Vec a, Vec n) { return {std::ldexp(a.v, static_cast<int>(n.v))}; }
inline Vec frexp(Vec x, Vec& e) {
  int exponent = 0;
  const float m = std::frexp(x.v, &exponent);
  e = {static_cast<float>(exponent)};
  return {m};
}

inline Mask operator<(Vec a, Vec b) { return {a.v < b.v}; }
inline Mask operator>(Vec a, Vec b) { return {a.v > b.v}; }
inline Mask operator==(Vec a, Vec b) { return {a.v == b.v}; }
inline Mask is_nan(Vec a) { return {std::isnan(a.v)}; }
inline Mask operator|(Mask a, Mask b) { return {a.m || b.m}; }
inline Vec select(Mask m, Vec a, Vec b) { return m.m ? a : b; }
inline bool any(Mask m) { return m.m; }
inline int first_set(Mask) { return 0; }

inline float reduce_add(Vec a) { return a.v; }
inline float reduce_max(Vec a) { return a.v; }

#endif

// Returns max(a, b), or NaN when either is NaN (plain max drops a NaN in `a`).
inline Vec max_propagate_nan(Vec a, Vec b) { return select(is_nan(a), a, max(a, b)); }

// Applies f to x[0, n) into y (which may alias x), a register at a time. The tail goes through a
// padded buffer so every element sees exactly the same code and so the same result.
template <class F>
inline void map(const float* x, float* y, size_t n, F f) {
  size_t i = 0;
  for (; i + kLanes <= n; i += kLanes) store(y + i, f(load(x + i)));
  if (i < n) {
    float buf[kLanes] = {};
    for (size_t j = i; j < n; ++j) buf[j - i] = x[j];
    store(buf, f(load(buf)));
    for (size_t j = i; j < n; ++j) y[j] = buf[j - i];
  }
}

}  // namespace acrobat::kernels::simd
