// 3, 5, 6 or 7 rows of 16-bit elements interleaved into back-to-back columns (unpacking the DC
// weights of 1xN, Nx1 and 2x2 kernels), 8 columns and more: the inverse of the gather kernel,
// 8 columns per step (shuffle.hpp).
#include "shuffle.hpp"

#if defined(__x86_64__) || defined(__i386__)
namespace npupack {
namespace kernels {

bool transpose_x16_nx8_ssse3_takes(const TransposeArgs& a) {
  return sides_in(a, kStrided | kFromRowTable | kFromRowPtrs) && (a.rows == 3 || (a.rows >= 5 && a.rows <= 7)) &&
         a.cols >= 8;
}

bool transpose_x16_nx8_ssse3(const TransposeArgs& a) {
  on_sides<kStrided | kFromRowTable | kFromRowPtrs>(a, [&a](auto row, StridedOut col) {
    with_count<3, 7>(a.rows, [&](auto n) {
      if constexpr (n() != 4) spread_rows<n(), 2>(row, col, a.cols, batch_of(a));
    });
  });
  return false;
}

}  // namespace kernels
}  // namespace npupack
#endif  // x86
