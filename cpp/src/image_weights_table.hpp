// Image-input weights as a byte permutation of a window of kernels (docs/nvdla.md §8.3-8.5): a
// row group of a kernel (fa rows of C' = Cdata * S pre-extended elements) draws on fa * S elements
// of each of its C planes, all within (C - 1) * R * S + fa * S elements of the source. When m
// kernels' such spans fit in one 128-byte window and their m row groups in 64 bytes, one table
// maps the window to the m row groups (padding channels zero), which follow each other in the
// output. The AVX-512 VBMI pass applies it with one vpermt2b, the SSSE3 pass with pshufb steps.
#pragma once
#include <algorithm>
#include <cstdint>

#include "npupack/image_weights.hpp"

namespace npupack {
namespace image {

// The permutation of a row group of fa rows: byte j of m row groups of seg bytes each, read from
// a window starting at the first kernel's row a * f (kernel qq's bytes kbytes further).
struct RowTable {
  alignas(64) uint8_t index[64];
  uint64_t keep;   // bytes of real channels (the others are zero)
  int64_t seg;     // bytes per row group of one kernel
  int64_t window;  // bytes a step reads: one load, not two, where they fit 64
};

// Kernels per permutation, 0 when a row group does not fit (then the interleaving pass runs).
inline int64_t kernels_per_window(const ImageWeightsSpec& sp) {
  const int64_t n = sp.r * sp.s, kbytes = sp.c * n * sp.es, seg = sp.f * sp.cdata * sp.s * sp.es;
  const int64_t span = (sp.c - 1) * n * sp.es + sp.f * sp.s * sp.es;
  if (seg > 64 || span > 128) return 0;
  return std::min(64 / seg, (128 - span) / kbytes + 1);
}

inline RowTable row_table(const ImageWeightsSpec& sp, int64_t m, int64_t fa) {
  RowTable t{};
  const int64_t n = sp.r * sp.s, es = sp.es, x = sp.cdata * sp.s, kbytes = sp.c * n * es;
  t.seg = fa * x * es;
  t.window = (m - 1) * kbytes + (sp.c - 1) * n * es + fa * sp.s * es;
  // Byte j = qq * seg + ((b * S + s) * cdata + c) * es + e, in nested loops: a division per byte
  // would cost more than a small layer's whole pass.
  int64_t j = 0;
  for (int64_t qq = 0; qq < m; ++qq) {
    for (int64_t b = 0; b < fa; ++b) {
      for (int64_t s = 0; s < sp.s; ++s) {
        for (int64_t c = 0; c < sp.cdata; ++c) {
          for (int64_t e = 0; e < es; ++e, ++j) {
            if (c >= sp.c) continue;  // index 0, byte zeroed
            t.index[j] = static_cast<uint8_t>(qq * kbytes + c * n * es + b * sp.s * es + s * es + e);
            t.keep |= uint64_t{1} << j;
          }
        }
      }
    }
  }
  return t;
}

inline uint64_t low_bytes(int64_t n) { return n >= 64 ? ~uint64_t{0} : (uint64_t{1} << n) - 1; }

}  // namespace image
}  // namespace npupack
