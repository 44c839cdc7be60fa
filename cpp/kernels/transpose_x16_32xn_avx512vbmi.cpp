// 9 or 25 columns of 16-bit elements whose rows are back to back (fp16 and int16 3x3 and 5x5
// kernels' taps), matrices of 32 rows and more: the tap rotation on 512-bit registers, 32 rows
// per step (narrow_avx512.hpp); streamed where the columns are whole lines. The finite form also
// tests every half moved for fp16 INF / NaN.
#include "common.hpp"
#include "narrow_avx512.hpp"

#if defined(__x86_64__) || defined(__i386__)
namespace npupack {
namespace kernels {

bool transpose_x16_32xn_avx512vbmi_takes(const TransposeArgs& a) {
  return (sides_in(a, kStrided | kToColTable) || whole_lines(a, 32)) && narrow::avx512::taps_cols(a.cols) &&
         a.src_stride == 2 * a.cols && a.rows >= 32;
}

bool transpose_x16_32xn_avx512vbmi(const TransposeArgs& a) {
  on_sides<kStrided | kToColTable | kStreamed>(a, [&a](Strided, auto col) {
    narrow::avx512::run_taps_of<2>(a.cols, row_reader(a, 2), col, batch_of(a));
  });
  return true;
}

bool transpose_finite_x16_32xn_avx512vbmi_takes(const TransposeArgs& a) {
  return sides_in(a, kStrided | kStreamed) && transpose_x16_32xn_avx512vbmi_takes(a);
}

bool transpose_finite_x16_32xn_avx512vbmi(const TransposeArgs& a) {
  on_sides<kStrided | kStreamed>(a, [&a](Strided, auto col) {
    narrow::avx512::run_taps_of<2>(a.cols, row_reader(a, 2), col, batch_of(a), a.nonfinite);
  });
  return true;
}

}  // namespace kernels
}  // namespace npupack
#endif  // x86
