// The YUV 4:4:4 row split of the semi-planar N444 formats (pixel.cpp), as templates over the
// element type and the UV pair order, shared by the yuv-split kernels: each kernel file is one
// ISA and element size, choosing the order's instance per row from YuvSplitArgs::v_first.
#pragma once
#include <cstdint>
#include <cstring>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace npupack {
namespace kernels {

// One row, component order fixed at compile time: the portable kernel and the SIMD one's tail.
// Elements move through memcpy: the image and the planes may sit at any byte (an array one byte
// off its alignment, a caller's plane at an odd address), where a typed access is undefined.
template <class T, bool VFirst>
__attribute__((always_inline)) inline void yuv_split_row(const T* yuv, int64_t n, T* y, T* uv) {
  constexpr int a = VFirst ? 2 : 1, b = VFirst ? 1 : 2;
  for (int64_t p = 0; p < n; ++p) {
    T c[3];
    std::memcpy(c, yuv + 3 * p, sizeof c);
    const T pair[2] = {c[a], c[b]};
    std::memcpy(y + p, c, sizeof(T));
    std::memcpy(uv + 2 * p, pair, sizeof pair);
  }
}

#if defined(__x86_64__) || defined(__i386__)
// pshufb masks that gather one 16-byte output (the Y run, or the first or second half of the UV
// run, of 16 / sizeof(T) pixels) from each of the three 16-byte input vectors; 0x80 zeroes.
template <class T, bool VFirst>
struct YuvSplitMasks {
  alignas(16) unsigned char m[3][3][16];  // [output][input][byte]
  YuvSplitMasks() {
    constexpr int es = sizeof(T), px = 16 / es, a = VFirst ? 2 : 1, b = VFirst ? 1 : 2;
    for (int o = 0; o < 3; ++o) {
      for (int i = 0; i < 16; ++i) {
        const int e = i / es, byte = i % es;
        // Y: pixel e; UV half o - 1: pixel (o - 1) * px / 2 + e / 2, component a or b.
        const int pixel = o == 0 ? e : (o - 1) * px / 2 + e / 2;
        const int comp = o == 0 ? 0 : (e % 2 == 0 ? a : b);
        const int src = (3 * pixel + comp) * es + byte;
        for (int k = 0; k < 3; ++k) {
          m[o][k][i] = src / 16 == k ? static_cast<unsigned char>(src % 16) : 0x80;
        }
      }
    }
  }
};

// 16 bytes of Y and 32 of UV per step: 7 pshufb. Hand-written because it beats the compiler's
// own AVX2 vectorisation of yuv_split_row (docs/performance.md).
template <class T, bool VFirst>
__attribute__((target("ssse3"))) void yuv_split_pshufb(const T* yuv, int64_t n, T* y, T* uv) {
  static const YuvSplitMasks<T, VFirst> masks;
  constexpr int64_t px = 16 / sizeof(T);
  auto mask = [&](int o, int k) { return _mm_load_si128(reinterpret_cast<const __m128i*>(masks.m[o][k])); };
  const __m128i y0 = mask(0, 0), y1 = mask(0, 1), y2 = mask(0, 2);
  const __m128i l0 = mask(1, 0), l1 = mask(1, 1), h1 = mask(2, 1), h2 = mask(2, 2);
  if (n < px) {
    yuv_split_row<T, VFirst>(yuv, n, y, uv);
    return;
  }
  for (int64_t p = 0;; p += px) {
    if (p + px > n) p = n - px;  // the last px pixels again, overlapping: the same bytes, no scalar tail
    const auto* src = reinterpret_cast<const __m128i*>(yuv + 3 * p);
    const __m128i v0 = _mm_loadu_si128(src), v1 = _mm_loadu_si128(src + 1), v2 = _mm_loadu_si128(src + 2);
    const __m128i ys = _mm_or_si128(_mm_or_si128(_mm_shuffle_epi8(v0, y0), _mm_shuffle_epi8(v1, y1)),
                                    _mm_shuffle_epi8(v2, y2));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(y + p), ys);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(uv + 2 * p),
                     _mm_or_si128(_mm_shuffle_epi8(v0, l0), _mm_shuffle_epi8(v1, l1)));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(uv + 2 * p) + 1,
                     _mm_or_si128(_mm_shuffle_epi8(v1, h1), _mm_shuffle_epi8(v2, h2)));
    if (p + px >= n) break;
  }
}
#endif

// A kernel body: the row of YuvSplitArgs as elements of T, through Row<T, order>.
#define NPUPACK_YUV_SPLIT_CALL(T, row, a)                                                           \
  ((a).v_first ? row<T, true> : row<T, false>)(reinterpret_cast<const T*>((a).yuv), (a).n,          \
                                               reinterpret_cast<T*>((a).y), reinterpret_cast<T*>((a).uv))

}  // namespace kernels
}  // namespace npupack
