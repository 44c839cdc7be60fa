// Bytes, 16x8 blocks (every x86-64): each block writes 16 bytes to each of 8 columns; a matrix
// smaller than a block element by element. Streamed: 16 rows exactly, rows prefetched.
#include "common.hpp"

#if defined(__x86_64__) || defined(__i386__)
namespace npupack {
namespace kernels {

bool transpose_x8_16x8_sse2_takes(const TransposeArgs& a) { return sides_of(a) != kStreamed || a.rows == 16; }

bool transpose_x8_16x8_sse2(const TransposeArgs& a) {
  each_matrix<kAnySides>(a, [&a](auto row, auto col) {
    tile_2d<1>(row, col, a.rows, a.cols, 16, 8, [&](int64_t r, int64_t c) {
      if constexpr (decltype(col.at(0, 0))::kStream) narrow::prefetch_rows<16, 64>(row.at(r, c), c);
      __m128i top[4], bot[4];
      tr8x8_u8(row.at(r, c), top);
      tr8x8_u8(row.at(r + 8, c), bot);
      const auto d = col.at(c, r);
      for (int k = 0; k < 4; ++k) {
        put16(d, 2 * k, _mm_unpacklo_epi64(top[k], bot[k]));
        put16(d, 2 * k + 1, _mm_unpackhi_epi64(top[k], bot[k]));
      }
    });
  });
  return false;
}

}  // namespace kernels
}  // namespace npupack
#endif  // x86
