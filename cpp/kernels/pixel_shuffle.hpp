// The component order of interleaved pixel lines as a byte shuffle (pixel_lines.cpp), shared by
// the pixel-shuffle kernels: the per-pixel table of the scalar loop and the 16-byte mask of the
// vector ones. Internal to the extension.
#pragma once
#include <cstdint>

namespace npupack {
namespace kernels {

// A pixel is at most 8 bytes (4 components of 2 bytes). Every pixel size of Table 33 (1, 2, 4,
// 8 bytes) divides 16, so one 16-byte mask moves whole pixels; other sizes take the scalar kernel.
constexpr int kMaxPixel = 8;

struct PixelShuffle {
  int pixel = 0;                       // bytes per pixel
  bool identity = true;                // components already in the destination order
  unsigned char byte[kMaxPixel] = {};  // destination byte b of a pixel comes from source byte byte[b]
  alignas(16) unsigned char mask[16] = {};
};

// The shuffle that puts source component from[j] of m components of eb bytes at component j.
inline PixelShuffle make_pixel_shuffle(int m, int eb, const int* from) {
  PixelShuffle s;
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

// Pixels from byte `from` to nbytes one by one: the scalar kernel, and the vector kernels' tail.
inline void pixel_shuffle_tail(const unsigned char* src, unsigned char* dst, int64_t from, int64_t nbytes,
                               const PixelShuffle& s) {
  for (int64_t p = from; p < nbytes; p += s.pixel) {
    for (int b = 0; b < s.pixel; ++b) dst[p + b] = src[p + s.byte[b]];
  }
}

}  // namespace kernels
}  // namespace npupack
