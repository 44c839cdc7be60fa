// 9 or 25 columns of bytes whose rows are back to back (3x3 and 5x5 kernels' taps), matrices of
// 64 rows and more: the tap rotation on 512-bit registers, one 64-row block per step
// (narrow_avx512.hpp); streamed where the columns are whole lines.
#include "common.hpp"
#include "narrow_avx512.hpp"

#if defined(__x86_64__) || defined(__i386__)
namespace npupack {
namespace kernels {

bool transpose_x8_64xn_avx512vbmi_takes(const TransposeArgs& a) {
  return (sides_in(a, kStrided | kToColTable) || whole_lines(a, 64)) && narrow::avx512::taps_cols(a.cols) &&
         a.src_stride == a.cols && a.rows >= 64;
}

bool transpose_x8_64xn_avx512vbmi(const TransposeArgs& a) {
  on_sides<kStrided | kToColTable | kStreamed>(a, [&a](Strided, auto col) {
    narrow::avx512::run_taps_of<1>(a.cols, row_reader(a, 1), col, batch_of(a));
  });
  return true;
}

}  // namespace kernels
}  // namespace npupack
#endif  // x86
