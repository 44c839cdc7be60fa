// Tests on the bits of binary16 values (INF, NaN, either), scalar and 8 halves at a time, for the
// scans of convert.cpp and their kernels (fp16-scan_x16_*.cpp). (The copies and transposes that test fp16 as they move it keep the largest
// magnitude instead: row_copy.hpp, cpp/kernels/narrow_avx2.hpp.)
// Spec: docs/nvdla.md §14 (INF/NaN policy).
#pragma once
#include <cstdint>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace npupack {
namespace detail {

// (b & mask) == value, or (b & mask) > value. Masks stay within 0x7FFF, so the SIMD lanes may
// compare as signed 16-bit integers.
struct Fp16Test {
  uint16_t mask, value;
  bool greater;
  bool operator()(uint16_t b) const { return greater ? (b & mask) > value : (b & mask) == value; }
};

inline constexpr Fp16Test kFp16Inf{0x7FFF, 0x7C00, false};
inline constexpr Fp16Test kFp16Nan{0x7FFF, 0x7C00, true};
inline constexpr Fp16Test kFp16NonFinite{0x7C00, 0x7C00, false};  // exponent all ones

#if defined(__SSE2__)
// All ones in each 16-bit lane of v that passes t.
inline __m128i fp16_lanes_sse2(__m128i v, const Fp16Test& t) {
  const __m128i m = _mm_and_si128(v, _mm_set1_epi16(static_cast<int16_t>(t.mask)));
  const __m128i value = _mm_set1_epi16(static_cast<int16_t>(t.value));
  return t.greater ? _mm_cmpgt_epi16(m, value) : _mm_cmpeq_epi16(m, value);
}
#endif

}  // namespace detail
}  // namespace npupack
