// Sparse decompression element by element: the whole call on the scalar path, and the tail every
// wider kernel leaves.
#include "sparse_kernels.hpp"

namespace npupack {
namespace kernels {

// The caller counted the mask bits against DATA once; a caller's thread may set bits since (a
// racing writer gets undefined values, never a read past DATA), so each read is bounded by
// DATA's size.
void bitmask_decompress_x8x16_any_scalar(BitmaskArgs& a) {
  const int es = a.es;
  int64_t pos = a.pos;
  for (int64_t i = a.done; i < a.n; ++i) {
    uint8_t* o = a.dense_out + i * es;
    if (((a.wmb[i >> 3] >> (i & 7)) & 1) && pos + es <= a.data_bytes) {
      std::memcpy(o, a.data + pos, static_cast<size_t>(es));
      pos += es;
    } else {
      std::memset(o, 0, static_cast<size_t>(es));
    }
  }
  a.pos = pos;
  a.done = a.n;
}

}  // namespace kernels
}  // namespace npupack
