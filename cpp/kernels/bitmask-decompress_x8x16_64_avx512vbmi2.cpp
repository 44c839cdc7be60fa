// Sparse decompression, 64 bytes per step with the AVX-512 VBMI2 expand instruction.
#include "sparse_kernels.hpp"

#if defined(__x86_64__) || defined(__i386__)
namespace npupack {
namespace sparse_kernels {

// The inverse of compress_avx512: 64 bytes of DATA at the running offset, expanded by the step's
// WMB bits (vpexpandb/w in registers) into the step's 64 output bytes; a dense step is a copy.
// Each step reads 64 bytes of DATA, so it runs only while they lie inside the buffer.
template <int es>
__attribute__((target("avx512f,avx512bw,avx512vbmi2,popcnt"))) void decompress_avx512(
    const uint8_t* __restrict data, int64_t data_size, const uint8_t* __restrict wmb, int64_t n,
    uint8_t* __restrict out, int64_t& i_done, int64_t& pos_done) {
  constexpr int64_t step = 64 / es;
  int64_t pos = 0, i = 0;
  for (; i + step <= n && pos + 64 <= data_size; i += step) {
    uint64_t keep = 0;
    std::memcpy(&keep, wmb + (i >> 3), 8 / es);
    const __m512i v = _mm512_loadu_si512(data + pos);
    if (keep == kDenseStep<es>) {
      store_halves(out + i * es, v);
    } else {
      _mm512_storeu_si512(out + i * es, es == 1 ? _mm512_maskz_expand_epi8(_cvtu64_mask64(keep), v)
                                                : _mm512_maskz_expand_epi16(_cvtu32_mask32(static_cast<uint32_t>(keep)), v));
    }
    pos += es * static_cast<int64_t>(_mm_popcnt_u64(keep));
  }
  i_done = i;
  pos_done = pos;
}

template void decompress_avx512<1>(const uint8_t* __restrict, int64_t, const uint8_t* __restrict, int64_t,
                                   uint8_t* __restrict, int64_t&, int64_t&);
template void decompress_avx512<2>(const uint8_t* __restrict, int64_t, const uint8_t* __restrict, int64_t,
                                   uint8_t* __restrict, int64_t&, int64_t&);

}  // namespace sparse_kernels

namespace kernels {

// The list entry (kernels.def): where fewer than 64 bytes of DATA remain, the 16-byte SSSE3
// steps carry on (every AVX-512 CPU has SSSE3), then the scalar entry.
void bitmask_decompress_x8x16_64_avx512vbmi2(BitmaskArgs& a) {
  using sparse_kernels::decompress_avx512;
  if (a.es == 1) {
    decompress_avx512<1>(a.data, a.data_bytes, a.wmb, a.n, a.dense_out, a.done, a.pos);
  } else {
    decompress_avx512<2>(a.data, a.data_bytes, a.wmb, a.n, a.dense_out, a.done, a.pos);
  }
  if (cpu().ssse3) sparse_kernels::decompress_ssse3(a.data, a.data_bytes, a.wmb, a.n, a.es, a.dense_out, a.done, a.pos);
}

}  // namespace kernels
}  // namespace npupack
#endif  // x86
