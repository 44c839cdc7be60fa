// Bytes, 8x8 blocks for matrices of fewer than 16 rows (8-byte atoms, short channel blocks): each
// block writes 8 bytes to each of 8 columns; a matrix smaller than a block element by element.
#include "common.hpp"

#if defined(__x86_64__) || defined(__i386__)
namespace npupack {
namespace kernels {

bool transpose_x8_8x8_sse2_takes(const TransposeArgs& a) { return sides_of(a) != kStreamed && a.rows < 16; }

bool transpose_x8_8x8_sse2(const TransposeArgs& a) {
  each_matrix<kAnySides & ~kStreamed>(a, [&a](auto row, auto col) {
    tile_2d<1>(row, col, a.rows, a.cols, 8, 8, [&](int64_t r, int64_t c) {
      __m128i t[4];
      tr8x8_u8(row.at(r, c), t);
      const auto d = col.at(c, r);
      for (int k = 0; k < 4; ++k) {
        store8(d[2 * k], t[k]);
        store8(d[2 * k + 1], _mm_unpackhi_epi64(t[k], t[k]));
      }
    });
  });
  return false;
}

}  // namespace kernels
}  // namespace npupack
#endif  // x86
