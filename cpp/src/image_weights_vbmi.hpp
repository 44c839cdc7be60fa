// Image-input weights by byte permutation (AVX-512 VBMI, docs/nvdla.md §8.3-8.5): a row group
// of a kernel (fa rows of C' = Cdata * S pre-extended elements) draws on fa * S elements of each
// of its C planes, all within (C - 1) * R * S + fa * S elements of the source. When m kernels'
// such spans fit in one 128-byte window and their m row groups in 64 bytes, one vpermt2b makes
// the m row groups (padding channels zeroed by its mask), which follow each other in the output.
#pragma once
#include <algorithm>
#include <cstdint>

#include "npupack/image_weights.hpp"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define NPUPACK_IMAGE_VBMI 1

namespace npupack {
namespace image {

// The vpermt2b table of a row group of fa rows: byte j of m row groups of seg bytes each, read
// from a window starting at the first kernel's row a * f (kernel qq's bytes kbytes further).
struct RowTable {
  alignas(64) uint8_t index[64];
  uint64_t keep;   // bytes of real channels (the others are zero)
  int64_t seg;     // bytes per row group of one kernel
  int64_t window;  // bytes a step reads: one load, not two, where they fit 64
};

// Kernels per permutation, 0 when a row group does not fit (then the SSSE3 pass runs).
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

// The row groups of kernels k0 .. k0 + kn - 1 at their row a * f, m kernels per permutation,
// written back to back from d. The window is read only up to end (masked loads).
__attribute__((target("avx512f,avx512bw,avx512vbmi"))) inline void row_groups_vbmi(
    const char* src, const char* end, const ImageWeightsSpec& sp, int64_t k0, int64_t kn, int64_t a, int64_t m,
    const RowTable& t, char* d) {
  // The table's fields in locals: read through t after each store (which may alias it for the
  // compiler), they would chain every step to the previous step's store.
  const __m512i index = _mm512_load_si512(t.index);
  const __mmask64 keep = t.keep;
  const int64_t seg = t.seg, kbytes = sp.c * sp.r * sp.s * sp.es, full = m * seg;
  const uint64_t whole = low_bytes(full);
  const bool one = t.window <= 64;  // loads bound this pass: the second one only where it is read
  const char* w = src + k0 * kbytes + a * sp.f * sp.s * sp.es;
  for (int64_t q = 0; q < kn; q += m, w += m * kbytes, d += full) {
    const int64_t left = end - w;
    __m512i lo, hi = _mm512_setzero_si512();
    if (one) {
      lo = left >= 64 ? _mm512_loadu_si512(w) : _mm512_maskz_loadu_epi8(low_bytes(left), w);
    } else if (left >= 128) {
      lo = _mm512_loadu_si512(w);
      hi = _mm512_loadu_si512(w + 64);
    } else {
      lo = _mm512_maskz_loadu_epi8(low_bytes(left), w);
      if (left > 64) hi = _mm512_maskz_loadu_epi8(low_bytes(left - 64), w + 64);
    }
    const __m512i v = _mm512_maskz_permutex2var_epi8(keep, lo, index, hi);
    _mm512_mask_storeu_epi8(d, q + m <= kn ? whole : low_bytes((kn - q) * seg), v);
  }
}

}  // namespace image
}  // namespace npupack
#endif
