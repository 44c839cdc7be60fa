// The component order of interleaved pixel lines as a byte shuffle (pixel_lines.cpp), shared by
// the pixel-shuffle kernels: the per-pixel table of the scalar loop and the 16-byte mask of the
// vector ones, zeros for the X component when the image has three. Internal to the extension.
#pragma once
#include <cstdint>

namespace npupack {
namespace kernels {

// A pixel is at most 8 bytes (4 components of 2 bytes). Every pixel size of Table 33 (1, 2, 4,
// 8 bytes) divides 16, so one 16-byte mask moves whole pixels; other sizes take the scalar kernel.
constexpr int kMaxPixel = 8;
// A destination byte with no source byte (the X component of an X format given three
// components): written as 0. pshufb writes 0 for a mask byte with its top bit set.
constexpr unsigned char kZeroByte = 0x80;

struct PixelShuffle {
  int pixel = 0;                       // bytes per destination pixel
  int src_pixel = 0;                   // bytes per source pixel: pixel, or fewer when zeros are added
  bool identity = true;                // components already in the destination order
  unsigned char byte[kMaxPixel] = {};  // destination byte b of a pixel comes from source byte byte[b]
  alignas(16) unsigned char mask[16] = {};
};

// The shuffle that puts source component from[j] of m components of eb bytes at component j; a
// negative from[j] writes zeros there, and the source pixel has only the m_src components that
// are named (m_src = m when none is negative).
inline PixelShuffle make_pixel_shuffle(int m, int eb, const int* from) {
  PixelShuffle s;
  s.pixel = m * eb;
  int m_src = 0;
  for (int j = 0; j < m; ++j) {
    if (from[j] >= 0) ++m_src;
    for (int b = 0; b < eb; ++b) {
      s.byte[j * eb + b] = from[j] < 0 ? kZeroByte : static_cast<unsigned char>(from[j] * eb + b);
    }
    if (from[j] != j) s.identity = false;
  }
  s.src_pixel = m_src * eb;
  for (int i = 0; i < 16; ++i) {
    const unsigned char b = s.byte[i % s.pixel];
    s.mask[i] = b == kZeroByte ? kZeroByte : static_cast<unsigned char>(i / s.pixel * s.src_pixel + b);
  }
  return s;
}

// Source bytes of the nbytes destination bytes (whole pixels).
inline int64_t pixel_source_bytes(int64_t nbytes, const PixelShuffle& s) { return nbytes / s.pixel * s.src_pixel; }

// Pixels from destination byte `from` (a whole pixel) to nbytes one by one: the scalar kernel,
// and the vector kernels' tail.
inline void pixel_shuffle_tail(const unsigned char* src, unsigned char* dst, int64_t from, int64_t nbytes,
                               const PixelShuffle& s) {
  for (int64_t p = from, q = pixel_source_bytes(from, s); p < nbytes; p += s.pixel, q += s.src_pixel) {
    for (int b = 0; b < s.pixel; ++b) dst[p + b] = s.byte[b] == kZeroByte ? 0 : src[q + s.byte[b]];
  }
}

// The vector kernels' 16-byte steps from destination byte i (source byte pixel_source_bytes(i)):
// each reads 16 source bytes, so where zeros are added (fewer source bytes a step: 12 for three
// components of four) the steps stop before a read would pass the source. Returns how many
// steps stay inside both buffers.
inline int64_t pixel_vector_steps(int64_t i, int64_t nbytes, const PixelShuffle& s) {
  const int64_t src_step = 16 / s.pixel * s.src_pixel;
  const int64_t by_dst = (nbytes - i) / 16;
  const int64_t src_left = pixel_source_bytes(nbytes, s) - pixel_source_bytes(i, s);
  const int64_t by_src = src_left < 16 ? 0 : (src_left - 16) / src_step + 1;
  return by_dst < by_src ? by_dst : by_src;
}

}  // namespace kernels
}  // namespace npupack
