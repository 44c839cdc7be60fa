#include "npupack/transpose.hpp"

#include <cstring>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace npupack {

namespace {

template <int EB>
void transpose_scalar(const char* src, int64_t ss, char* dst, int64_t ds, int64_t r0, int64_t r1, int64_t c0,
                      int64_t c1) {
  for (int64_t r = r0; r < r1; ++r) {
    const char* s = src + r * ss;
    for (int64_t c = c0; c < c1; ++c) std::memcpy(dst + c * ds + r * EB, s + c * EB, EB);
  }
}

#if defined(__SSE2__)
inline __m128i load8(const char* p) { return _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)); }
inline __m128i load16(const char* p) { return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p)); }
inline void store16(char* p, __m128i v) { _mm_storeu_si128(reinterpret_cast<__m128i*>(p), v); }
inline void store8(char* p, __m128i v) { _mm_storel_epi64(reinterpret_cast<__m128i*>(p), v); }

// 8 rows x 8 bytes -> d[k] = (column 2k, column 2k+1), 8 bytes each.
inline void tr8x8_u8(const char* s, int64_t ss, __m128i d[4]) {
  const __m128i b0 = _mm_unpacklo_epi8(load8(s), load8(s + ss));
  const __m128i b1 = _mm_unpacklo_epi8(load8(s + 2 * ss), load8(s + 3 * ss));
  const __m128i b2 = _mm_unpacklo_epi8(load8(s + 4 * ss), load8(s + 5 * ss));
  const __m128i b3 = _mm_unpacklo_epi8(load8(s + 6 * ss), load8(s + 7 * ss));
  const __m128i c0 = _mm_unpacklo_epi16(b0, b1), c1 = _mm_unpackhi_epi16(b0, b1);
  const __m128i c2 = _mm_unpacklo_epi16(b2, b3), c3 = _mm_unpackhi_epi16(b2, b3);
  d[0] = _mm_unpacklo_epi32(c0, c2);
  d[1] = _mm_unpackhi_epi32(c0, c2);
  d[2] = _mm_unpacklo_epi32(c1, c3);
  d[3] = _mm_unpackhi_epi32(c1, c3);
}

// Block starts covering [0, n) with blocks of b: b-aligned starts, then one last start at n - b
// that overlaps the previous block (rewriting the same values) instead of a scalar edge.
template <class F>
inline void for_blocks(int64_t n, int64_t b, F f) {
  int64_t i = 0;
  for (; i + b <= n; i += b) f(i);
  if (i < n && n >= b) f(n - b);
}

void transpose_u8(const char* src, int64_t ss, char* dst, int64_t ds, int64_t rows, int64_t cols) {
  if (cols >= 8 && rows >= 16) {
    for_blocks(cols, 8, [&](int64_t c) {
      for_blocks(rows, 16, [&](int64_t r) {
        __m128i top[4], bot[4];
        tr8x8_u8(src + r * ss + c, ss, top);
        tr8x8_u8(src + (r + 8) * ss + c, ss, bot);
        char* d = dst + c * ds + r;
        for (int k = 0; k < 4; ++k) {
          store16(d + (2 * k) * ds, _mm_unpacklo_epi64(top[k], bot[k]));
          store16(d + (2 * k + 1) * ds, _mm_unpackhi_epi64(top[k], bot[k]));
        }
      });
    });
    return;
  }
  if (cols >= 8 && rows >= 8) {
    for_blocks(cols, 8, [&](int64_t c) {
      for_blocks(rows, 8, [&](int64_t r) {
        __m128i t[4];
        tr8x8_u8(src + r * ss + c, ss, t);
        char* d = dst + c * ds + r;
        for (int k = 0; k < 4; ++k) {
          store8(d + (2 * k) * ds, t[k]);
          store8(d + (2 * k + 1) * ds, _mm_unpackhi_epi64(t[k], t[k]));
        }
      });
    });
    return;
  }
  transpose_scalar<1>(src, ss, dst, ds, 0, rows, 0, cols);
}

