// 2-D element transpose, the inner kernel of every blocked layout whose logical and packed
// sides are contiguous along different loops (NVDLA atoms over W, DC channel blocks over R*S).
#pragma once
#include <cstdint>

namespace npupack {

// dst[c*dst_stride + r*eb .. +eb] = src[r*src_stride + c*eb .. +eb] for r < rows, c < cols.
// Strides in bytes; eb in {1, 2, 4, 8}. Regions must not overlap.
void transpose(const char* src, int64_t src_stride, char* dst, int64_t dst_stride, int64_t rows, int64_t cols,
               int64_t eb);

}  // namespace npupack
