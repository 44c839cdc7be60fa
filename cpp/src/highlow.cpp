#include "npupack/highlow.hpp"

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace npupack {

void highlow_split(uint8_t* buf, int64_t entries) {
  // Each entry is read whole before it is written, so the split runs in the buffer the engine
  // packed the scalars into: no scratch surface and one pass less over the data.
  for (int64_t e = 0; e < entries; ++e) {
    uint8_t* p = buf + e * 32;
#if defined(__SSE2__)
    const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 16));
    const __m128i low7 = _mm_set1_epi16(0x7F);
    const __m128i lo =
        _mm_packus_epi16(_mm_and_si128(_mm_srli_epi16(a, 1), low7), _mm_and_si128(_mm_srli_epi16(b, 1), low7));
    const __m128i hi = _mm_packus_epi16(_mm_srli_epi16(a, 8), _mm_srli_epi16(b, 8));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p), lo);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p + 16), hi);
#else
    uint16_t v[16];
    for (int k = 0; k < 16; ++k) v[k] = static_cast<uint16_t>(p[2 * k] | (p[2 * k + 1] << 8));
    for (int k = 0; k < 16; ++k) {
      p[k] = static_cast<uint8_t>((v[k] >> 1) & 0x7F);
      p[16 + k] = static_cast<uint8_t>(v[k] >> 8);
    }
#endif
  }
}

void highlow_merge(const uint8_t* in, int16_t* out, int64_t entries) {
  for (int64_t e = 0; e < entries; ++e) {
    const uint8_t* lo = in + e * 32;
    const uint8_t* hi = lo + 16;
    int16_t* v = out + e * 16;
    for (int k = 0; k < 16; ++k) {
      const uint16_t u = static_cast<uint16_t>(((lo[k] & 0x7F) | (hi[k] << 7)) << 1);
      v[k] = static_cast<int16_t>(u);
    }
  }
}

}  // namespace npupack
