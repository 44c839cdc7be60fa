// Bytes, 16 rows x 32 columns per step (b_fs_yx_fsv16 activations: 16 channels x H*W): row k's 32
// bytes in one load, columns c..c+15 in lane 0 and c+16..c+31 in lane 1, the 16-row byte network
// on both. Streamed: 16 rows exactly.
#include "common.hpp"
#include "narrow_avx2.hpp"

#if defined(__x86_64__) || defined(__i386__)
namespace npupack {
namespace narrow {
#pragma GCC push_options
#pragma GCC target("avx2")
namespace avx2 {
// 8-bit elements, 16 to 31 rows (b_fs_yx_fsv16 activations: 16 channels x H*W), 32 columns per
// step (cols >= 32): row k's 32 bytes are one load, columns c..c+15 in lane 0 and c+16..c+31 in
// lane 1, and the 16-row byte network on both lanes gives columns j and j + 16 in one register
// (two 16-byte stores). 64 shuffles per 512 bytes where the SSE2 16x8 blocks need 128.
namespace wide {
struct V : avx2::V {
  template <int Bytes, class Cur>
  NPUPACK_AI reg load(const Cur& s, int k) { return _mm256_loadu_si256(reinterpret_cast<const reg*>(s[k])); }
  // Column j of the step: lane 0 goes to column j, lane 1 to column j + 16 of cursor d.
  template <class Cur>
  NPUPACK_AI void store(ColumnOf<Cur> c, reg v) {
    put16(*c.d, c.j, _mm256_castsi256_si128(v));
    put16(*c.d, c.j + 16, _mm256_extracti128_si256(v, 1));
  }
};
#include "network.inc"
}  // namespace wide

template <class SR, class DC>
NPUPACK_FLAT void wide16_u8(SR row, DC col, int64_t rows, int64_t cols) {
  over_blocks<16, 32, 64>(row, col, rows, cols, [](const auto& s, const auto& d) {
    wide::block_u8<16>(s, Columns<std::decay_t<decltype(d)>>{d});
  });
}
}  // namespace avx2
#pragma GCC pop_options
}  // namespace narrow

namespace kernels {

bool transpose_x8_16x32_avx2_takes(const TransposeArgs& a) {
  if (sides_of(a) == kStreamed) return a.rows == 16 && a.cols >= 32;
  return a.rows >= 16 && a.cols >= 32;
}

bool transpose_x8_16x32_avx2(const TransposeArgs& a) {
  each_matrix<kAnySides>(a, [&a](auto row, auto col) { narrow::avx2::wide16_u8(row, col, a.rows, a.cols); });
  return false;
}

}  // namespace kernels
}  // namespace npupack
#endif  // x86
