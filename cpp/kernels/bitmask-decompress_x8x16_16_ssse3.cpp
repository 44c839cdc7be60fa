// Sparse decompression (kept elements expanded by the WMB bits), 16 bytes of DATA per step with
// SSSE3 shuffles.
#include "sparse_kernels.hpp"

#if defined(__x86_64__) || defined(__i386__)
namespace npupack {
namespace sparse_kernels {

__attribute__((target("ssse3,popcnt"))) void decompress_ssse3(const uint8_t* data, int64_t data_size, const uint8_t* wmb,
                                                        int64_t n, int es, uint8_t* out, int64_t& i_done,
                                                        int64_t& pos_done) {
  const Tables& T = tables();
  int64_t pos = pos_done, i = i_done;  // where a wider kernel stopped (i a multiple of 8)
  // Each step reads 16 bytes of DATA; it runs only while they lie inside the buffer.
  for (; i + 8 <= n && pos + 16 <= data_size; i += 8) {
    const unsigned m = wmb[i >> 3];
    const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(data + pos));
    if (es == 1) {
      const __m128i e = _mm_shuffle_epi8(v, _mm_load_si128(reinterpret_cast<const __m128i*>(T.expand1[m])));
      _mm_storel_epi64(reinterpret_cast<__m128i*>(out + i), e);
      pos += __builtin_popcount(m);
    } else {
      const __m128i e = _mm_shuffle_epi8(v, _mm_load_si128(reinterpret_cast<const __m128i*>(T.expand2[m])));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(out + 2 * i), e);
      pos += 2 * __builtin_popcount(m);
    }
  }
  i_done = i;
  pos_done = pos;
}

}  // namespace sparse_kernels

namespace kernels {

// The list entry (kernels.def).
void bitmask_decompress_x8x16_16_ssse3(BitmaskArgs& a) {
  sparse_kernels::decompress_ssse3(a.data, a.data_bytes, a.wmb, a.n, a.es, a.dense_out, a.done, a.pos);
}

}  // namespace kernels
}  // namespace npupack
#endif  // x86
