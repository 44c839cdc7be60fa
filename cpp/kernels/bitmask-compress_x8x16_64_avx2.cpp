// Sparse compression (WMB bits + kept elements), 64 bytes per step with AVX2 shuffles driven by
// tables.
#include "sparse_kernels.hpp"

#if defined(__x86_64__) || defined(__i386__)
namespace npupack {
namespace sparse_kernels {

// The byte-shuffle control that gathers the kept bytes of 16 bytes to the front of each 8-byte
// half: the low half's from compact1[lo], the high half's from compact1_hi[hi].
__attribute__((target("avx2"), always_inline)) inline __m128i halves_control(const Tables& T, unsigned lo, unsigned hi) {
  const __m128i l = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(T.compact1[lo]));
  return _mm_castpd_si128(_mm_loadh_pd(_mm_castsi128_pd(l), reinterpret_cast<const double*>(T.compact1_hi[hi])));
}

// 32 bytes (half 0 or 1) of the 64-byte step at p.
__attribute__((target("avx2"), always_inline)) inline __m256i step_half(const uint8_t* p, int half) {
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p) + half);
}

// The WMB bits of the 64 bytes at p (bit j: element j is non-zero; 64 bits for es = 1, 32 for 2).
template <int es>
__attribute__((target("avx2,popcnt"), always_inline)) inline uint64_t keep_bits(const uint8_t* p) {
  const __m256i zero = _mm256_setzero_si256(), v0 = step_half(p, 0), v1 = step_half(p, 1);
  if constexpr (es == 1) {
    return ~(uint64_t{static_cast<uint32_t>(_mm256_movemask_epi8(_mm256_cmpeq_epi8(v0, zero)))} |
             uint64_t{static_cast<uint32_t>(_mm256_movemask_epi8(_mm256_cmpeq_epi8(v1, zero)))} << 32);
  } else {
    // packs interleaves the two registers lane by lane; the permute puts the 32 flags in order.
    const __m256i z = _mm256_packs_epi16(_mm256_cmpeq_epi16(v0, zero), _mm256_cmpeq_epi16(v1, zero));
    return ~static_cast<uint32_t>(_mm256_movemask_epi8(_mm256_permute4x64_epi64(z, 0xD8)));
  }
}

// The byte-shuffle controls of one 64-byte step (c[0] for v0, c[1] for v1), from tables in L1
// indexed by the step's mask bytes: two 8-byte rows per 16 bytes for bytes, one 16-byte row for
// halves. A dense step needs none.
template <int es>
__attribute__((target("avx2,popcnt"), always_inline)) inline void step_controls(const Tables& T, uint64_t keep,
                                                                               __m256i* c) {
  if (keep == kDenseStep<es>) return;
  auto bits = [keep](int k) { return static_cast<unsigned>(keep >> (8 * k)) & 0xFFu; };  // mask byte k
  if constexpr (es == 1) {
    c[0] = _mm256_inserti128_si256(_mm256_castsi128_si256(halves_control(T, bits(0), bits(1))),
                                   halves_control(T, bits(2), bits(3)), 1);
    c[1] = _mm256_inserti128_si256(_mm256_castsi128_si256(halves_control(T, bits(4), bits(5))),
                                   halves_control(T, bits(6), bits(7)), 1);
  } else {
    auto row = [&T](unsigned m) { return reinterpret_cast<const __m128i*>(T.compact2[m]); };
    c[0] = _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_load_si128(row(bits(0)))), _mm_load_si128(row(bits(1))), 1);
    c[1] = _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_load_si128(row(bits(2)))), _mm_load_si128(row(bits(3))), 1);
  }
}

