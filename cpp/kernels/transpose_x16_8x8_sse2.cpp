// 16-bit elements, 8x8 blocks (every x86-64): each block writes 16 bytes to each of 8 columns; a
// matrix smaller than a block element by element. Streamed: 8 rows exactly, rows prefetched.
#include "common.hpp"

#if defined(__x86_64__) || defined(__i386__)
namespace npupack {
namespace kernels {

bool transpose_x16_8x8_sse2_takes(const TransposeArgs& a) { return sides_of(a) != kStreamed || a.rows == 8; }

bool transpose_x16_8x8_sse2(const TransposeArgs& a) {
  each_matrix<kAnySides>(a, [&a](auto row, auto col) {
    tile_2d<2>(row, col, a.rows, a.cols, 8, 8, [&](int64_t r, int64_t c) {
      __m128i a[8], out[8];
      const auto s = row.at(r, 2 * c);
      if constexpr (decltype(col.at(0, 0))::kStream) narrow::prefetch_rows<8, 32>(s, c);
      for (int k = 0; k < 8; ++k) a[k] = load16(s[k]);
      narrow::sse2::network_8x8_u16(a, out);
      const auto d = col.at(c, 2 * r);
      for (int k = 0; k < 8; ++k) put16(d, k, out[k]);
    });
  });
  return false;
}

}  // namespace kernels
}  // namespace npupack
#endif  // x86
