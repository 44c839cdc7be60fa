// Image-input weights by byte permutation (AVX-512 VBMI, docs/nvdla.md §8.3-8.5): one vpermt2b
// per step makes m kernels' row groups from their 128-byte window (image_weights_table.hpp),
// the padding channels zeroed by its mask.
#pragma once
#include <algorithm>
#include <cstdint>

#include "image_weights_table.hpp"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define NPUPACK_IMAGE_VBMI 1

namespace npupack {
namespace image {

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
