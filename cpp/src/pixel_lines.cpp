// Interleaved pixel planes (every single-plane format of Table 33): whole lines at once, the
// component order applied by a pixel-shuffle kernel of the list (one byte shuffle per vector),
// the x-offset bytes and line tails zeroed next to the pixels (no separate fill pass).
#include <cstring>

#include "../kernels/kernel.hpp"
#include "line_ends.hpp"
#include "npupack/cpu.hpp"
#include "npupack/parallel.hpp"
#include "npupack/pixel.hpp"

namespace npupack {

namespace {

using kernels::PixelShuffle;
using kernels::make_pixel_shuffle;

// The shuffle kernel of the list (docs/design.md §4.9) for this pixel size and path.
using RowFn = kernels::PixelShuffleFn;
RowFn shuffle_row(KernelPath path, int pixel) { return kernels::select_pixel_shuffle(pixel, path).run; }

void copy_row(const unsigned char* src, unsigned char* dst, int64_t nbytes, const PixelShuffle& s, RowFn shuffled) {
  if (s.identity) {
    std::memcpy(dst, src, static_cast<size_t>(nbytes));
  } else {
    kernels::PixelShuffleArgs a;
    a.src = src;
    a.dst = dst;
    a.nbytes = nbytes;
    a.s = &s;
    shuffled(a);
  }
}

// Lines per parallel piece: at least kParallelBytes of plane per thread before threads pay off.
int64_t line_grain(int64_t line_bytes) { return line_bytes > 0 ? kParallelBytes / line_bytes + 1 : 1; }

}  // namespace

void pack_pixel_lines(const char* img, int64_t h, int64_t w, int m, int eb, const int* order, char* plane,
                      int64_t line_stride, int64_t pre, KernelPath path) {
  const PixelShuffle s = make_pixel_shuffle(m, eb, order);
  const RowFn shuffled = shuffle_row(path, s.pixel);
  const int64_t row = w * s.pixel, src_row = w * s.src_pixel, tail = line_stride - pre - row;
  const auto* src = reinterpret_cast<const unsigned char*>(img);
  auto* dst = reinterpret_cast<unsigned char*>(plane);
  parallel_for(h, line_grain(line_stride), [&](int64_t lo, int64_t hi) {
    if (s.identity && pre == 0 && tail == 0) {  // the plane is the image: one copy
      std::memcpy(dst + lo * row, src + lo * row, static_cast<size_t>((hi - lo) * row));
      return;
    }
    for (int64_t r = lo; r < hi; ++r) {
      unsigned char* line = dst + r * line_stride;
      detail::zero_line_ends(line, line_stride, pre, row);
      copy_row(src + r * src_row, line + pre, row, s, shuffled);
    }
  });
}

void unpack_pixel_lines(const char* plane, int64_t h, int64_t w, int m, int eb, const int* order, int64_t line_stride,
                        int64_t pre, char* img, KernelPath path) {
  // Image component order[j] is plane component j: invert the permutation.
  int from[4] = {};
  for (int j = 0; j < m; ++j) from[order[j]] = j;
  const PixelShuffle s = make_pixel_shuffle(m, eb, from);
  const RowFn shuffled = shuffle_row(path, s.pixel);
  const int64_t row = w * s.pixel;
  const auto* src = reinterpret_cast<const unsigned char*>(plane);
  auto* dst = reinterpret_cast<unsigned char*>(img);
  parallel_for(h, line_grain(line_stride), [&](int64_t lo, int64_t hi) {
    for (int64_t r = lo; r < hi; ++r) copy_row(src + r * line_stride + pre, dst + r * row, row, s, shuffled);
  });
}

}  // namespace npupack
