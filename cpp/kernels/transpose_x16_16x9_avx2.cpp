// 9 columns of 16-bit elements whose rows are back to back (fp16 3x3 kernels' taps), matrices of
// 16 rows and more: the 3x3 rotation, 16 rows per step, 8 in each 128-bit lane
// (narrow_avx2.hpp); streamed where the columns are whole lines (32 rows a step). The finite
// form also tests every half moved for fp16 INF / NaN.
#include "common.hpp"
#include "narrow_avx2.hpp"

#if defined(__x86_64__) || defined(__i386__)
namespace npupack {
namespace kernels {

bool transpose_x16_16x9_avx2_takes(const TransposeArgs& a) {
  return (sides_in(a, kStrided | kToColTable) || whole_lines(a, 32)) && a.cols == 9 && a.src_stride == 18 &&
         a.rows >= 16;
}

bool transpose_x16_16x9_avx2(const TransposeArgs& a) {
  on_sides<kStrided | kToColTable | kStreamed>(a, [&a](Strided, auto col) {
    narrow::avx2::run_taps9<2>(row_reader(a, 2), col, batch_of(a));
  });
  return true;
}

bool transpose_finite_x16_16x9_avx2_takes(const TransposeArgs& a) {
  return sides_in(a, kStrided | kStreamed) && transpose_x16_16x9_avx2_takes(a);
}

bool transpose_finite_x16_16x9_avx2(const TransposeArgs& a) {
  on_sides<kStrided | kStreamed>(a, [&a](Strided, auto col) {
    narrow::avx2::run_taps9<2>(row_reader(a, 2), col, batch_of(a), a.nonfinite);
  });
  return true;
}

}  // namespace kernels
}  // namespace npupack
#endif  // x86
