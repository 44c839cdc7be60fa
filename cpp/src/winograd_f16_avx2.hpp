// Winograd cubes of float16 weights to float16 with AVX2 in float32 (docs/nvdla.md §9.4, 9.5;
// docs/design.md §4.3): four channels of two kernels in eight float lanes, twice the lanes of the
// float64 cube and no rounding to odd, for the lanes where every step of the transform is exact in
// float's 24 bits. With E the largest exponent of a lane's taps and e the smallest of its nonzero
// ones (span E - e), every tap is a multiple of 2^(e-10), and a tap of exponent x is at most
// 2^(x+1) - 2^(x-10). The outer rows add three taps: multiples of 2^(e-10) below 2^(E+3), exact up
// to span 11. The inner rows add halved sums: multiples of 2^(e-11) of at most half the nine
// magnitudes' sum, below 9 * 2^E (2^(E+4): exact up to span 9); at span 10 one tap is below
// 2^(E-9) and the other eight sum to at most 2^(E+4) - 2^(E-7), so half the sum stays below
// 2^(E+3) (exact). A half subnormal is a multiple of 2^-24, coarser than this assumes. So a span
// of at most 10 is exact (the tests find spans of 11 that are not), and F16C's nearest-even
// conversion rounds the exact value once: the half the float64 cube gives (its rounding to odd
// leaves a value exact in float unchanged), with the same +0 for zero (the same operations in the
// same order). Lanes with a wider span are left to the float64 cube. INF and NaN need no
// exception: beside a finite tap their span is too wide, and lanes of only INF, NaN and zero give
// INF and NaN as float64 does (a NaN's payload may come from the other operand of an addition, as
// between the other paths).
#pragma once
#include <cstdint>
#include <cstring>

#include "winograd_round.hpp"
#include "winograd_transform.hpp"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define NPUPACK_WG_F16_AVX2 1

namespace npupack {
namespace wg {

using Floats8 = float __attribute__((vector_size(32)));

// 8x8 transpose of floats: row r holds 8 taps of one channel; column j (tap j) gets lane r.
__attribute__((target("avx2"), always_inline)) inline void transpose8(const __m256 r[8], __m256 c[8]) {
  __m256 t[8], s[8];
  for (int i = 0; i < 8; i += 2) {
    t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
    t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
  }
  for (int h = 0; h < 8; h += 4) {  // rows 0-3, then rows 4-7
    s[h] = _mm256_shuffle_ps(t[h], t[h + 2], 0x44);
    s[h + 1] = _mm256_shuffle_ps(t[h], t[h + 2], 0xEE);
    s[h + 2] = _mm256_shuffle_ps(t[h + 1], t[h + 3], 0x44);
    s[h + 3] = _mm256_shuffle_ps(t[h + 1], t[h + 3], 0xEE);
  }
  for (int j = 0; j < 4; ++j) {
    c[j] = _mm256_permute2f128_ps(s[j], s[j + 4], 0x20);
    c[j + 4] = _mm256_permute2f128_ps(s[j], s[j + 4], 0x31);
  }
}

// Whether every lane's nonzero taps have exponents within 10 of each other.
__attribute__((target("avx2"), always_inline)) inline bool exact_in_float(const __m256 g[9]) {
  const __m256i magnitude = _mm256_set1_epi32(0x7FFFFFFF), one = _mm256_set1_epi32(1);
  __m256i hi = _mm256_setzero_si256(), lo_minus_1 = _mm256_set1_epi32(-1);
  for (int j = 0; j < 9; ++j) {
    const __m256i e = _mm256_srli_epi32(_mm256_and_si256(_mm256_castps_si256(g[j]), magnitude), 23);
    hi = _mm256_max_epu32(hi, e);
    lo_minus_1 = _mm256_min_epu32(lo_minus_1, _mm256_sub_epi32(e, one));  // a zero (e = 0) wraps high
  }
  // hi - 1 - lo_minus_1 is the span (0 for all-zero lanes: both sides wrap to -1).
  const __m256i span = _mm256_sub_epi32(_mm256_sub_epi32(hi, one), lo_minus_1);
  const __m256i wide = _mm256_cmpgt_epi32(span, _mm256_set1_epi32(10));
  return _mm256_testz_si256(wide, wide);
}

inline uint16_t half_at(const char* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return h;
}

// Channels c .. c + 3 of two kernels: 36 halves back to back at a and at b (9 taps per channel),
// read no further. When exact_in_float holds, cube a is written to out_a and cube b to out_b
// (each c fastest, then s, then r: 128 bytes) and the result is true; otherwise nothing is
// written.
__attribute__((target("avx2,f16c"))) inline bool f16_cube_pair_f32(const char* a, const char* b, char* out_a,
                                                                  char* out_b, bool saturate) {
  __m256 rows[8], g[9];
  for (int l = 0; l < 4; ++l) {  // taps 0-7 of channel l
    rows[l] = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(a + 18 * l)));
    rows[4 + l] = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b + 18 * l)));
  }
  transpose8(rows, g);
  g[8] = _mm256_cvtph_ps(_mm_setr_epi16(half_at(a + 16), half_at(a + 34), half_at(a + 52), half_at(a + 70),
                                        half_at(b + 16), half_at(b + 34), half_at(b + 52), half_at(b + 70)));
  if (!exact_in_float(g)) return false;
  Floats8 v[9], t[16];
  for (int j = 0; j < 9; ++j) v[j] = g[j];
  transform(v, t);
  for (int i = 0; i < 16; i += 2) {  // outputs i and i + 1: cube a's in lanes 0-3, cube b's in 4-7
    const __m128i x = _mm256_cvtps_ph(t[i], _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    const __m128i y = _mm256_cvtps_ph(t[i + 1], _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m128i va = _mm_unpacklo_epi64(x, y), vb = _mm_unpackhi_epi64(x, y);
    if (saturate) va = saturate_halves(va), vb = saturate_halves(vb);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out_a + 8 * i), va);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out_b + 8 * i), vb);
  }
  return true;
}

}  // namespace wg
}  // namespace npupack
#endif