// Writes the WMB bits and the kept elements of the step at p to d; returns the DATA bytes
// written. Each 16-byte quarter is compacted by one shuffle and stored whole (halves) or as two
// 8-byte halves (bytes) at the popcount of the mask below it, so the stores of a step do not
// wait on each other. Stores run past the kept bytes into bytes the next store overwrites: up
// to 64 bytes.
template <int es>
__attribute__((target("avx2,popcnt"), always_inline)) inline int64_t store_step(const uint8_t* p, uint64_t keep,
                                                                               const __m256i* c, uint8_t* wmb_at,
                                                                               uint8_t* d) {
  const __m256i v0 = step_half(p, 0), v1 = step_half(p, 1);
  std::memcpy(wmb_at, &keep, 8 / es);
  if (keep == kDenseStep<es>) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(d), v0);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(d + 32), v1);
    return 64;
  }
  const __m256i r0 = _mm256_shuffle_epi8(v0, c[0]), r1 = _mm256_shuffle_epi8(v1, c[1]);
  const __m128i q[4] = {_mm256_castsi256_si128(r0), _mm256_extracti128_si256(r0, 1), _mm256_castsi256_si128(r1),
                        _mm256_extracti128_si256(r1, 1)};
  // Bytes kept before mask bit b (0 < b < 64): the shift keeps bits 0..b-1 and costs one
  // instruction where masking them costs three.
  auto before = [keep](int b) { return es * static_cast<int64_t>(__builtin_popcountll(keep << (64 - b))); };
  for (int k = 0; k < 4; ++k) {
    uint8_t* at = d + (k ? before(16 / es * k) : 0);
    if constexpr (es == 1) {
      _mm_storel_epi64(reinterpret_cast<__m128i*>(at), q[k]);
      // movhps through the builtin: _mm_storeh_pd is a (UBSan-checked) aligned double store.
      _mm_storeh_pi(reinterpret_cast<__m64*>(d + before(16 * k + 8)), _mm_castsi128_ps(q[k]));
    } else {
      _mm_storeu_si128(reinterpret_cast<__m128i*>(at), q[k]);
    }
  }
  return es * _mm_popcnt_u64(keep);
}

// 64 bytes per step, software-pipelined: step i is stored while the controls of step i+1 are
// loaded and the mask of step i+2 is built. In one step the mask feeds ~40 integer operations
// (table indices, store offsets) and arrives late (load, compare, movemask); built in the same
// iteration they fill the schedulers with waiting operations and the loop runs at the latency
// of a step. Two steps ahead they are ready when issued. Dense steps skip the controls by one
// predictable branch. Each 16 bytes' two compacted halves take two stores: joining them by a
// second shuffle costs more than the store it saves. A step runs only while 64 bytes of
// capacity remain. The three buffers never overlap (__restrict): without it every store to DATA
// or WMB would order the following loads of the stream behind it.
template <int es>
__attribute__((target("avx2,popcnt"))) int64_t compress_avx2(const uint8_t* __restrict s, int64_t n,
                                                             uint8_t* __restrict wmb, uint8_t* __restrict data,
                                                             int64_t cap, int64_t& i_done) {
  const Tables& T = tables();
  constexpr int64_t step = 64 / es;  // elements per step; a multiple of 8, so WMB bytes stay whole
  auto at = [s](int64_t i) { return s + i * es; };
  int64_t pos = 0, i = 0;
  if (n < 2 * step) {
    i_done = 0;
    return 0;
  }
  // Steps are read twice: for the mask two steps ahead, then (from L1) to be compacted.
  __m256i ca[2] = {}, cb[2] = {};
  uint64_t ka = keep_bits<es>(at(0));
  step_controls<es>(T, ka, ca);
  uint64_t kb = keep_bits<es>(at(step));
  for (; i + 3 * step <= n && pos + 64 <= cap; i += step) {
    const uint64_t kn = keep_bits<es>(at(i + 2 * step));
    step_controls<es>(T, kb, cb);
    pos += store_step<es>(at(i), ka, ca, wmb + (i >> 3), data + pos);
    ka = kb, ca[0] = cb[0], ca[1] = cb[1];
    kb = kn;
  }
  // The last two steps in the pipeline (the loop stops with i + 2 * step <= n).
  if (i + step <= n && pos + 64 <= cap) {
    pos += store_step<es>(at(i), ka, ca, wmb + (i >> 3), data + pos);
    i += step;
    if (i + step <= n && pos + 64 <= cap) {
      step_controls<es>(T, kb, cb);
      pos += store_step<es>(at(i), kb, cb, wmb + (i >> 3), data + pos);
      i += step;
    }
  }
  i_done = i;
  return pos;
}

template int64_t compress_avx2<1>(const uint8_t* __restrict, int64_t, uint8_t* __restrict, uint8_t* __restrict, int64_t,
                                  int64_t&);
template int64_t compress_avx2<2>(const uint8_t* __restrict, int64_t, uint8_t* __restrict, uint8_t* __restrict, int64_t,
                                  int64_t&);

}  // namespace sparse_kernels

namespace kernels {

// The list entry (kernels.def): the 64-byte steps; the scalar entry compresses the tail.
void bitmask_compress_x8x16_64_avx2(BitmaskArgs& a) {
  using sparse_kernels::compress_avx2;
  a.pos = a.es == 1 ? compress_avx2<1>(a.dense, a.n, a.wmb_out, a.data_out, a.data_bytes, a.done)
                    : compress_avx2<2>(a.dense, a.n, a.wmb_out, a.data_out, a.data_bytes, a.done);
}

}  // namespace kernels
}  // namespace npupack
#endif  // x86
