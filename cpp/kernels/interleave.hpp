// The unpack interleaves of 2 or 4 rows (SSE2), templates instantiated by the kernel files
// transpose_x{8,16}_{2,4}x*_sse2.cpp and transpose-batch_x{8,16}_{2,4}xn_sse2.cpp.
#pragma once
#include "common.hpp"

#if defined(__x86_64__) || defined(__i386__)
namespace npupack {
namespace kernels {

// A batch of matrices of 2 or 4 rows of Bytes (8..15) bytes, fewer than an interleave step,
// rows `stride` >= Bytes apart (o_is_yx_isv4 on a 3x3 kernel: 4 rows of 9 taps per o and i/4).
// Each row is read whole: every row but the last reads on into the next row's place, and the
// last is read so that the read ends at its last byte, then shifted into place, so nothing
// outside the matrix's span is read. The columns, Rows * EB bytes each, are stored back to back
// in one copy of constant size, or one by one.
template <int EB, int Rows, int Bytes>
void interleave_short(Strided row, StridedOut col, const narrow::Batch& batch) {
  constexpr int64_t n = Bytes / EB;
  for (int64_t i = 0; i < batch.count; ++i, row.base += batch.sstep, col.base += batch.dstep) {
    __m128i v[4], out[4];
    for (int k = 0; k + 1 < Rows; ++k) v[k] = load16(row(k));
    v[Rows - 1] = _mm_srli_si128(load16(row(Rows - 1) + Bytes - 16), 16 - Bytes);
    interleave_regs<EB, Rows>(v, out);
    store_columns<EB, Rows, n>(out, col.base, col.stride);
  }
}

// 2 or 4 rows of 1- or 2-byte elements, so rows * EB-byte columns (Kneron 4W4C8B atoms,
// 3-channel images padded to 4, clDNN's fsv2 / fsv4 and bsv*_fsv2 / fsv4 blocks): an interleave,
// 16 bytes of each row per step, which leaves the columns in order in 2 or 4 registers. Back to
// back columns are stored 16 bytes at a time; columns further apart (a bsv16_fsv4 block: 4 bytes
// every 64) one by one, still a store per column instead of one per element.
// Over a batch of equally spaced matrices in one call (unpacking 1x2 and 2x2 kernels: one matrix
// per kernel and channel block).
template <int EB, int Rows, class SR>
void interleave(SR row, StridedOut col, int64_t cols, const narrow::Batch& b) {
  constexpr int64_t per = 16 / EB;  // columns per step
  for_each_matrix(row, col, b, [cols](const SR& row, const StridedOut& col) {
    int64_t c = 0;
    for (; c + per <= cols; c += per) {
      const auto s = row.at(0, c * EB);
      __m128i v[4], out[4];
      for (int k = 0; k < Rows; ++k) v[k] = load16(s[k]);
      interleave_regs<EB, Rows>(v, out);
      store_columns<EB, Rows, per>(out, col(c), col.stride);
    }
    scalar<EB>(row, col, 0, Rows, c, cols);
  });
}

}  // namespace kernels
}  // namespace npupack
#endif  // x86
