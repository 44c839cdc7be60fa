// NVDLA 10-bit packed pixel formats (T_A2B10G10R10 and friends): one little-endian 32-bit word
// per pixel with the components at given bit positions. Spec docs/nvdla.md §4.3.
#pragma once
#include <cstdint>

#include "npupack/cpu.hpp"

namespace npupack {

// comps: `pixels` * 4 values (c0, c1, c2, alpha); shifts: bit position of each. Writes one word
// per pixel. Returns the index of the first pixel with a colour > 1023 or alpha > 3 (words from
// there on are undefined), or -1.
int64_t pack_10bit(const uint16_t* comps, int64_t pixels, const int* shifts, uint32_t* words);
void unpack_10bit(const uint32_t* words, int64_t pixels, const int* shifts, uint16_t* comps);

// Semi-planar N444 formats: split an (h, w) image of (Y, U, V) triples of `eb`-byte components
// (rows `src_row` bytes apart) straight into the Y plane and the UV plane (pairs in memory order:
// V, U when `v_first`, else U, V), each line at its line stride after `pre` bytes of x offset.
// Every byte of the h lines of both planes is written: the x-offset bytes and line tails are 0.
void split_yuv444(const char* yuv, int64_t h, int64_t w, int64_t src_row, int64_t eb, bool v_first, char* y,
                  int64_t y_stride, int64_t y_pre, char* uv, int64_t uv_stride, int64_t uv_pre);

// Interleaved (single-plane) formats: h lines of w pixels of m <= 4 components of eb bytes
// (m * eb <= 8), from a C-contiguous (h, w, m') image to lines `line_stride` bytes apart, each
// after `pre` bytes of x offset. Plane component j is image component order[j], or 0 where
// order[j] is negative (the X component of an image given three); m' is the count of the
// others. Every byte of the h lines is written: the x-offset bytes and line tails are 0.
// `path` picks the shuffle kernel (tests force each one).
void pack_pixel_lines(const char* img, int64_t h, int64_t w, int m, int eb, const int* order, char* plane,
                      int64_t line_stride, int64_t pre, KernelPath path = KernelPath::kAuto);
// The inverse: the pixels of each line back into a C-contiguous (h, w, m) image.
void unpack_pixel_lines(const char* plane, int64_t h, int64_t w, int m, int eb, const int* order, int64_t line_stride,
                        int64_t pre, char* img, KernelPath path = KernelPath::kAuto);

}  // namespace npupack
