// 16-bit elements, 16 rows x 8 columns per step: rows r..r+7 in lane 0 and r+8..r+15 in lane 1,
// one 8x8 network for both, each column's 16 rows in one store; 32 rows (b_fs_yx_fsv32 fp16) both
// halves of a column per step. Streamed: 16 or 32 rows. The finite form also tests every half
// moved for fp16 INF / NaN, for single matrices (not through transpose_batch_finite16) of other than 9..16 columns (those take the
// narrow kernels, of which only the 3x3 rotations test).
#include "common.hpp"
#include "narrow_avx2.hpp"

#if defined(__x86_64__) || defined(__i386__)
namespace npupack {
namespace narrow {
#pragma GCC push_options
#pragma GCC target("avx2")
namespace avx2 {
// tall_u16's loop; Watch: test the halves moved (see tall_u16).
template <bool Watch, class SR, class DC>
NPUPACK_AI void tall_u16_loop(SR row, DC col, int64_t rows, int64_t cols, bool* nonfinite) {
  using R = V::reg;
  R largest = _mm256_setzero_si256();
  const auto step = [&](int64_t r, int64_t c) {
    const auto s = row.at(r, 2 * c);
    // Past the caches (streamed), and for 32 rows (b_fs_yx_fsv32 fp16 activations) in L3 too,
    // more rows are read at once than the hardware prefetchers follow, so they are prefetched.
    if (decltype(col.at(0, 0))::kStream || rows == 32) prefetch_rows<16, 32>(s, c);
    R a[8], out[8];
    for (int k = 0; k < 8; ++k) {
      a[k] = lanes(_mm_loadu_si128(reinterpret_cast<const __m128i*>(s[k])),
                   _mm_loadu_si128(reinterpret_cast<const __m128i*>(s[k + 8])));
      if constexpr (Watch) largest = watch_halves(largest, a[k]);
    }
    network_8x8_u16(a, out);
    const auto d = col.at(c, 2 * r);
    for (int j = 0; j < 8; ++j) V::put(d, j, out[j]);
  };
  if (rows == 32) {
    // 64-byte columns (b_fs_yx_fsv32 fp16 activations): both halves of a column in one step, so
    // that each line is written whole while it is in L1, not once per 16-row pass over a
    // plane's worth of columns. Streamed, each line's two non-temporal stores come 8 stores
    // apart, and the line leaves the write-combining buffer whole.
    over_rows(cols, 8, [&](int64_t c) {
      step(0, c);
      step(16, c);
    });
  } else {
    over_rows(rows, 16, [&](int64_t r) { over_rows(cols, 8, [&](int64_t c) { step(r, c); }); });
  }
  if constexpr (Watch) *nonfinite = any_nonfinite(largest);
}

// 16-bit elements, 16 rows x 8 columns per step (rows >= 16, cols >= 8; remainders are
// overlapping last steps): rows r..r+7 in lane 0 and r+8..r+15 in lane 1, one 8x8 network for
// both, and each column's 16 rows (32 bytes, consecutive in the destination) in one store. Half
// the shuffles per byte of the SSE2 8x8 blocks. Cursors as in transpose.cpp.
// With a non-null `nonfinite` (fp16 input packed by pack_checked) every half moved is also
// tested for INF/NaN (watch_halves).
template <class SR, class DC>
NPUPACK_FLAT void tall_u16(SR row, DC col, int64_t rows, int64_t cols, bool* nonfinite = nullptr) {
  if (nonfinite) {
    tall_u16_loop<true>(row, col, rows, cols, nonfinite);
  } else {
    tall_u16_loop<false>(row, col, rows, cols, nullptr);
  }
}
}  // namespace avx2
#pragma GCC pop_options
}  // namespace narrow

namespace kernels {

bool transpose_x16_16x8_avx2_takes(const TransposeArgs& a) {
  if (sides_of(a) == kStreamed) return (a.rows == 16 || a.rows == 32);
  return a.rows >= 16 && a.cols >= 8;
}

bool transpose_x16_16x8_avx2(const TransposeArgs& a) {
  each_matrix<kAnySides>(a, [&a](auto row, auto col) { narrow::avx2::tall_u16(row, col, a.rows, a.cols); });
  return false;
}

bool transpose_finite_x16_16x8_avx2_takes(const TransposeArgs& a) {
  if (a.batch || a.count != 1 || a.rows < 16 || a.cols < 8) return false;
  if (sides_of(a) == kStreamed) {
    return a.rows == 16 && a.dst_stride == 32 && reinterpret_cast<uintptr_t>(a.dst) % 16 == 0;
  }
  return sides_of(a) == kStrided && (a.cols < 9 || a.cols > 16);
}

bool transpose_finite_x16_16x8_avx2(const TransposeArgs& a) {
  bool nonfinite = false;
  on_sides<kStrided | kStreamed>(a, [&](Strided row, auto col) {
    narrow::avx2::tall_u16(row, col, a.rows, a.cols, &nonfinite);
  });
  *a.nonfinite = nonfinite;
  return false;
}

}  // namespace kernels
}  // namespace npupack
#endif  // x86
