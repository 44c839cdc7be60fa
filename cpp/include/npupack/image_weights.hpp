// NVDLA image-input weights (docs/nvdla.md §8.3-8.5) in one pass: each kernel's channels zero-
// padded to the pixel format's components and interleaved into pixels (channel pre-extension,
// C' = Cdata * S), its rows written where the image descriptor (the DC mapping of (K, C', R, 1),
// or the post-extension mapping of row groups of f rows) places them. The descriptor is the rule:
// the pass computes row offsets in closed form and first checks that the descriptor is exactly
// that mapping.
#pragma once
#include <cstdint>

#include "npupack/cpu.hpp"
#include "npupack/layout.hpp"

namespace npupack {

struct ImageWeightsSpec {
  int64_t k, c, r, s;   // logical weights (K, C, R, S), elements
  int64_t stride[4];    // byte strides of the source along K, C, R, S (any sign)
  int64_t cdata;        // the pixel format's components, 1 to 4 (channels C .. cdata-1 are 0)
  int64_t f;            // post-extension factor: rows per row group (1, 2 or 4)
  int64_t kpg;          // kernels per group
  int64_t cpb;          // channels per block: with f == 1, C' is cut into blocks of cpb
  int64_t es;           // element bytes, 1 or 2
  KernelPath path = KernelPath::kAuto;  // for tests: the widest instruction set the pass may use
};

// Throws LayoutError for an inconsistent spec, a descriptor `full` that is not the image mapping
// of (K, C', R, 1) es-byte elements for this kpg, cpb and f (dims, tiles and loop order), or an
// output smaller than full.nbytes().
void check_image_weights(const ImageWeightsSpec& spec, const BlockedLayout& full, int64_t dst_size);

// Writes full.nbytes() bytes to dst (checked first, as check_image_weights). The source is read
// only inside the `src_bytes` bytes at `src` when it is C-contiguous (the vector path); strided
// sources are read element by element.
void image_weights_pack(const char* src, int64_t src_bytes, const ImageWeightsSpec& spec, const BlockedLayout& full,
                        char* dst, int64_t dst_size);

}  // namespace npupack
