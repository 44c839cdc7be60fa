// Interleaved pixel planes (every single-plane format of Table 33): whole lines at once, the
// component order applied as one byte shuffle per vector, the x-offset bytes and line tails
// zeroed next to the pixels (no separate fill pass over the plane).
#include <cstring>

#include "npupack/cpu.hpp"
#include "npupack/parallel.hpp"
#include "npupack/pixel.hpp"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace npupack {

namespace {

// A pixel is at most 8 bytes (4 components of 2 bytes). Every pixel size of Table 33 (1, 2, 4,
// 8 bytes) divides 16, so one 16-byte mask moves whole pixels; other sizes take the scalar loop.
constexpr int kMaxPixel = 8;

struct Shuffle {
  int pixel = 0;                // bytes per pixel
  bool identity = true;         // components already in the destination order
  unsigned char byte[kMaxPixel] = {};  // destination byte b of a pixel comes from source byte byte[b]
  alignas(16) unsigned char mask[16] = {};
};

Shuffle make_shuffle(int m, int eb, const int* from) {
  Shuffle s;
  s.pixel = m * eb;
  for (int j = 0; j < m; ++j) {
    for (int b = 0; b < eb; ++b) {
      s.byte[j * eb + b] = static_cast<unsigned char>(from[j] * eb + b);
      if (from[j] != j) s.identity = false;
    }
  }
  for (int i = 0; i < 16; ++i) s.mask[i] = static_cast<unsigned char>(i / s.pixel * s.pixel + s.byte[i % s.pixel]);
  return s;
}

void shuffle_tail(const unsigned char* src, unsigned char* dst, int64_t from, int64_t nbytes, const Shuffle& s) {
  for (int64_t p = from; p < nbytes; p += s.pixel) {
    for (int b = 0; b < s.pixel; ++b) dst[p + b] = src[p + s.byte[b]];
  }
}

using RowFn = void (*)(const unsigned char*, unsigned char*, int64_t, const Shuffle&);

void shuffle_row_scalar(const unsigned char* src, unsigned char* dst, int64_t nbytes, const Shuffle& s) {
  shuffle_tail(src, dst, 0, nbytes, s);
}

#if defined(__x86_64__) || defined(__i386__)
__attribute__((target("ssse3"))) void shuffle_row_ssse3(const unsigned char* src, unsigned char* dst, int64_t nbytes,
                                                        const Shuffle& s) {
  const __m128i mask = _mm_load_si128(reinterpret_cast<const __m128i*>(s.mask));
  int64_t i = 0;
  for (; i + 16 <= nbytes; i += 16) {
    const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i), _mm_shuffle_epi8(v, mask));
  }
  shuffle_tail(src, dst, i, nbytes, s);
}

__attribute__((target("avx2"))) void shuffle_row_avx2(const unsigned char* src, unsigned char* dst, int64_t nbytes,
                                                      const Shuffle& s) {
  // vpshufb works within each 16-byte lane, so the same mask serves both lanes.
  const __m256i mask = _mm256_broadcastsi128_si256(_mm_load_si128(reinterpret_cast<const __m128i*>(s.mask)));
  int64_t i = 0;
  for (; i + 64 <= nbytes; i += 64) {
    const __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i));
    const __m256i b = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i + 32));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i), _mm256_shuffle_epi8(a, mask));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i + 32), _mm256_shuffle_epi8(b, mask));
  }
  for (; i + 16 <= nbytes; i += 16) {
    const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i), _mm_shuffle_epi8(v, _mm256_castsi256_si128(mask)));
  }
  shuffle_tail(src, dst, i, nbytes, s);
}
#endif

RowFn shuffle_row(KernelPath path, int pixel) {
  // The vector kernels move whole pixels per 16 bytes (pixels of 1, 2, 4 or 8 bytes).
  if (16 % pixel != 0) return shuffle_row_scalar;
#if defined(__x86_64__) || defined(__i386__)
  if (allows(path, KernelPath::kAvx2) && cpu().avx2) return shuffle_row_avx2;
  if (allows(path, KernelPath::kSsse3) && cpu().ssse3) return shuffle_row_ssse3;
#else
  (void)path;
#endif
  return shuffle_row_scalar;
}

void copy_row(const unsigned char* src, unsigned char* dst, int64_t nbytes, const Shuffle& s, RowFn shuffled) {
  if (s.identity) {
    std::memcpy(dst, src, static_cast<size_t>(nbytes));
  } else {
    shuffled(src, dst, nbytes, s);
  }
}

// Lines per parallel piece: at least kParallelBytes of plane per thread before threads pay off.
int64_t line_grain(int64_t line_bytes) { return line_bytes > 0 ? kParallelBytes / line_bytes + 1 : 1; }

}  // namespace

void pack_pixel_lines(const char* img, int64_t h, int64_t w, int m, int eb, const int* order, char* plane,
                      int64_t line_stride, int64_t pre, KernelPath path) {
  const Shuffle s = make_shuffle(m, eb, order);
  const RowFn shuffled = shuffle_row(path, s.pixel);
  const int64_t row = w * s.pixel, tail = line_stride - pre - row;
  const auto* src = reinterpret_cast<const unsigned char*>(img);
  auto* dst = reinterpret_cast<unsigned char*>(plane);
  parallel_for(h, line_grain(line_stride), [&](int64_t lo, int64_t hi) {
    if (s.identity && pre == 0 && tail == 0) {  // the plane is the image: one copy
      std::memcpy(dst + lo * row, src + lo * row, static_cast<size_t>((hi - lo) * row));
      return;
    }
    for (int64_t r = lo; r < hi; ++r) {
      unsigned char* line = dst + r * line_stride;
      std::memset(line, 0, static_cast<size_t>(pre));
      copy_row(src + r * row, line + pre, row, s, shuffled);
      std::memset(line + pre + row, 0, static_cast<size_t>(tail));
    }
  });
}

void unpack_pixel_lines(const char* plane, int64_t h, int64_t w, int m, int eb, const int* order, int64_t line_stride,
                        int64_t pre, char* img, KernelPath path) {
  // Image component order[j] is plane component j: invert the permutation.
  int from[4] = {};
  for (int j = 0; j < m; ++j) from[order[j]] = j;
  const Shuffle s = make_shuffle(m, eb, from);
  const RowFn shuffled = shuffle_row(path, s.pixel);
  const int64_t row = w * s.pixel;
  const auto* src = reinterpret_cast<const unsigned char*>(plane);
  auto* dst = reinterpret_cast<unsigned char*>(img);
  parallel_for(h, line_grain(line_stride), [&](int64_t lo, int64_t hi) {
    for (int64_t r = lo; r < hi; ++r) copy_row(src + r * line_stride + pre, dst + r * row, row, s, shuffled);
  });
}

}  // namespace npupack
