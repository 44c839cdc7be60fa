// Image-input weights, interleaving pass with AVX2 (docs/nvdla.md §8.3, docs/design.md §4.7): the
// planes of a whole kernel group into pixels in one call, 32 bytes of each plane at a time. It
// takes the kernels that no window pass takes (without VBMI, one kernel per window, as 5x5 and
// 7x7; C' over several channel blocks). One call per group, not per kernel: the per-kernel setup
// and a bounds test on every load are then paid once per group and once per kernel.
#pragma once
#include <cstdint>
#include <cstring>

#include "npupack/image_weights.hpp"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

namespace npupack {
namespace image {

template <int B>
__attribute__((target("avx2"))) inline __m256i unpack_lo256(__m256i a, __m256i b) {
  if constexpr (B == 1) return _mm256_unpacklo_epi8(a, b);
  if constexpr (B == 2) return _mm256_unpacklo_epi16(a, b);
  return _mm256_unpacklo_epi32(a, b);
}

template <int B>
__attribute__((target("avx2"))) inline __m256i unpack_hi256(__m256i a, __m256i b) {
  if constexpr (B == 1) return _mm256_unpackhi_epi8(a, b);
  if constexpr (B == 2) return _mm256_unpackhi_epi16(a, b);
  return _mm256_unpackhi_epi32(a, b);
}

// 32 bytes at p, of which only those before end are read (the rest 0).
__attribute__((target("avx2"))) inline __m256i load32(const char* p, const char* end, bool safe) {
  if (safe || end - p >= 32) return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
  alignas(32) char tmp[32] = {};
  if (end > p) std::memcpy(tmp, p, static_cast<size_t>(end - p));
  return _mm256_load_si256(reinterpret_cast<const __m256i*>(tmp));
}

__attribute__((target("avx2"))) inline void store(char* o, __m256i v) {
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(o), v);
}

// Kernels k0 .. k0 + kn - 1 (a C-contiguous source ending at end) into pixels of CDATA
// components, kernel q's R * S pixels at px + q * R * S * CDATA * ES. The unpacks work within
// 128-bit lanes: the first round pairs pixels 0-7 and 16-23 (bytes; halves: 0-3 and 8-11) in one
// register, the second makes 4-component pixels, and vperm2i128 puts the lanes in pixel order.
// Three components drop the fourth by pshufb within each lane, then vpermd closes the gap between
// the lanes. Writes up to 128 bytes past the last kernel's pixels (px has that slack).
template <int ES, int CDATA>
__attribute__((target("avx2"))) void interleave_group_avx2(const char* src, const char* end,
                                                          const ImageWeightsSpec& sp, int64_t k0, int64_t kn,
                                                          char* px) {
  constexpr int64_t kPixels = 32 / ES, kOut = kPixels * CDATA * ES;
  const int64_t n = sp.r * sp.s, c = sp.c, kstride = sp.stride[0], pstride = sp.stride[1];
  const int64_t kernel_px = n * CDATA * ES, reach = (c - 1) * pstride + (n + kPixels - 1) / kPixels * 32;
  const __m256i drop_fourth =
      ES == 1 ? _mm256_setr_epi8(0, 1, 2, 4, 5, 6, 8, 9, 10, 12, 13, 14, -1, -1, -1, -1,  //
                                 0, 1, 2, 4, 5, 6, 8, 9, 10, 12, 13, 14, -1, -1, -1, -1)
              : _mm256_setr_epi8(0, 1, 2, 3, 4, 5, 8, 9, 10, 11, 12, 13, -1, -1, -1, -1,  //
                                 0, 1, 2, 3, 4, 5, 8, 9, 10, 11, 12, 13, -1, -1, -1, -1);
  const __m256i close_lanes = _mm256_setr_epi32(0, 1, 2, 4, 5, 6, 3, 7);
  for (int64_t q = 0; q < kn; ++q) {
    const char* planes = src + (k0 + q) * kstride;
    const bool safe = end - planes >= reach;  // every load of this kernel inside the source
    char* o = px + q * kernel_px;
    for (int64_t p = 0; p < n; p += kPixels, o += kOut) {
      __m256i v[4];
      for (int i = 0; i < 4; ++i) {
        v[i] = i < c ? load32(planes + i * pstride + p * ES, end, safe) : _mm256_setzero_si256();
      }
      if constexpr (CDATA == 1) {
        store(o, v[0]);
      } else if constexpr (CDATA == 2) {
        const __m256i lo = unpack_lo256<ES>(v[0], v[1]), hi = unpack_hi256<ES>(v[0], v[1]);
        store(o, _mm256_permute2x128_si256(lo, hi, 0x20));
        store(o + 32, _mm256_permute2x128_si256(lo, hi, 0x31));
      } else {
        const __m256i lo01 = unpack_lo256<ES>(v[0], v[1]), hi01 = unpack_hi256<ES>(v[0], v[1]);
        const __m256i lo23 = unpack_lo256<ES>(v[2], v[3]), hi23 = unpack_hi256<ES>(v[2], v[3]);
        const __m256i u0 = unpack_lo256<2 * ES>(lo01, lo23), u1 = unpack_hi256<2 * ES>(lo01, lo23);
        const __m256i u2 = unpack_lo256<2 * ES>(hi01, hi23), u3 = unpack_hi256<2 * ES>(hi01, hi23);
        const __m256i q4[4] = {_mm256_permute2x128_si256(u0, u1, 0x20), _mm256_permute2x128_si256(u2, u3, 0x20),
                               _mm256_permute2x128_si256(u0, u1, 0x31), _mm256_permute2x128_si256(u2, u3, 0x31)};
        for (int i = 0; i < 4; ++i) {
          if constexpr (CDATA == 4) {
            store(o + 32 * i, q4[i]);
          } else {
            store(o + 24 * i, _mm256_permutevar8x32_epi32(_mm256_shuffle_epi8(q4[i], drop_fourth), close_lanes));
          }
        }
      }
    }
  }
}

}  // namespace image
}  // namespace npupack
#endif
