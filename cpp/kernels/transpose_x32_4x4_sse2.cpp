// 32-bit elements, 4x4 blocks (every x86-64): two rounds of unpacks; a matrix smaller than a block
// element by element.
#include "common.hpp"

#if defined(__x86_64__) || defined(__i386__)
namespace npupack {
namespace kernels {

bool transpose_x32_4x4_sse2_takes(const TransposeArgs& a) { return sides_of(a) != kStreamed; }

bool transpose_x32_4x4_sse2(const TransposeArgs& a) {
  each_matrix<kAnySides & ~kStreamed>(a, [&a](auto row, auto col) {
    tile_2d<4>(row, col, a.rows, a.cols, 4, 4, [&](int64_t r, int64_t c) {
      const auto s = row.at(r, 4 * c);
      const __m128i a0 = load16(s[0]), a1 = load16(s[1]), a2 = load16(s[2]), a3 = load16(s[3]);
      const __m128i b0 = _mm_unpacklo_epi32(a0, a1), b1 = _mm_unpackhi_epi32(a0, a1);
      const __m128i b2 = _mm_unpacklo_epi32(a2, a3), b3 = _mm_unpackhi_epi32(a2, a3);
      const auto d = col.at(c, 4 * r);
      store16(d[0], _mm_unpacklo_epi64(b0, b2));
      store16(d[1], _mm_unpackhi_epi64(b0, b2));
      store16(d[2], _mm_unpacklo_epi64(b1, b3));
      store16(d[3], _mm_unpackhi_epi64(b1, b3));
    });
  });
  return false;
}

}  // namespace kernels
}  // namespace npupack
#endif  // x86
