// 32-bit elements, 4x4 blocks (every x86-64): two rounds of unpacks; a matrix smaller than a block
// element by element; up to 16 rows, column blocks outermost; 64-byte columns from a table streamed
// where asked.
#include "common.hpp"

#if defined(__x86_64__) || defined(__i386__)
namespace npupack {
namespace kernels {

// Streamed: 16 rows, so that each column is one 64-byte line written whole by one column step,
// and every column starting a line (common.hpp whole_lines).
bool transpose_x32_4x4_sse2_takes(const TransposeArgs& a) {
  return sides_of(a) != kStreamed || (whole_lines(a, 16) && a.rows == 16 && a.cols >= 4);
}

namespace {

// A streamed call with a column table (the column group of OIhw16i16o f32) whose 16 rows make
// each column one 64-byte line, written whole by one column step below: every column starting a
// line takes non-temporal stores, which need not read the line in first.
bool table_lines(const TransposeArgs& a) {
  if (!a.stream || sides_of(a) != kToColTable || a.rows != 16) return false;
  if (reinterpret_cast<uintptr_t>(a.dst) % 64 != 0 || (a.count > 1 && a.dst_step % 64 != 0)) return false;
  for (int64_t c = 0; c < a.cols; ++c) {
    if (a.dst_cols[c] % 64 != 0) return false;
  }
  return true;
}

}  // namespace

bool transpose_x32_4x4_sse2(const TransposeArgs& a) {
  const auto run = [&a](auto row, auto col) {
    const auto block = [&](int64_t r, int64_t c) {
      const auto s = row.at(r, 4 * c);
      const __m128i a0 = load16(s[0]), a1 = load16(s[1]), a2 = load16(s[2]), a3 = load16(s[3]);
      const __m128i b0 = _mm_unpacklo_epi32(a0, a1), b1 = _mm_unpackhi_epi32(a0, a1);
      const __m128i b2 = _mm_unpacklo_epi32(a2, a3), b3 = _mm_unpackhi_epi32(a2, a3);
      const auto d = col.at(c, 4 * r);
      put16(d, 0, _mm_unpacklo_epi64(b0, b2));
      put16(d, 1, _mm_unpackhi_epi64(b0, b2));
      put16(d, 2, _mm_unpacklo_epi64(b1, b3));
      put16(d, 3, _mm_unpackhi_epi64(b1, b3));
    };
    if (a.rows >= 4 && a.rows <= 16 && a.cols >= 4) {
      // A channel block of 16 rows (nChw16c f32) over a plane of columns: all rows of 4 columns
      // per step, so that each column (64 bytes, one line) is written whole at once rather than
      // in one 16-byte part per 4-row pass over the plane, 4x the write traffic past the caches.
      over_steps(a.cols, 4, [&](int64_t c) { over_steps(a.rows, 4, [&](int64_t r) { block(r, c); }); });
    } else {
      tile_2d<4>(row, col, a.rows, a.cols, 4, 4, block);
    }
  };
  if (table_lines(a)) {
    for_each_matrix(Strided{a.src, a.src_stride}, StreamTableOut{a.dst, a.dst_cols}, batch_of(a), run);
  } else {
    each_matrix<kAnySides>(a, run);
  }
  return false;
}

}  // namespace kernels
}  // namespace npupack
#endif  // x86
