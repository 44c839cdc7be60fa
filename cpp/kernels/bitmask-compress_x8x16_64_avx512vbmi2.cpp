// Sparse compression (WMB bits + kept elements), 64 bytes per step with the AVX-512 VBMI2
// compress instruction.
#include "sparse_kernels.hpp"

#if defined(__x86_64__) || defined(__i386__)
namespace npupack {
namespace sparse_kernels {

// AVX-512 VBMI2: the compress instruction does what the shuffle tables and the store offsets of
// the AVX2 step do (the test mask is the WMB's 64 or 32 bits in order, LSB first), so a step is a
// load, a test, a compress, one 64-byte store at the running DATA offset and the mask's store:
// no tables. The register form of the compress with a plain store (the memory form is
// microcoded on AMD's cores); the store runs up to 64 bytes past the kept bytes, into bytes the
// next store overwrites, so a step runs only while 64 bytes of capacity remain.
template <int es>
__attribute__((target("avx512f,avx512bw,avx512vbmi2"), always_inline)) inline uint64_t keep_bits512(__m512i v) {
  return es == 1 ? _cvtmask64_u64(_mm512_test_epi8_mask(v, v)) : _cvtmask32_u32(_mm512_test_epi16_mask(v, v));
}

// The step at p reads its 64 bytes again after keep_bits512 (from L1) and stores a dense step as
// two 32-byte halves: one load feeding both the test and the store, and one 64-byte store, ran
// dense weights slower than the AVX2 loop at some buffer alignments; this form does not, at
// any alignment (docs/performance.md).
template <int es>
__attribute__((target("avx512f,avx512bw,avx512vbmi2,popcnt"), always_inline)) inline int64_t store_step512(
    const uint8_t* p, uint64_t keep, uint8_t* wmb_at, uint8_t* d) {
  const __m512i v = _mm512_loadu_si512(p);
  std::memcpy(wmb_at, &keep, 8 / es);
  if (keep == kDenseStep<es>) {  // dense weights skip the compress (a predictable branch either way)
    store_halves(d, v);
    return 64;
  }
  const __m512i kept = es == 1 ? _mm512_maskz_compress_epi8(_cvtu64_mask64(keep), v)
                               : _mm512_maskz_compress_epi16(_cvtu32_mask32(static_cast<uint32_t>(keep)), v);
  _mm512_storeu_si512(d, kept);
  return es * static_cast<int64_t>(_mm_popcnt_u64(keep));
}

template <int es>
__attribute__((target("avx512f,avx512bw,avx512vbmi2,popcnt"))) int64_t compress_avx512(
    const uint8_t* __restrict s, int64_t n, uint8_t* __restrict wmb, uint8_t* __restrict data, int64_t cap,
    int64_t& i_done) {
  constexpr int64_t step = 64 / es;  // elements per step; a multiple of 8, so WMB bytes stay whole
  int64_t pos = 0, i = 0;
  // Four steps at a time: their loads and tests issue together, so the masks are ready when the
  // stores need them; four dense steps (a layer that is not pruned) are copied as they were
  // loaded.
  for (; i + 4 * step <= n && pos + 256 <= cap; i += 4 * step) {
    const uint8_t* p = s + i * es;
    __m512i v[4];
    uint64_t keep[4];
    for (int j = 0; j < 4; ++j) {
      v[j] = _mm512_loadu_si512(p + 64 * j);
      keep[j] = keep_bits512<es>(v[j]);
    }
    if ((keep[0] & keep[1] & keep[2] & keep[3]) == kDenseStep<es>) {
      for (int j = 0; j < 4; ++j) store_halves(data + pos + 64 * j, v[j]);
      std::memset(wmb + (i >> 3), 0xFF, static_cast<size_t>(4 * step / 8));
      pos += 256;
      continue;
    }
    for (int j = 0; j < 4; ++j) pos += store_step512<es>(p + 64 * j, keep[j], wmb + ((i + j * step) >> 3), data + pos);
  }
  for (; i + step <= n && pos + 64 <= cap; i += step) {
    pos += store_step512<es>(s + i * es, keep_bits512<es>(_mm512_loadu_si512(s + i * es)), wmb + (i >> 3), data + pos);
  }
  i_done = i;
  return pos;
}

template int64_t compress_avx512<1>(const uint8_t* __restrict, int64_t, uint8_t* __restrict, uint8_t* __restrict, int64_t,
                                  int64_t&);
template int64_t compress_avx512<2>(const uint8_t* __restrict, int64_t, uint8_t* __restrict, uint8_t* __restrict, int64_t,
                                  int64_t&);

}  // namespace sparse_kernels

namespace kernels {

// The list entry (kernels.def): the 64-byte steps; the scalar entry compresses the tail.
void bitmask_compress_x8x16_64_avx512vbmi2(BitmaskArgs& a) {
  using sparse_kernels::compress_avx512;
  a.pos = a.es == 1 ? compress_avx512<1>(a.dense, a.n, a.wmb_out, a.data_out, a.data_bytes, a.done)
                    : compress_avx512<2>(a.dense, a.n, a.wmb_out, a.data_out, a.data_bytes, a.done);
}

}  // namespace kernels
}  // namespace npupack
#endif  // x86
