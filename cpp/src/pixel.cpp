#include "npupack/pixel.hpp"

#include <cstring>

#include "npupack/cpu.hpp"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace npupack {

namespace {

bool pixel_out_of_range(const uint16_t* c) { return c[0] > 1023 || c[1] > 1023 || c[2] > 1023 || c[3] > 3; }

// Packs pixels [p0, p1) and returns true when one of them has a component out of range.
bool pack_10bit_words(const uint16_t* comps, int64_t p0, int64_t p1, const int* shifts, uint32_t* words) {
  int64_t p = p0;
  bool bad = false;
#if defined(__SSE2__)
  // A shift s = 16q + r (r <= 14 for every format of Table 33) is a 16-bit multiply by 2^r: one
  // pmaddwd per half sums each pixel's components with q = 0 and with q = 1 in pairs, the q = 1
  // sums move up 16 bits, and the two pair sums of a pixel add up to its word (no bit overlaps).
  alignas(16) int16_t lo[8], hi[8];
  bool simd = true;
  for (int j = 0; j < 8; ++j) {
    const int s = shifts[j % 4];
    simd = simd && s % 16 <= 14;
    lo[j] = s < 16 ? static_cast<int16_t>(1 << (s % 16)) : 0;
    hi[j] = s >= 16 ? static_cast<int16_t>(1 << (s % 16)) : 0;
  }
  if (simd) {
    const __m128i mlo = _mm_load_si128(reinterpret_cast<const __m128i*>(lo));
    const __m128i mhi = _mm_load_si128(reinterpret_cast<const __m128i*>(hi));
    // Saturating subtraction of the limits leaves a non-zero lane exactly where a value exceeds it.
    const __m128i limit = _mm_setr_epi16(1023, 1023, 1023, 3, 1023, 1023, 1023, 3);
    __m128i over = _mm_setzero_si128();
    for (; p + 4 <= p1; p += 4) {
      const __m128i v0 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(comps + 4 * p));
      const __m128i v1 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(comps + 4 * p + 8));
      over = _mm_or_si128(over, _mm_or_si128(_mm_subs_epu16(v0, limit), _mm_subs_epu16(v1, limit)));
      // Two pixels -> [a0, b0, a1, b1] with word = a + b.
      const __m128i t0 = _mm_add_epi32(_mm_madd_epi16(v0, mlo), _mm_slli_epi32(_mm_madd_epi16(v0, mhi), 16));
      const __m128i t1 = _mm_add_epi32(_mm_madd_epi16(v1, mlo), _mm_slli_epi32(_mm_madd_epi16(v1, mhi), 16));
      const __m128 f0 = _mm_castsi128_ps(t0), f1 = _mm_castsi128_ps(t1);
      const __m128i a = _mm_castps_si128(_mm_shuffle_ps(f0, f1, _MM_SHUFFLE(2, 0, 2, 0)));
      const __m128i b = _mm_castps_si128(_mm_shuffle_ps(f0, f1, _MM_SHUFFLE(3, 1, 3, 1)));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(words + p), _mm_add_epi32(a, b));
    }
    bad = _mm_movemask_epi8(_mm_cmpeq_epi16(over, _mm_setzero_si128())) != 0xFFFF;
  }
#endif
  for (; p < p1; ++p) {
    const uint16_t* c = comps + 4 * p;
    bad = bad || pixel_out_of_range(c);
    words[p] = (uint32_t{c[0]} << shifts[0]) | (uint32_t{c[1]} << shifts[1]) | (uint32_t{c[2]} << shifts[2]) |
               (uint32_t{c[3]} << shifts[3]);
  }
  return bad;
}

}  // namespace

int64_t pack_10bit(const uint16_t* comps, int64_t pixels, const int* shifts, uint32_t* words) {
  // Pack and check a chunk in one pass; only a chunk that held a bad pixel is searched again.
  constexpr int64_t kChunk = 1024;
  for (int64_t p0 = 0; p0 < pixels; p0 += kChunk) {
    const int64_t p1 = p0 + kChunk < pixels ? p0 + kChunk : pixels;
    if (pack_10bit_words(comps, p0, p1, shifts, words)) {
      for (int64_t p = p0; p < p1; ++p) {
        if (pixel_out_of_range(comps + 4 * p)) return p;
      }
    }
  }
  return -1;
}

void unpack_10bit(const uint32_t* words, int64_t pixels, const int* shifts, uint16_t* comps) {
  for (int64_t p = 0; p < pixels; ++p) {
    const uint32_t w = words[p];
    uint16_t* c = comps + 4 * p;
    c[0] = static_cast<uint16_t>((w >> shifts[0]) & 1023);
    c[1] = static_cast<uint16_t>((w >> shifts[1]) & 1023);
    c[2] = static_cast<uint16_t>((w >> shifts[2]) & 1023);
    c[3] = static_cast<uint16_t>((w >> shifts[3]) & 3);
  }
}

