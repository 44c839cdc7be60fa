// 32-bit elements, 4x4 blocks (every x86-64): two rounds of unpacks; a matrix smaller than a block
// element by element; up to 16 rows, column blocks outermost.
#include "common.hpp"

#if defined(__x86_64__) || defined(__i386__)
namespace npupack {
namespace kernels {

bool transpose_x32_4x4_sse2_takes(const TransposeArgs& a) { return sides_of(a) != kStreamed; }

bool transpose_x32_4x4_sse2(const TransposeArgs& a) {
  each_matrix<kAnySides & ~kStreamed>(a, [&a](auto row, auto col) {
    const auto block = [&](int64_t r, int64_t c) {
      const auto s = row.at(r, 4 * c);
      const __m128i a0 = load16(s[0]), a1 = load16(s[1]), a2 = load16(s[2]), a3 = load16(s[3]);
      const __m128i b0 = _mm_unpacklo_epi32(a0, a1), b1 = _mm_unpackhi_epi32(a0, a1);
      const __m128i b2 = _mm_unpacklo_epi32(a2, a3), b3 = _mm_unpackhi_epi32(a2, a3);
      const auto d = col.at(c, 4 * r);
      store16(d[0], _mm_unpacklo_epi64(b0, b2));
      store16(d[1], _mm_unpackhi_epi64(b0, b2));
      store16(d[2], _mm_unpacklo_epi64(b1, b3));
      store16(d[3], _mm_unpackhi_epi64(b1, b3));
    };
    if (a.rows >= 4 && a.rows <= 16 && a.cols >= 4) {
      // A channel block of 16 rows (nChw16c f32) over a plane of columns: all rows of 4 columns
      // per step, so that each column (64 bytes, one line) is written whole at once rather than
      // in one 16-byte part per 4-row pass over the plane, 4x the write traffic past the caches.
      over_steps(a.cols, 4, [&](int64_t c) { over_steps(a.rows, 4, [&](int64_t r) { block(r, c); }); });
    } else {
      tile_2d<4>(row, col, a.rows, a.cols, 4, 4, block);
    }
  });
  return false;
}

}  // namespace kernels
}  // namespace npupack
#endif  // x86
