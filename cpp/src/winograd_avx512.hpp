// Winograd cubes of float16 weights to float16 with AVX-512 (docs/nvdla.md §9.4, 9.5): eight
// float64 lanes per register, four channels of two kernels, whose cubes are neighbours in the
// cube row; the taps (back to back, channels back to back) gathered into lanes by vpermt2w. The
// same transform (winograd_transform.hpp) and the same rounding to odd as the AVX2 cube
// (winograd_round.hpp), so the same bytes for every number; a NaN result may carry the payload of
// the other NaN operand of an addition than the AVX2 cube's (the compiler orders them).
#pragma once
#include <cstdint>

#include "winograd_transform.hpp"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define NPUPACK_WG_AVX512 1

namespace npupack {
namespace wg {

// vpermt2w indices gathering tap j of lane l from 36 halves back to back per kernel (channel l's
// tap j at 9l + j; lanes 0-3 from the first table, 4-7 from the second, at index + 32): taps 0-3
// from loads at half 0, taps 4-7 and tap 8 from loads at half 4; 8 lanes per tap.
struct PairIndex {
  alignas(64) int16_t taps0_3[32], taps4_7[32], tap8[32];
};

inline const PairIndex& pair_index() {
  static const PairIndex ix = [] {
    PairIndex x{};
    for (int e = 0; e < 32; ++e) {
      const int l = e % 8, lane = 9 * (l % 4) + (l >= 4 ? 32 : 0);
      x.taps0_3[e] = static_cast<int16_t>(lane + e / 8);
      x.taps4_7[e] = static_cast<int16_t>(lane + e / 8);  // tap 4 + e / 8, loaded from half 4
      x.tap8[e] = static_cast<int16_t>(lane + 4);
    }
    return x;
  }();
  return ix;
}

// The taps of channels c .. c + 3 of kernels a and b (36 halves back to back at each): lo = taps
// 0-3, hi = taps 4-7, last = tap 8 in halves 0-7; tap j of lane l at 8j + l. Reads the 72 bytes
// at a and at b, none past them.
__attribute__((target("avx512f,avx512bw"), always_inline)) inline void gather_pair(const char* a, const char* b,
                                                                                 __m512i& lo, __m512i& hi,
                                                                                 __m512i& last) {
  const PairIndex& ix = pair_index();
  const __m512i a0 = _mm512_loadu_si512(a), b0 = _mm512_loadu_si512(b);  // halves 0-31
  const __m512i a1 = _mm512_loadu_si512(a + 8), b1 = _mm512_loadu_si512(b + 8);  // halves 4-35
  lo = _mm512_permutex2var_epi16(a0, _mm512_load_si512(ix.taps0_3), b0);
  hi = _mm512_permutex2var_epi16(a1, _mm512_load_si512(ix.taps4_7), b1);
  last = _mm512_permutex2var_epi16(a1, _mm512_load_si512(ix.tap8), b1);
}

// Eight doubles rounded to odd at float precision, then to float exactly (as round_to_odd_ps).
__attribute__((target("avx512f"), always_inline)) inline __m256 round_to_odd8(__m512d d) {
  const __m512i dropped = _mm512_set1_epi64(0x1FFFFFFF), lowest_kept = _mm512_set1_epi64(0x20000000);
  const __m512i b = _mm512_castpd_si512(d);
  const __mmask8 inexact = _mm512_test_epi64_mask(b, dropped);
  // Inexact lanes: (b & ~dropped) | lowest_kept (truth table 0xBA of b, dropped, lowest_kept).
  const __m512i odd = _mm512_mask_ternarylogic_epi64(b, inexact, dropped, lowest_kept, 0xBA);
  return _mm512_cvtpd_ps(_mm512_castsi512_pd(odd));
}

// Channels c .. c + 3 of two kernels: 36 halves back to back at a and at b (9 taps per channel);
// cube a written to out_a, cube b to out_b, each c fastest, then s, then r (128 bytes); true
// (every value has its float64 lanes: the signature of f16_cube_pair_f32, which may decline).
__attribute__((target("avx512f,avx512bw,avx2,f16c"))) inline bool f16_cube_pair(const char* a, const char* b,
                                                                            char* out_a, char* out_b,
                                                                            bool saturate) {
  __m512i lo, hi, last;
  gather_pair(a, b, lo, hi, last);
  const __m512 f[4] = {_mm512_cvtph_ps(_mm512_castsi512_si256(lo)), _mm512_cvtph_ps(_mm512_extracti64x4_epi64(lo, 1)),
                       _mm512_cvtph_ps(_mm512_castsi512_si256(hi)), _mm512_cvtph_ps(_mm512_extracti64x4_epi64(hi, 1))};
  Lanes8 g[9], t[16];
  for (int j = 0; j < 8; ++j) {
    const __m512d two = _mm512_castps_pd(f[j / 2]);
    g[j] = _mm512_cvtps_pd(_mm256_castpd_ps(j % 2 ? _mm512_extractf64x4_pd(two, 1) : _mm512_castpd512_pd256(two)));
  }
  g[8] = _mm512_cvtps_pd(_mm256_cvtph_ps(_mm512_castsi512_si128(last)));
  transform(g, t);
  // Four outputs at a time: halves [a_i, b_i, a_i+1, b_i+1, ...] (four lanes each), reordered to
  // cube a's four outputs then cube b's.
  const __m512i by_cube = _mm512_set_epi64(7, 5, 3, 1, 6, 4, 2, 0);
  for (int i = 0; i < 16; i += 4) {
    __m512 two[2];
    for (int m = 0; m < 2; ++m) {
      const __m256 x = round_to_odd8(t[i + 2 * m]), y = round_to_odd8(t[i + 2 * m + 1]);
      const __m512d low = _mm512_castpd256_pd512(_mm256_castps_pd(x));
      two[m] = _mm512_castpd_ps(_mm512_insertf64x4(low, _mm256_castps_pd(y), 1));
    }
    const __m256i h0 = _mm512_cvtps_ph(two[0], _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    const __m256i h1 = _mm512_cvtps_ph(two[1], _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512i v = _mm512_permutexvar_epi64(by_cube, _mm512_inserti64x4(_mm512_castsi256_si512(h0), h1, 1));
    if (saturate) {  // INF of a finite input -> +-65504, as fp16_from_double
      const __mmask32 inf = _mm512_cmpeq_epi16_mask(_mm512_and_si512(v, _mm512_set1_epi16(0x7FFF)),
                                                    _mm512_set1_epi16(0x7C00));
      v = _mm512_mask_sub_epi16(v, inf, v, _mm512_set1_epi16(1));
    }
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out_a + 8 * i), _mm512_castsi512_si256(v));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out_b + 8 * i), _mm512_extracti64x4_epi64(v, 1));
  }
  return true;
}

}  // namespace wg
}  // namespace npupack
#endif
