// Rows of 9..16 16-bit elements read whole, matrices of 8 rows and more: an 8x8 network on both
// 128-bit lanes (columns 0..7 and 8..15), or for 16 rows and more two networks on rows k and
// k + 8.
#include "common.hpp"
#include "narrow_avx2.hpp"

#if defined(__x86_64__) || defined(__i386__)
namespace npupack {
namespace narrow {
#pragma GCC push_options
#pragma GCC target("avx2")
namespace avx2 {
// 8 rows of 16-bit elements, NC (9..16) columns: lane 0 of a row register holds columns 0..7,
// lane 1 columns 8..15, and one 8x8 network transposes both halves.
template <int NC, bool Ends, int64_t Fixed, int Last, class DCur>
__attribute__((always_inline)) inline void block_u16(const Rows<Ends, Fixed, Last>& row, DCur d) {
  using R = V::reg;
  R a[8], out[8];
  for (int k = 0; k < 8; ++k) {
    a[k] = row.is_last(k) ? _mm256_inserti128_si256(_mm256_castsi128_si256(load_row<16>(row, k)),
                                                    load_row<2 * NC - 16>(Rows<true>{row(k) + 16, 0, 0}, 0), 1)
                         : _mm256_loadu_si256(reinterpret_cast<const R*>(row(k)));
  }
  network_8x8_u16(a, out);
  for (int j = 0; j < 8; ++j) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(d[j]), _mm256_castsi256_si128(out[j]));
    if (8 + j < NC) _mm_storeu_si128(reinterpret_cast<__m128i*>(d[8 + j]), _mm256_extracti128_si256(out[j], 1));
  }
}

// Columns 8..NC-1 of row k of 16-bit elements; the last row's read ends at its last element.
template <int NC, bool Ends, int64_t Fixed, int Last>
__attribute__((always_inline)) inline __m128i upper_u16(const Rows<Ends, Fixed, Last>& row, int k) {
  if (row.is_last(k)) return load_row<2 * NC - 16>(Rows<true>{row(k) + 16, 0, 0}, 0);
  return _mm_loadu_si128(reinterpret_cast<const __m128i*>(row(k) + 16));
}

// 16 rows of 16-bit elements, NC (9..16) columns: rows k and k + 8 share a register, one 8x8
// network gives columns 0..7 of all 16 rows (one 32-byte store each) and a second one, pruned to
// its NC - 8 used outputs, columns 8..NC-1. For 3x3 kernels (NC = 9) that is 31 shuffles per 16
// rows where block_u16, whose lane 1 carries only column 8, needs 48.
template <int NC, bool Ends, int64_t Fixed, int Last, class DCur>
__attribute__((always_inline)) inline void block16_u16(const Rows<Ends, Fixed, Last>& row, DCur d) {
  V::reg a[8], out[8];
  for (int k = 0; k < 8; ++k) {
    a[k] = lanes(_mm_loadu_si128(reinterpret_cast<const __m128i*>(row(k))),
                 _mm_loadu_si128(reinterpret_cast<const __m128i*>(row(k + 8))));
  }
  network_8x8_u16(a, out);
  for (int j = 0; j < 8; ++j) V::store(d[j], out[j]);
  for (int k = 0; k < 8; ++k) a[k] = lanes(upper_u16<NC>(row, k), upper_u16<NC>(row, k + 8));
  network_8x8_u16(a, out);
  for (int j = 0; j < NC - 8; ++j) V::store(d[8 + j], out[j]);
}

template <int NC, class DC>
NPUPACK_FLAT void run_u16(RowReader in, DC col, const Batch& batch) {
  if (in.rows >= 16) {
    return over_batch<16>(in, col, batch, [](const RowReader& m, const DC& c, int64_t r) {
      m.block<16, 32, 2 * NC>(r, [&](const auto& row) { block16_u16<NC>(row, c.at(0, 2 * r)); });
    });
  }
  over_batch<8>(in, col, batch, [](const RowReader& m, const DC& c, int64_t r) {
    m.block<8, 32, 2 * NC>(r, [&](const auto& row) { block_u16<NC>(row, c.at(0, 2 * r)); });
  });
}
}  // namespace avx2
#pragma GCC pop_options
}  // namespace narrow

namespace kernels {

bool transpose_x16_8xn_avx2_takes(const TransposeArgs& a) {
  return sides_in(a, kStrided | kToColTable) && a.cols >= 9 && a.cols <= 16 && a.rows >= 8 &&
         a.src_stride >= 2 * a.cols;
}

bool transpose_x16_8xn_avx2(const TransposeArgs& a) {
  on_sides<kStrided | kToColTable>(a, [&a](Strided, auto col) {
    with_count<9, 16>(a.cols, [&](auto nc) { narrow::avx2::run_u16<nc()>(row_reader(a, 2), col, batch_of(a)); });
  });
  return true;
}

}  // namespace kernels
}  // namespace npupack
#endif  // x86
