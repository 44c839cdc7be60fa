// 2 rows of 8-bit elements interleaved into their columns (2-byte columns: Kneron 4W4C8B
// atoms, 3-channel images padded to 4, clDNN fsv2 / fsv4 blocks), 16 columns per step
// (interleave.hpp); a remainder element by element.
#include "interleave.hpp"

#if defined(__x86_64__) || defined(__i386__)
namespace npupack {
namespace kernels {

bool transpose_x8_2x16_sse2_takes(const TransposeArgs& a) {
  return sides_in(a, kStrided | kFromRowTable | kFromRowPtrs) && a.rows == 2;
}

bool transpose_x8_2x16_sse2(const TransposeArgs& a) {
  on_sides<kStrided | kFromRowTable | kFromRowPtrs>(a, [&a](auto row, StridedOut col) {
    interleave<1, 2>(row, col, a.cols, batch_of(a));
  });
  return false;
}

}  // namespace kernels
}  // namespace npupack
#endif  // x86
