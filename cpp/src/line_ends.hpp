// The padding of a pitch-linear pixel line (docs/nvdla.md §4.4): x-offset bytes before the
// pixels, the stride's tail after them. Both pixel packers zero it line by line, next to the
// pixels, rather than in a fill pass over the plane first.
#pragma once
#include <cstdint>
#include <cstring>

namespace npupack {
namespace detail {

// Zeroes [0, pre) and [pre + row, stride) of `line`; call it before the pixels are written. Where
// both ends are at most 32 bytes in a line of at least 32, each is one fixed 32-byte store at its
// end of the line, which the pixels then overwrite where they cover it: a narrow line's two
// variable-size memset calls cost more than its pixels.
inline void zero_line_ends(unsigned char* line, int64_t stride, int64_t pre, int64_t row) {
  const int64_t tail = stride - pre - row;
  if (stride >= 32 && pre <= 32 && tail <= 32) {
    if (pre > 0) std::memset(line, 0, 32);
    if (tail > 0) std::memset(line + stride - 32, 0, 32);
    return;
  }
  std::memset(line, 0, static_cast<size_t>(pre));
  std::memset(line + pre + row, 0, static_cast<size_t>(tail));
}

}  // namespace detail
}  // namespace npupack
