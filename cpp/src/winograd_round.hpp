// Rounding of Winograd values to the targets (docs/nvdla.md §9.5): to the integer targets v * scale
// rounded by the chosen mode and saturated, with the same operations on every path; to binary16
// with F16C, correctly rounded.
#pragma once
#include <cstdint>
#include <cstring>

#include "npupack/winograd.hpp"

#if defined(__SSE2__)
#include <emmintrin.h>
#define NPUPACK_WG_SSE2 1
#endif
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace npupack {
namespace wg {

// Integer rounding of n values (v * scale) without libm calls or branches: clamped to
// [lo - 1, hi + 1] first, so the int32 conversions are exact; adding and subtracting 1.5 * 2^52
// rounds to nearest even in the default rounding mode (built without -ffast-math, so the
// compiler keeps both operations).
constexpr double kMagic = 6755399441055744.0;

template <IntRounding M>
inline int32_t round_one(double v, double scale, double lo, double hi) {
  v *= scale;
  v = v < lo - 1.0 ? lo - 1.0 : v;
  v = v > hi + 1.0 ? hi + 1.0 : v;
  int32_t r;
  if constexpr (M == IntRounding::NearestEven) {
    r = static_cast<int32_t>((v + kMagic) - kMagic);
  } else if constexpr (M == IntRounding::NearestAway) {
    r = static_cast<int32_t>(v);
    const double d = v - r;
    r += (d >= 0.5) - (d <= -0.5);
  } else {
    r = static_cast<int32_t>(v);
  }
  r = r < lo ? static_cast<int32_t>(lo) : r;
  return r > hi ? static_cast<int32_t>(hi) : r;
}

#ifdef NPUPACK_WG_SSE2
// Two values at a time with SSE2 (baseline on x86-64): the same operations as round_one.
template <IntRounding M>
inline __m128i round_two(__m128d v, __m128d scale, __m128d lo1, __m128d hi1) {
  v = _mm_min_pd(_mm_max_pd(_mm_mul_pd(v, scale), lo1), hi1);
  if constexpr (M == IntRounding::NearestEven) {
    const __m128d magic = _mm_set1_pd(kMagic);
    return _mm_cvttpd_epi32(_mm_sub_pd(_mm_add_pd(v, magic), magic));
  } else if constexpr (M == IntRounding::NearestAway) {
    const __m128i r = _mm_cvttpd_epi32(v);
    const __m128d d = _mm_sub_pd(v, _mm_cvtepi32_pd(r));
    const __m128i up = _mm_shuffle_epi32(_mm_castpd_si128(_mm_cmpge_pd(d, _mm_set1_pd(0.5))), 0x08);
    const __m128i down = _mm_shuffle_epi32(_mm_castpd_si128(_mm_cmple_pd(d, _mm_set1_pd(-0.5))), 0x08);
    return _mm_add_epi32(_mm_sub_epi32(r, up), down);
  } else {
    return _mm_cvttpd_epi32(v);
  }
}

// 64 values -> int8 or int16 (saturating packs; values are already within lo - 1 .. hi + 1).
template <IntRounding M, class Q>
inline void round_cube(const double* t, double scale, Q* out) {
  constexpr bool kInt8 = sizeof(Q) == 1;
  const __m128d s = _mm_set1_pd(scale);
  const __m128d lo1 = _mm_set1_pd(kInt8 ? -129.0 : -32769.0), hi1 = _mm_set1_pd(kInt8 ? 128.0 : 32768.0);
  for (int i = 0; i < 64; i += 8) {
    __m128i q[4];
    for (int j = 0; j < 4; ++j) q[j] = round_two<M>(_mm_loadu_pd(t + i + 2 * j), s, lo1, hi1);
    const __m128i a = _mm_unpacklo_epi64(q[0], q[1]), b = _mm_unpacklo_epi64(q[2], q[3]);
    const __m128i w = _mm_packs_epi32(a, b);  // 8 x int16, saturated
    if constexpr (kInt8) {
      _mm_storel_epi64(reinterpret_cast<__m128i*>(out + i), _mm_packs_epi16(w, w));
    } else {
      _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i), w);
    }
  }
}
#else
template <IntRounding M, class Q>
inline void round_cube(const double* t, double scale, Q* out) {
  constexpr double lo = sizeof(Q) == 1 ? -128.0 : -32768.0, hi = sizeof(Q) == 1 ? 127.0 : 32767.0;
  for (int i = 0; i < 64; ++i) out[i] = static_cast<Q>(round_one<M>(t[i], scale, lo, hi));
}
#endif

// 64 transformed values rounded to an integer target and stored at dst in the same order.
template <WgTarget T, IntRounding M>
inline void store_int_cube(const double* tv, double scale, char* dst) {
  if constexpr (T == WgTarget::I8) {
    int8_t vals[64];
    round_cube<M>(tv, scale, vals);
    std::memcpy(dst, vals, sizeof vals);
  } else {
    int16_t vals[64];
    round_cube<M>(tv, scale, vals);
    std::memcpy(dst, vals, sizeof vals);
  }
}

