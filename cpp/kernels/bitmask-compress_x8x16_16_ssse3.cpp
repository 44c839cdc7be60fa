// Sparse compression (WMB bits + kept elements), 16 bytes per step with SSSE3 shuffles.
#include "sparse_kernels.hpp"

#if defined(__x86_64__) || defined(__i386__)
namespace npupack {
namespace sparse_kernels {

// 16 elements (es = 1) or 8 elements (es = 2) per step: compare with zero, movemask for the WMB
// bits, pshufb to compact. Stores are 16 bytes wide, so a step runs only while 16 bytes of
// capacity remain; the rest goes to the scalar loop.
__attribute__((target("ssse3,popcnt"))) int64_t compress_ssse3(const uint8_t* s, int64_t n, int es, uint8_t* wmb,
                                                         uint8_t* data, int64_t cap) {
  const Tables& T = tables();
  const __m128i zero = _mm_setzero_si128();
  int64_t pos = 0, i = 0;
  if (es == 1) {
    for (; i + 16 <= n && pos + 32 <= cap; i += 16) {
      const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i));
      const unsigned m = ~static_cast<unsigned>(_mm_movemask_epi8(_mm_cmpeq_epi8(v, zero))) & 0xFFFFu;
      const unsigned lo = m & 0xFF, hi = m >> 8;
      wmb[i >> 3] = static_cast<uint8_t>(lo);
      wmb[(i >> 3) + 1] = static_cast<uint8_t>(hi);
      if (m == 0xFFFF) {  // dense weights: a plain copy (the branch is predictable either way)
        _mm_storeu_si128(reinterpret_cast<__m128i*>(data + pos), v);
        pos += 16;
        continue;
      }
      // One shuffle compacts both halves in place: kept bytes of 0..7 to the front of the low
      // half, of 8..15 to the front of the high half; two 8-byte stores put them back to back.
      const __m128i ctrl = _mm_unpacklo_epi64(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(T.compact1[lo])),
                                              _mm_loadl_epi64(reinterpret_cast<const __m128i*>(T.compact1_hi[hi])));
      const __m128i c = _mm_shuffle_epi8(v, ctrl);
      const int n_lo = __builtin_popcount(lo);
      _mm_storel_epi64(reinterpret_cast<__m128i*>(data + pos), c);
      _mm_storel_epi64(reinterpret_cast<__m128i*>(data + pos + n_lo), _mm_unpackhi_epi64(c, c));
      pos += n_lo + __builtin_popcount(hi);
    }
  } else {
    for (; i + 8 <= n && pos + 16 <= cap; i += 8) {
      const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + 2 * i));
      const __m128i z = _mm_cmpeq_epi16(v, zero);
      const unsigned m = ~static_cast<unsigned>(_mm_movemask_epi8(_mm_packs_epi16(z, z))) & 0xFFu;
      wmb[i >> 3] = static_cast<uint8_t>(m);
      const __m128i a = m == 0xFF ? v : _mm_shuffle_epi8(v, _mm_load_si128(reinterpret_cast<const __m128i*>(T.compact2[m])));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(data + pos), a);
      pos += 2 * __builtin_popcount(m);
    }
  }
  // i is a multiple of 8 here, so the scalar tail starts on a fresh WMB byte.
  std::memset(wmb + (i >> 3), 0, static_cast<size_t>((n + 7) / 8 - (i >> 3)));
  return compress_scalar(s, i, n, es, wmb, data, pos, cap);
}

}  // namespace sparse_kernels

namespace kernels {

// The list entry (kernels.def): compress_ssse3 finishes its own tail.
void bitmask_compress_x8x16_16_ssse3(BitmaskArgs& a) {
  a.pos = sparse_kernels::compress_ssse3(a.dense, a.n, a.es, a.wmb_out, a.data_out, a.data_bytes);
  a.done = a.n;
}

}  // namespace kernels
}  // namespace npupack
#endif  // x86
