// Winograd taps read as float64 (docs/nvdla.md §9.4: every input value is exact in a double) and
// the four-channel float64 cube with AVX2: the plain C++ cube of winograd.cpp reads its taps with
// load, the AVX2 cube whole channels at a time.
#pragma once
#include <cstdint>
#include <cstring>

#include "npupack/winograd.hpp"
#include "winograd_round.hpp"
#include "winograd_transform.hpp"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace npupack {
namespace wg {

// Binary16 bits -> double, exactly (every half value is a double), by bit assembly.
inline double half_to_double(uint16_t h) {
  const uint64_t sign = static_cast<uint64_t>(h & 0x8000) << 48;
  const uint64_t e = (h >> 10) & 0x1F, m = h & 0x3FF;
  double v;
  if (e == 0) {
    v = static_cast<double>(m) * 5.9604644775390625e-08;  // m * 2^-24, exact
    uint64_t b;
    std::memcpy(&b, &v, 8);
    b |= sign;
    std::memcpy(&v, &b, 8);
    return v;
  }
  const uint64_t b = sign | ((e == 31 ? uint64_t{2047} : e - 15 + 1023) << 52) | (m << 42);
  std::memcpy(&v, &b, 8);
  return v;
}

template <WgSource S>
inline double load(const char* p) {
  if constexpr (S == WgSource::I8) return static_cast<double>(*reinterpret_cast<const int8_t*>(p));
  if constexpr (S == WgSource::U8) return static_cast<double>(*reinterpret_cast<const uint8_t*>(p));
  if constexpr (S == WgSource::I16 || S == WgSource::U16 || S == WgSource::F16) {
    uint16_t b;
    std::memcpy(&b, p, 2);
    if constexpr (S == WgSource::I16) return static_cast<double>(static_cast<int16_t>(b));
    if constexpr (S == WgSource::U16) return static_cast<double>(b);
    if constexpr (S == WgSource::F16) return half_to_double(b);
  }
  if constexpr (S == WgSource::F32) {
    float f;
    std::memcpy(&f, p, 4);
    return static_cast<double>(f);
  }
  if constexpr (S == WgSource::F64) {
    double d;
    std::memcpy(&d, p, 8);
    return d;
  }
  return 0.0;
}

#ifdef NPUPACK_WG_F16C
template <WgSource S>
constexpr int64_t tap_bytes() {
  return S == WgSource::I8 || S == WgSource::U8 ? 1 : S == WgSource::F32 ? 4 : S == WgSource::F64 ? 8 : 2;
}

// The 9 taps of one channel, back to back in the source, as doubles: taps 0-3, 4-7 and 8.
template <WgSource S>
__attribute__((target("avx2,f16c"))) inline void load_taps(const char* p, __m256d& lo, __m256d& hi, double& last) {
  if constexpr (S == WgSource::I8 || S == WgSource::U8) {  // 8 of the 9 bytes, widened exactly
    const __m128i b = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p));
    const __m256i w = S == WgSource::I8 ? _mm256_cvtepi8_epi32(b) : _mm256_cvtepu8_epi32(b);
    lo = _mm256_cvtepi32_pd(_mm256_castsi256_si128(w));
    hi = _mm256_cvtepi32_pd(_mm256_extracti128_si256(w, 1));
  } else if constexpr (S == WgSource::I16 || S == WgSource::U16) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    const __m256i w = S == WgSource::I16 ? _mm256_cvtepi16_epi32(h) : _mm256_cvtepu16_epi32(h);
    lo = _mm256_cvtepi32_pd(_mm256_castsi256_si128(w));
    hi = _mm256_cvtepi32_pd(_mm256_extracti128_si256(w, 1));
  } else if constexpr (S == WgSource::F16) {
    const __m256 f = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    lo = _mm256_cvtps_pd(_mm256_castps256_ps128(f));
    hi = _mm256_cvtps_pd(_mm256_extractf128_ps(f, 1));
  } else if constexpr (S == WgSource::F32) {
    const __m256 f = _mm256_loadu_ps(reinterpret_cast<const float*>(p));
    lo = _mm256_cvtps_pd(_mm256_castps256_ps128(f));
    hi = _mm256_cvtps_pd(_mm256_extractf128_ps(f, 1));
  } else {
    lo = _mm256_loadu_pd(reinterpret_cast<const double*>(p));
    hi = _mm256_loadu_pd(reinterpret_cast<const double*>(p) + 4);
  }
  last = load<S>(p + 8 * tap_bytes<S>());
}

// 4x4 transpose of doubles: rows r[l] (one channel each) -> columns c[j] (one tap, four channels).
__attribute__((target("avx2"))) inline void transpose4(const __m256d r[4], __m256d* c) {
  const __m256d t0 = _mm256_unpacklo_pd(r[0], r[1]), t1 = _mm256_unpackhi_pd(r[0], r[1]);
  const __m256d t2 = _mm256_unpacklo_pd(r[2], r[3]), t3 = _mm256_unpackhi_pd(r[2], r[3]);
  c[0] = _mm256_permute2f128_pd(t0, t2, 0x20);
  c[1] = _mm256_permute2f128_pd(t1, t3, 0x20);
  c[2] = _mm256_permute2f128_pd(t0, t2, 0x31);
  c[3] = _mm256_permute2f128_pd(t1, t3, 0x31);
}

// One cube of four consecutive channels (lane l at base + l * cstride, taps back to back), kept
// in registers: the taps are loaded whole and transposed into lanes (the scalar path assembles
// them element by element in memory, and reading them as vectors right after scalar writes
// stalled on store forwarding). The outputs are then in the cube's memory order (lane = channel
// fastest) and are rounded from the registers: fp16 targets as fp16_cube_f16c does, integer
// targets as round_cube does.
template <WgSource S, WgTarget T, IntRounding M>
__attribute__((target("avx2,f16c"))) void cube_avx2(const char* base, int64_t cstride, char* out, bool saturate,
                                                     double scale) {
  __m256d lo[4], hi[4], taps[8];
  double last[4];
  for (int l = 0; l < 4; ++l) load_taps<S>(base + l * cstride, lo[l], hi[l], last[l]);
  transpose4(lo, taps);
  transpose4(hi, taps + 4);
  Lanes4 g[9], t[16];
  for (int j = 0; j < 8; ++j) g[j] = taps[j];
  g[8] = Lanes4{last[0], last[1], last[2], last[3]};
  transform(g, t);
  if constexpr (T == WgTarget::F16) {
    for (int i = 0; i < 16; i += 2) store8_fp16(t[i], t[i + 1], out + 8 * i, saturate);
  } else {
    __m256d v[16];
    for (int i = 0; i < 16; ++i) v[i] = t[i];
    wg::store_int_avx2<T, M>(v, scale, out);
  }
}
#endif

}  // namespace wg
}  // namespace npupack
