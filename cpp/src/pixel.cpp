#include "npupack/pixel.hpp"

#include <cstring>

#include "../kernels/kernel.hpp"
#include "line_ends.hpp"
#include "npupack/cpu.hpp"
#include "npupack/parallel.hpp"

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

// Y and UV lines of each row, the row split by the yuv-split kernel of the list (docs/design.md
// §4.9) for this element size; rows in parallel pieces as pack_pixel_lines.
void split_plane(const char* yuv, int64_t h, int64_t w, int64_t src_row, int64_t eb, bool v_first, char* y,
                 int64_t y_stride, int64_t y_pre, char* uv, int64_t uv_stride, int64_t uv_pre) {
  const kernels::YuvSplitFn row = kernels::select_yuv_split(static_cast<int>(eb)).run;
  const int64_t y_row = w * eb, uv_row = 2 * y_row;
  const int64_t line_bytes = y_stride + uv_stride;
  const int64_t grain = line_bytes > 0 ? kParallelBytes / line_bytes + 1 : 1;
  parallel_for(h, grain, [&](int64_t lo, int64_t hi) {
    kernels::YuvSplitArgs a;
    a.n = w;
    a.v_first = v_first;
    for (int64_t r = lo; r < hi; ++r) {
      auto* yl = reinterpret_cast<unsigned char*>(y + r * y_stride);
      auto* ul = reinterpret_cast<unsigned char*>(uv + r * uv_stride);
      detail::zero_line_ends(yl, y_stride, y_pre, y_row);
      detail::zero_line_ends(ul, uv_stride, uv_pre, uv_row);
      a.yuv = yuv + r * src_row;
      a.y = reinterpret_cast<char*>(yl + y_pre);
      a.uv = reinterpret_cast<char*>(ul + uv_pre);
      row(a);
    }
  });
}

}  // namespace

void split_yuv444(const char* yuv, int64_t h, int64_t w, int64_t src_row, int64_t eb, bool v_first, char* y,
                  int64_t y_stride, int64_t y_pre, char* uv, int64_t uv_stride, int64_t uv_pre) {
  split_plane(yuv, h, w, src_row, eb == 1 ? 1 : 2, v_first, y, y_stride, y_pre, uv, uv_stride, uv_pre);
}

}  // namespace npupack
