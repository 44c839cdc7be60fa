// 9 columns of bytes whose rows are back to back (3x3 kernels' taps), matrices of 32 rows and
// more: the 3x3 rotation (no transpose network), 32 rows per step, 16 in each 128-bit lane
// (narrow_avx2.hpp); streamed where the columns are whole lines (64 rows a step).
#include "common.hpp"
#include "narrow_avx2.hpp"

#if defined(__x86_64__) || defined(__i386__)
namespace npupack {
namespace kernels {

bool transpose_x8_32x9_avx2_takes(const TransposeArgs& a) {
  return (sides_in(a, kStrided | kToColTable) || whole_lines(a, 64)) && a.cols == 9 && a.src_stride == 9 &&
         a.rows >= 32;
}

bool transpose_x8_32x9_avx2(const TransposeArgs& a) {
  on_sides<kStrided | kToColTable | kStreamed>(a, [&a](Strided, auto col) {
    narrow::avx2::run_taps9<1>(row_reader(a, 1), col, batch_of(a));
  });
  return true;
}

}  // namespace kernels
}  // namespace npupack
#endif  // x86