void transpose_u16(const char* src, int64_t ss, char* dst, int64_t ds, int64_t rows, int64_t cols) {
  if (rows < 8 || cols < 8) {
    transpose_scalar<2>(src, ss, dst, ds, 0, rows, 0, cols);
    return;
  }
  for_blocks(cols, 8, [&](int64_t c) {
    for_blocks(rows, 8, [&](int64_t r) {
      const char* s = src + r * ss + 2 * c;
      __m128i b[8];
      for (int k = 0; k < 4; ++k) {
        const __m128i x = load16(s + (2 * k) * ss), y = load16(s + (2 * k + 1) * ss);
        b[2 * k] = _mm_unpacklo_epi16(x, y);      // rows 2k, 2k+1: columns 0-3
        b[2 * k + 1] = _mm_unpackhi_epi16(x, y);  // columns 4-7
      }
      const __m128i c0 = _mm_unpacklo_epi32(b[0], b[2]), c1 = _mm_unpackhi_epi32(b[0], b[2]);
      const __m128i c2 = _mm_unpacklo_epi32(b[1], b[3]), c3 = _mm_unpackhi_epi32(b[1], b[3]);
      const __m128i c4 = _mm_unpacklo_epi32(b[4], b[6]), c5 = _mm_unpackhi_epi32(b[4], b[6]);
      const __m128i c6 = _mm_unpacklo_epi32(b[5], b[7]), c7 = _mm_unpackhi_epi32(b[5], b[7]);
      char* d = dst + c * ds + 2 * r;
      store16(d, _mm_unpacklo_epi64(c0, c4));
      store16(d + ds, _mm_unpackhi_epi64(c0, c4));
      store16(d + 2 * ds, _mm_unpacklo_epi64(c1, c5));
      store16(d + 3 * ds, _mm_unpackhi_epi64(c1, c5));
      store16(d + 4 * ds, _mm_unpacklo_epi64(c2, c6));
      store16(d + 5 * ds, _mm_unpackhi_epi64(c2, c6));
      store16(d + 6 * ds, _mm_unpacklo_epi64(c3, c7));
      store16(d + 7 * ds, _mm_unpackhi_epi64(c3, c7));
    });
  });
}

void transpose_u32(const char* src, int64_t ss, char* dst, int64_t ds, int64_t rows, int64_t cols) {
  if (rows < 4 || cols < 4) {
    transpose_scalar<4>(src, ss, dst, ds, 0, rows, 0, cols);
    return;
  }
  for_blocks(cols, 4, [&](int64_t c) {
    for_blocks(rows, 4, [&](int64_t r) {
      const char* s = src + r * ss + 4 * c;
      const __m128i a0 = load16(s), a1 = load16(s + ss), a2 = load16(s + 2 * ss), a3 = load16(s + 3 * ss);
      const __m128i b0 = _mm_unpacklo_epi32(a0, a1), b1 = _mm_unpackhi_epi32(a0, a1);
      const __m128i b2 = _mm_unpacklo_epi32(a2, a3), b3 = _mm_unpackhi_epi32(a2, a3);
      char* d = dst + c * ds + 4 * r;
      store16(d, _mm_unpacklo_epi64(b0, b2));
      store16(d + ds, _mm_unpackhi_epi64(b0, b2));
      store16(d + 2 * ds, _mm_unpacklo_epi64(b1, b3));
      store16(d + 3 * ds, _mm_unpackhi_epi64(b1, b3));
    });
  });
}
#endif

}  // namespace

void transpose(const char* src, int64_t src_stride, char* dst, int64_t dst_stride, int64_t rows, int64_t cols,
               int64_t eb) {
#if defined(__SSE2__)
  switch (eb) {
    case 1: return transpose_u8(src, src_stride, dst, dst_stride, rows, cols);
    case 2: return transpose_u16(src, src_stride, dst, dst_stride, rows, cols);
    case 4: return transpose_u32(src, src_stride, dst, dst_stride, rows, cols);
    default: return transpose_scalar<8>(src, src_stride, dst, dst_stride, 0, rows, 0, cols);
  }
#else
  switch (eb) {
    case 1: return transpose_scalar<1>(src, src_stride, dst, dst_stride, 0, rows, 0, cols);
    case 2: return transpose_scalar<2>(src, src_stride, dst, dst_stride, 0, rows, 0, cols);
    case 4: return transpose_scalar<4>(src, src_stride, dst, dst_stride, 0, rows, 0, cols);
    default: return transpose_scalar<8>(src, src_stride, dst, dst_stride, 0, rows, 0, cols);
  }
#endif
}

}  // namespace npupack
