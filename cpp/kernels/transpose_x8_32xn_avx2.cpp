// Rows of 9..16 bytes read whole, matrices of 32 rows and more: the byte transpose network on
// both 128-bit lanes (rows r..r+15 and r+16..r+31), unused outputs pruned per column count
// (narrow.hpp, network.inc).
#include "common.hpp"
#include "narrow_avx2.hpp"

#if defined(__x86_64__) || defined(__i386__)
namespace npupack {
namespace kernels {

bool transpose_x8_32xn_avx2_takes(const TransposeArgs& a) {
  return sides_in(a, kStrided | kToColTable) && a.cols >= 9 && a.cols <= 16 && a.rows >= 32 &&
         a.src_stride >= a.cols;
}

bool transpose_x8_32xn_avx2(const TransposeArgs& a) {
  on_sides<kStrided | kToColTable>(a, [&a](Strided, auto col) {
    with_count<9, 16>(a.cols, [&](auto nc) { narrow::avx2::run_u8<nc()>(row_reader(a, 1), col, batch_of(a)); });
  });
  return true;
}

}  // namespace kernels
}  // namespace npupack
#endif  // x86
