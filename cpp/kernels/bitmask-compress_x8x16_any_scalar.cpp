// Sparse compression element by element: the whole call on the scalar path, and the tail every
// wider kernel leaves (it starts at a.done, a multiple of 8, so its WMB bytes are its own).
#include "sparse_kernels.hpp"

namespace npupack {
namespace kernels {

void bitmask_compress_x8x16_any_scalar(BitmaskArgs& a) {
  if (a.done >= a.n) return;  // a kernel that finished its own tail (done = n: its last WMB byte is written)
  const int64_t from = a.done >> 3, to = (a.n + 7) / 8;
  if (to > from) std::memset(a.wmb_out + from, 0, static_cast<size_t>(to - from));
  a.pos = sparse_kernels::compress_scalar(a.dense, a.done, a.n, a.es, a.wmb_out, a.data_out, a.pos, a.data_bytes);
  a.done = a.n;
}

}  // namespace kernels
}  // namespace npupack
