// 2..7 columns of 16-bit elements whose rows are back to back (NVDLA DC weights of 1xN, Nx1 and
// 2x2 kernels), 8 rows and more: 8 rows are N registers, and each column register is
// built from them by one pshufb each (shuffle.hpp).
#include "shuffle.hpp"

#if defined(__x86_64__) || defined(__i386__)
namespace npupack {
namespace kernels {

bool transpose_x16_8xn_ssse3_takes(const TransposeArgs& a) {
  return sides_in(a, kStrided | kToColTable) && a.cols >= 2 && a.cols <= 7 && a.rows >= 8 &&
         a.src_stride == a.cols * 2;
}

bool transpose_x16_8xn_ssse3(const TransposeArgs& a) {
  on_sides<kStrided | kToColTable>(a, [&a](Strided row, auto col) {
    with_count<2, 7>(a.cols, [&](auto n) { gather_columns<n(), 2>(row, col, a.rows, batch_of(a)); });
  });
  return false;
}

}  // namespace kernels
}  // namespace npupack
#endif  // x86
