// Batches of 2-row matrices of 16-bit elements whose rows are 8..15 bytes, shorter than an
// interleave step (interleave.hpp): each row read whole in one 16-byte load, the last one
// ending at its last byte.
#include "interleave.hpp"

#if defined(__x86_64__) || defined(__i386__)
namespace npupack {
namespace kernels {

bool transpose_batch_x16_2xn_sse2_takes(const TransposeArgs& a) {
  const int64_t bytes = a.cols * 2;
  return sides_of(a) == kStrided && a.rows == 2 && bytes >= 8 && bytes < 16 && a.src_stride >= bytes;
}

bool transpose_batch_x16_2xn_sse2(const TransposeArgs& a) {
  with_count<8, 15>(a.cols * 2, [&a](auto bytes) {
    interleave_short<2, 2, bytes()>(Strided{a.src, a.src_stride}, StridedOut{a.dst, a.dst_stride}, batch_of(a));
  });
  return false;
}

}  // namespace kernels
}  // namespace npupack
#endif  // x86
