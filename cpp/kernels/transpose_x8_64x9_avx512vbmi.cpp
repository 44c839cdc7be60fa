// 9 columns of bytes whose rows are back to back (3x3 kernels' taps), matrices of 64 rows and
// more: the 3x3 rotation on 512-bit registers, one 576-byte block (64 rows) per step
// (narrow_avx512.hpp); streamed where the columns are whole lines.
#include "common.hpp"
#include "narrow_avx512.hpp"

#if defined(__x86_64__) || defined(__i386__)
namespace npupack {
namespace kernels {

bool transpose_x8_64x9_avx512vbmi_takes(const TransposeArgs& a) {
  return (sides_in(a, kStrided | kToColTable) || whole_lines(a, 64)) && a.cols == 9 && a.src_stride == 9 &&
         a.rows >= 64;
}

bool transpose_x8_64x9_avx512vbmi(const TransposeArgs& a) {
  on_sides<kStrided | kToColTable | kStreamed>(a, [&a](Strided, auto col) {
    narrow::avx512::run_taps9<1>(row_reader(a, 1), col, batch_of(a));
  });
  return true;
}

}  // namespace kernels
}  // namespace npupack
#endif  // x86
