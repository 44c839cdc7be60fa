// Bytes, 32 rows x 8 columns per step (8..15 columns in practice: wider matrices take the 32x16
// kernel first): two 8x8 byte networks per lane, each column's 32 rows in one store. Streamed: 32
// rows exactly.
#include "common.hpp"
#include "narrow_avx2.hpp"

#if defined(__x86_64__) || defined(__i386__)
namespace npupack {
namespace narrow {
#pragma GCC push_options
#pragma GCC target("avx2")
namespace avx2 {
// 8-bit elements, 32 rows x 8 columns per step (rows >= 32, 8 <= cols < 16; remainders are
// overlapping last steps): rows r..r+15 in lane 0 and r+16..r+31 in lane 1 (8 bytes each, in
// the low half), two 8x8 byte networks per lane, and each column's 32 rows in one store.
template <class SR, class DC>
NPUPACK_FLAT void tall_u8(SR row, DC col, int64_t rows, int64_t cols) {
  using R = V::reg;
  over_blocks<32, 8, 64>(row, col, rows, cols, [](const auto& s, const auto& d) {
    R a[16];
    for (int k = 0; k < 16; ++k) {
      const R lo = _mm256_castsi128_si256(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(s[k])));
      const R hi = _mm256_broadcastq_epi64(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(s[k + 16])));
      a[k] = _mm256_blend_epi32(lo, hi, 0x30);  // lane 1, low 8 bytes
    }
    // t[g][k] = columns 2k, 2k+1 of rows 8g..8g+7 of each lane.
    R t[2][4];
    network_8x8_u8(a, t[0]);
    network_8x8_u8(a + 8, t[1]);
    for (int k = 0; k < 4; ++k) {
      V::put(d, 2 * k, V::lo64(t[0][k], t[1][k]));
      V::put(d, 2 * k + 1, V::hi64(t[0][k], t[1][k]));
    }
  });
}
}  // namespace avx2
#pragma GCC pop_options
}  // namespace narrow

namespace kernels {

bool transpose_x8_32x8_avx2_takes(const TransposeArgs& a) {
  if (sides_of(a) == kStreamed) return a.rows == 32 && a.cols >= 8;
  return a.rows >= 32 && a.cols >= 8;
}

bool transpose_x8_32x8_avx2(const TransposeArgs& a) {
  each_matrix<kAnySides>(a, [&a](auto row, auto col) { narrow::avx2::tall_u8(row, col, a.rows, a.cols); });
  return false;
}

}  // namespace kernels
}  // namespace npupack
#endif  // x86