namespace {

// One row, component order fixed at compile time: the portable kernel and the SIMD one's tail.
template <class T, bool VFirst>
__attribute__((always_inline)) inline void split_row_impl(const T* yuv, int64_t n, T* y, T* uv) {
  constexpr int a = VFirst ? 2 : 1, b = VFirst ? 1 : 2;
  for (int64_t p = 0; p < n; ++p) {
    y[p] = yuv[3 * p];
    uv[2 * p] = yuv[3 * p + a];
    uv[2 * p + 1] = yuv[3 * p + b];
  }
}

template <class T, bool VFirst>
void split_row_base(const T* yuv, int64_t n, T* y, T* uv) { split_row_impl<T, VFirst>(yuv, n, y, uv); }

#if defined(__x86_64__) || defined(__i386__)
// pshufb masks that gather one 16-byte output (the Y run, or the first or second half of the UV
// run, of 16 / sizeof(T) pixels) from each of the three 16-byte input vectors; 0x80 zeroes.
template <class T, bool VFirst>
struct SplitMasks {
  alignas(16) unsigned char m[3][3][16];  // [output][input][byte]
  SplitMasks() {
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
// own AVX2 vectorisation of split_row_impl (docs/performance.md).
template <class T, bool VFirst>
__attribute__((target("ssse3"))) void split_row_pshufb(const T* yuv, int64_t n, T* y, T* uv) {
  static const SplitMasks<T, VFirst> masks;
  constexpr int64_t px = 16 / sizeof(T);
  auto mask = [&](int o, int k) { return _mm_load_si128(reinterpret_cast<const __m128i*>(masks.m[o][k])); };
  const __m128i y0 = mask(0, 0), y1 = mask(0, 1), y2 = mask(0, 2);
  const __m128i l0 = mask(1, 0), l1 = mask(1, 1), h1 = mask(2, 1), h2 = mask(2, 2);
  int64_t p = 0;
  for (; p + px <= n; p += px) {
    const auto* src = reinterpret_cast<const __m128i*>(yuv + 3 * p);
    const __m128i v0 = _mm_loadu_si128(src), v1 = _mm_loadu_si128(src + 1), v2 = _mm_loadu_si128(src + 2);
    const __m128i ys = _mm_or_si128(_mm_or_si128(_mm_shuffle_epi8(v0, y0), _mm_shuffle_epi8(v1, y1)),
                                    _mm_shuffle_epi8(v2, y2));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(y + p), ys);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(uv + 2 * p),
                     _mm_or_si128(_mm_shuffle_epi8(v0, l0), _mm_shuffle_epi8(v1, l1)));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(uv + 2 * p) + 1,
                     _mm_or_si128(_mm_shuffle_epi8(v1, h1), _mm_shuffle_epi8(v2, h2)));
  }
  split_row_impl<T, VFirst>(yuv + 3 * p, n - p, y + p, uv + 2 * p);
}
#endif

template <class T, bool VFirst>
using RowFn = void (*)(const T*, int64_t, T*, T*);

template <class T, bool VFirst>
RowFn<T, VFirst> pick_split_row() {
#if defined(__x86_64__) || defined(__i386__)
  if (cpu().ssse3) return split_row_pshufb<T, VFirst>;
#endif
  return split_row_base<T, VFirst>;
}

template <class T, bool VFirst>
void split_plane(const char* yuv, int64_t h, int64_t w, int64_t src_row, char* y, int64_t y_stride, int64_t y_pre,
                 char* uv, int64_t uv_stride, int64_t uv_pre) {
  static const RowFn<T, VFirst> row = pick_split_row<T, VFirst>();
  const int64_t y_row = w * static_cast<int64_t>(sizeof(T)), uv_row = 2 * y_row;
  for (int64_t r = 0; r < h; ++r) {
    char* yl = y + r * y_stride;
    char* ul = uv + r * uv_stride;
    // Each line's padding (x-offset bytes before, stride tail after) is zeroed here, next to the
    // pixels, instead of a fill pass over both planes first.
    std::memset(yl, 0, static_cast<size_t>(y_pre));
    std::memset(yl + y_pre + y_row, 0, static_cast<size_t>(y_stride - y_pre - y_row));
    std::memset(ul, 0, static_cast<size_t>(uv_pre));
    std::memset(ul + uv_pre + uv_row, 0, static_cast<size_t>(uv_stride - uv_pre - uv_row));
    row(reinterpret_cast<const T*>(yuv + r * src_row), w, reinterpret_cast<T*>(yl + y_pre),
        reinterpret_cast<T*>(ul + uv_pre));
  }
}

}  // namespace

void split_yuv444(const char* yuv, int64_t h, int64_t w, int64_t src_row, int64_t eb, bool v_first, char* y,
                  int64_t y_stride, int64_t y_pre, char* uv, int64_t uv_stride, int64_t uv_pre) {
  if (eb == 1) {
    (v_first ? split_plane<uint8_t, true> : split_plane<uint8_t, false>)(yuv, h, w, src_row, y, y_stride, y_pre, uv,
                                                                         uv_stride, uv_pre);
  } else {
    (v_first ? split_plane<uint16_t, true> : split_plane<uint16_t, false>)(yuv, h, w, src_row, y, y_stride, y_pre,
                                                                           uv, uv_stride, uv_pre);
  }
}

}  // namespace npupack
