// Batches of at least two byte matrices of exactly 16 rows of 9..16 columns (clDNN fsv16 weights,
// 16-channel DC blocks): two matrices side by side, one per 128-bit lane; 9 columns back to back
// take the 3x3 rotation, one matrix per lane; an odd last matrix takes the SSE2 network.
#include "common.hpp"
#include "narrow_avx2.hpp"

#if defined(__x86_64__) || defined(__i386__)
namespace npupack {
namespace narrow {
#pragma GCC push_options
#pragma GCC target("avx2")
namespace avx2 {
// 8-bit matrices of 16 rows, at least two in the batch (see pairs); an odd last one takes SSE2.
// Nine columns with rows back to back take the 3x3 rotation kernel, one matrix per lane.
template <int NC, class DC>
NPUPACK_FLAT void run_u8_pairs(RowReader in, DC col, const Batch& batch) {
  if constexpr (NC == 9) {
    if (in.stride == 9) {
      pairs::over_pairs(in, col, batch, [](const char* a, const char* b, const auto& d) { block_u8_taps9(a, b, d); });
    } else {
      pairs::run<9, 0>(in, col, batch);
    }
  } else if (in.stride == NC) {
    pairs::run<NC, NC>(in, col, batch);
  } else {
    pairs::run<NC, 0>(in, col, batch);
  }
  if (batch.count % 2) {
    in.base += (batch.count - 1) * batch.sstep;
    col.base += (batch.count - 1) * batch.dstep;
    sse2::run_u8<NC>(in, col, Batch{});
  }
}
}  // namespace avx2
#pragma GCC pop_options
}  // namespace narrow

namespace kernels {

bool transpose_batch_x8_16xn_avx2_takes(const TransposeArgs& a) {
  return sides_of(a) == kStrided && a.rows == 16 && a.count >= 2 && a.cols >= 9 && a.cols <= 16 &&
         a.src_stride >= a.cols;
}

bool transpose_batch_x8_16xn_avx2(const TransposeArgs& a) {
  with_count<9, 16>(a.cols, [&a](auto nc) {
    narrow::avx2::run_u8_pairs<nc()>(row_reader(a, 1), StridedOut{a.dst, a.dst_stride}, batch_of(a));
  });
  return true;
}

}  // namespace kernels
}  // namespace npupack
#endif  // x86