#if defined(__x86_64__) || defined(__i386__)
#define NPUPACK_WG_F16C 1
// 64 doubles -> binary16, round to nearest even, with F16C. Converting through float would round
// twice, so each double is first rounded to odd at float precision (docs/nvdla.md §2.4's correctly
// rounded result, the classic double-rounding fix: float keeps 13 more bits than half). In the
// integer domain that is: clear the 29 mantissa bits float drops and set the lowest kept one if
// any of them was set; the result is exactly a float (in float's normal range; anything smaller
// is far below half's smallest subnormal and still gives +-0), so the conversion to float is
// exact and F16C's nearest-even conversion to half finishes it. INF results of finite inputs and
// INF inputs become +-65504 when saturating, like fp16_from_double.
__attribute__((target("avx2,f16c"))) inline __m128 round_to_odd_ps(__m256d d) {
  const __m256i dropped = _mm256_set1_epi64x(0x1FFFFFFF);
  const __m256i lowest_kept = _mm256_set1_epi64x(0x20000000);
  const __m256i b = _mm256_castpd_si256(d);
  const __m256i lost = _mm256_and_si256(b, dropped);
  const __m256i exact = _mm256_cmpeq_epi64(lost, _mm256_setzero_si256());
  const __m256i odd = _mm256_or_si256(_mm256_xor_si256(b, lost), _mm256_andnot_si256(exact, lowest_kept));
  return _mm256_cvtpd_ps(_mm256_castsi256_pd(odd));
}

// Eight binary16 with +-INF made +-65504 (0x7C00 -> 0x7BFF, the sign kept), as fp16_from_double
// saturates.
__attribute__((target("sse2"))) inline __m128i saturate_halves(__m128i v) {
  const __m128i inf = _mm_cmpeq_epi16(_mm_and_si128(v, _mm_set1_epi16(0x7FFF)), _mm_set1_epi16(0x7C00));
  return _mm_sub_epi16(v, _mm_and_si128(inf, _mm_set1_epi16(1)));
}

// Eight doubles (two vectors) -> eight binary16, stored at out.
__attribute__((target("avx2,f16c"))) inline void store8_fp16(__m256d a, __m256d b, char* out, bool saturate) {
  const __m256 f = _mm256_insertf128_ps(_mm256_castps128_ps256(round_to_odd_ps(a)), round_to_odd_ps(b), 1);
  const __m128i v = _mm256_cvtps_ph(f, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  _mm_storeu_si128(reinterpret_cast<__m128i*>(out), saturate ? saturate_halves(v) : v);
}

__attribute__((target("avx2,f16c"))) void fp16_cube_f16c(const double* t, uint16_t* out, bool saturate) {
  for (int i = 0; i < 64; i += 8) {
    store8_fp16(_mm256_loadu_pd(t + i), _mm256_loadu_pd(t + i + 4), reinterpret_cast<char*>(out + i), saturate);
  }
}

// Four doubles rounded as wg::round_two rounds two (the same operations, so the same integers).
template <IntRounding M>
__attribute__((target("avx2"))) inline __m128i round4(__m256d v, __m256d scale, __m256d lo1, __m256d hi1) {
  v = _mm256_min_pd(_mm256_max_pd(_mm256_mul_pd(v, scale), lo1), hi1);
  if constexpr (M == IntRounding::NearestEven) {
    const __m256d magic = _mm256_set1_pd(kMagic);
    return _mm256_cvttpd_epi32(_mm256_sub_pd(_mm256_add_pd(v, magic), magic));
  } else if constexpr (M == IntRounding::NearestAway) {
    const __m256d r = _mm256_round_pd(v, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC), d = _mm256_sub_pd(v, r);
    const __m256d one = _mm256_set1_pd(1.0);
    const __m256d up = _mm256_and_pd(_mm256_cmp_pd(d, _mm256_set1_pd(0.5), _CMP_GE_OQ), one);
    const __m256d down = _mm256_and_pd(_mm256_cmp_pd(d, _mm256_set1_pd(-0.5), _CMP_LE_OQ), one);
    return _mm256_cvttpd_epi32(_mm256_sub_pd(_mm256_add_pd(r, up), down));
  } else {
    return _mm256_cvttpd_epi32(v);
  }
}

// 64 values in registers -> int8 or int16 at out, in order (saturating packs; the values are
// already within lo - 1 .. hi + 1), without passing them through memory first.
template <WgTarget T, IntRounding M>
__attribute__((target("avx2"))) inline void store_int_avx2(const __m256d u[16], double scale, char* out) {
  constexpr bool kInt8 = T == WgTarget::I8;
  const __m256d s = _mm256_set1_pd(scale);
  const __m256d lo1 = _mm256_set1_pd(kInt8 ? -129.0 : -32769.0), hi1 = _mm256_set1_pd(kInt8 ? 128.0 : 32768.0);
  for (int i = 0; i < 16; i += 4) {
    const __m128i a = _mm_packs_epi32(round4<M>(u[i], s, lo1, hi1), round4<M>(u[i + 1], s, lo1, hi1));
    const __m128i b = _mm_packs_epi32(round4<M>(u[i + 2], s, lo1, hi1), round4<M>(u[i + 3], s, lo1, hi1));
    if constexpr (kInt8) {
      _mm_storeu_si128(reinterpret_cast<__m128i*>(out + 4 * i), _mm_packs_epi16(a, b));
    } else {
      _mm_storeu_si128(reinterpret_cast<__m128i*>(out + 8 * i), a);
      _mm_storeu_si128(reinterpret_cast<__m128i*>(out + 8 * i + 16), b);
    }
  }
}
#endif

}  // namespace wg
}  // namespace npupack
