// Bytes, 32 rows x 16 columns per step (NVDLA int8 feature data, b_fs_yx_fsv32 int8
// activations: 32 channels x H*W): rows r..r+15 in lane 0 and r+16..r+31 in lane 1, the whole
// byte network on both lanes, each column's 32 rows in one store. Streamed: 32 rows exactly.
#include "common.hpp"
#include "narrow_avx2.hpp"

#if defined(__x86_64__) || defined(__i386__)
namespace npupack {
namespace narrow {
#pragma GCC push_options
#pragma GCC target("avx2")
namespace avx2 {
// 8-bit elements, 32 rows x 16 columns per step (rows >= 32, cols >= 16; NVDLA int8 feature data
// and b_fs_yx_fsv32 int8 activations: 32 channels x H*W): rows r..r+15 in lane 0 and r+16..r+31
// in lane 1, 16 bytes each, the whole byte network on both lanes (block_u8), and each column's 32
// rows in one store. Against tall_u8's 8 columns per step, each row is read in half as many
// loads and the blends that join the lanes are halved, for 8 more shuffles per 256 bytes, a net
// gain. Its own entry point: folded into tall_u8 behind a column test, the one flattened
// function is slower.
namespace tall {
struct V : avx2::V {
  template <int Bytes, class Cur>
  NPUPACK_AI reg load(const Cur& s, int k) {
    return lanes(_mm_loadu_si128(reinterpret_cast<const __m128i*>(s[k])),
                 _mm_loadu_si128(reinterpret_cast<const __m128i*>(s[k + 16])));
  }
  template <class Cur>
  NPUPACK_AI void store(ColumnOf<Cur> c, reg v) { put(*c.d, c.j, v); }
};
#include "network.inc"
}  // namespace tall

template <class SR, class DC>
NPUPACK_FLAT void tall16_u8(SR row, DC col, int64_t rows, int64_t cols) {
  over_blocks<32, 16, 64>(row, col, rows, cols, [](const auto& s, const auto& d) {
    tall::block_u8<16>(s, Columns<std::decay_t<decltype(d)>>{d});
  });
}
}  // namespace avx2
#pragma GCC pop_options
}  // namespace narrow

namespace kernels {

bool transpose_x8_32x16_avx2_takes(const TransposeArgs& a) {
  if (sides_of(a) == kStreamed) return a.rows == 32 && a.cols >= 16;
  return a.rows >= 32 && a.cols >= 16;
}

bool transpose_x8_32x16_avx2(const TransposeArgs& a) {
  each_matrix<kAnySides>(a, [&a](auto row, auto col) { narrow::avx2::tall16_u8(row, col, a.rows, a.cols); });
  return false;
}

}  // namespace kernels
}  // namespace npupack
#endif  // x86
