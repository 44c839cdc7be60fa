#include "npupack/sparse.hpp"

#include <cstring>
#include <string>
#include <vector>

#include "npupack/cpu.hpp"
#include "npupack/errors.hpp"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define NPUPACK_X86 1
#endif
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace npupack {

namespace {

inline bool nonzero(const uint8_t* p, int es) {
  if (es == 1) return *p != 0;
  uint16_t v;
  std::memcpy(&v, p, 2);
  return v != 0;
}

// Scalar compaction of elements [i0, i1): bits OR-ed into wmb (the bytes must start zeroed).
int64_t compress_scalar(const uint8_t* s, int64_t i0, int64_t i1, int es, uint8_t* wmb, uint8_t* data,
                        int64_t pos, int64_t cap) {
  for (int64_t i = i0; i < i1; ++i) {
    const uint8_t* p = s + i * es;
    if (!nonzero(p, es)) continue;
    if (pos + es > cap) throw LayoutError("sparse_compress: DATA buffer too small");
    wmb[i >> 3] |= static_cast<uint8_t>(1u << (i & 7));
    std::memcpy(data + pos, p, static_cast<size_t>(es));
    pos += es;
  }
  return pos;
}

#ifdef NPUPACK_X86
// Shuffle tables: for an 8-bit mask m, compact1[m] gathers the bytes whose bit is set to the
// front (8 lanes of 1 byte); compact2[m] does the same for 8 lanes of 2 bytes. The byte tables
// have 8-byte rows, so that a row's address is the mask byte scaled by the addressing mode.
struct Tables {
  alignas(16) uint8_t compact1[256][8];
  alignas(16) uint8_t compact1_hi[256][8];  // compact1 + 8: the same gather on the upper 8 bytes
  alignas(16) uint8_t compact2[256][16];
  alignas(16) uint8_t expand1[256][16];
  alignas(16) uint8_t expand2[256][16];
  Tables() {
    for (int m = 0; m < 256; ++m) {
      int j = 0;
      std::memset(compact1[m], 0x80, 8);
      std::memset(compact1_hi[m], 0x80, 8);
      std::memset(compact2[m], 0x80, 16);
      std::memset(expand1[m], 0x80, 16);
      std::memset(expand2[m], 0x80, 16);
      for (int i = 0; i < 8; ++i) {
        if (!(m >> i & 1)) continue;
        compact1[m][j] = static_cast<uint8_t>(i);
        compact1_hi[m][j] = static_cast<uint8_t>(8 + i);
        compact2[m][2 * j] = static_cast<uint8_t>(2 * i);
        compact2[m][2 * j + 1] = static_cast<uint8_t>(2 * i + 1);
        expand1[m][i] = static_cast<uint8_t>(j);
        expand2[m][2 * i] = static_cast<uint8_t>(2 * j);
        expand2[m][2 * i + 1] = static_cast<uint8_t>(2 * j + 1);
        ++j;
      }
    }
  }
};

const Tables& tables() {
  static const Tables t;
  return t;
}

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

template <int es>
constexpr uint64_t kDenseStep = es == 1 ? ~uint64_t{0} : 0xFFFFFFFFu;

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

bool has_avx2() { return cpu().avx2 && cpu().popcnt; }

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

// A dense step's 64 bytes as two 32-byte stores (compression and decompression).
__attribute__((target("avx512f"), always_inline)) inline void store_halves(uint8_t* d, __m512i v) {
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(d), _mm512_castsi512_si256(v));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(d + 32), _mm512_extracti64x4_epi64(v, 1));
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

bool has_avx512() { return cpu().avx512vbmi2 && cpu().popcnt; }

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

bool has_ssse3() { return cpu().ssse3 && cpu().popcnt; }

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
#endif

}  // namespace

namespace {

// Non-zero elements of [i0, i1). SSE2 (baseline on x86-64): zero lanes are counted in 8-bit
// (es = 1, at most 255 steps) or 16-bit (es = 2) accumulators, then summed.
int64_t count_range(const uint8_t* s, int64_t i0, int64_t i1, int es) {
  int64_t zeros = 0, i = i0;
#if defined(__SSE2__)
  const __m128i zero = _mm_setzero_si128();
  const int64_t lanes = 16 / es;
  while (i + lanes <= i1) {
    const int64_t steps_left = (i1 - i) / lanes;
    const int64_t steps = steps_left < 255 ? steps_left : 255;
    __m128i acc = zero;
    for (int64_t k = 0; k < steps; ++k, i += lanes) {
      const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i * es));
      acc = es == 1 ? _mm_sub_epi8(acc, _mm_cmpeq_epi8(v, zero)) : _mm_sub_epi16(acc, _mm_cmpeq_epi16(v, zero));
    }
    if (es == 2) acc = _mm_packus_epi16(acc, zero);  // each 16-bit count <= 255
    const __m128i sums = _mm_sad_epu8(acc, zero);
    zeros += _mm_cvtsi128_si64(sums) + _mm_cvtsi128_si64(_mm_unpackhi_epi64(sums, sums));
  }
#endif
  for (; i < i1; ++i) zeros += !nonzero(s + i * es, es);
  return (i1 - i0) - zeros;
}

}  // namespace

void sparse_count(const uint8_t* stream, int64_t n, int es, int64_t group_elems, int64_t* counts) {
  for (int64_t g = 0, i0 = 0; i0 < n; ++g, i0 += group_elems) {
    const int64_t i1 = n - i0 < group_elems ? n : i0 + group_elems;
    counts[g] = count_range(stream, i0, i1, es);
  }
}

int64_t sparse_compress(const uint8_t* stream, int64_t n, int es, uint8_t* wmb, uint8_t* data, int64_t data_cap,
                        KernelPath path) {
#ifdef NPUPACK_X86
  const bool avx512 = allows(path, KernelPath::kAvx512) && has_avx512();
  if (avx512 || (allows(path, KernelPath::kAvx2) && has_avx2())) {
    int64_t i = 0;
    const int64_t pos = avx512  ? (es == 1 ? compress_avx512<1>(stream, n, wmb, data, data_cap, i)
                                           : compress_avx512<2>(stream, n, wmb, data, data_cap, i))
                        : es == 1 ? compress_avx2<1>(stream, n, wmb, data, data_cap, i)
                                  : compress_avx2<2>(stream, n, wmb, data, data_cap, i);
    // i is a multiple of 8 here, so the scalar tail starts on a fresh WMB byte.
    std::memset(wmb + (i >> 3), 0, static_cast<size_t>((n + 7) / 8 - (i >> 3)));
    return compress_scalar(stream, i, n, es, wmb, data, pos, data_cap);
  }
  if (allows(path, KernelPath::kSsse3) && has_ssse3()) return compress_ssse3(stream, n, es, wmb, data, data_cap);
#else
  (void)path;
#endif
  std::memset(wmb, 0, static_cast<size_t>((n + 7) / 8));
  return compress_scalar(stream, 0, n, es, wmb, data, 0, data_cap);
}

// Groups of whole WMB bytes (every DC, Winograd and deconvolution stream: kernels per group are
// a multiple of 8) are compressed one call per group, so that a group's count is the DATA its
// call wrote and no second pass reads the WMB. Other sizes count the WMB bits afterwards.
int64_t sparse_compress_groups(const uint8_t* stream, int64_t n, int es, int64_t group_elems, uint8_t* wmb,
                               uint8_t* data, int64_t data_cap, int64_t* counts, KernelPath path) {
  if (group_elems % 8) {
    const int64_t written = sparse_compress(stream, n, es, wmb, data, data_cap, path);
    sparse_group_popcount(wmb, n, group_elems, counts);
    return written;
  }
  int64_t pos = 0;
  for (int64_t g = 0, i0 = 0; i0 < n; ++g, i0 += group_elems) {
    const int64_t len = n - i0 < group_elems ? n - i0 : group_elems;
    const int64_t written = sparse_compress(stream + i0 * es, len, es, wmb + i0 / 8, data + pos, data_cap - pos, path);
    counts[g] = written / es;
    pos += written;
  }
  return pos;
}

int64_t sparse_encode(const uint8_t* stream, int64_t n, int es, int64_t group_elems, uint8_t* wmb, int64_t wmb_size,
                      uint8_t* data, int64_t data_cap, uint8_t* wgs, int64_t wgs_size, int64_t align, KernelPath path) {
  const int64_t groups = n == 0 ? 0 : (n - 1) / group_elems + 1;
  if (wmb_size < (n + 7) / 8) throw LayoutError("sparse_encode: WMB buffer too small");
  if (wgs_size / 4 < groups) throw LayoutError("sparse_encode: WGS buffer too small");
  std::vector<int64_t> counts(static_cast<size_t>(groups));
  const int64_t written = sparse_compress_groups(stream, n, es, group_elems, wmb, data, data_cap, counts.data(), path);
  const int64_t padded = written <= align ? align : (written + align - 1) / align * align;
  if (padded > data_cap) throw LayoutError("sparse_encode: DATA buffer too small for its padding");
  std::memset(data + written, 0, static_cast<size_t>(padded - written));
  std::memset(wmb + (n + 7) / 8, 0, static_cast<size_t>(wmb_size - (n + 7) / 8));
  for (int64_t g = 0; g < groups; ++g) {  // every entry checked before WGS is written
    if (counts[g] * es > int64_t{0xFFFFFFFF}) {
      throw LayoutError("kernel_group_elements: a kernel group holds " + std::to_string(counts[g] * es) +
                        " bytes of non-zero data, more than a 32-bit WGS entry counts");
    }
  }
  for (int64_t g = 0; g < groups; ++g) {
    const uint32_t bytes = static_cast<uint32_t>(counts[g] * es);
    const uint8_t le[4] = {static_cast<uint8_t>(bytes), static_cast<uint8_t>(bytes >> 8),
                           static_cast<uint8_t>(bytes >> 16), static_cast<uint8_t>(bytes >> 24)};
    std::memcpy(wgs + 4 * g, le, 4);
  }
  std::memset(wgs + 4 * groups, 0, static_cast<size_t>(wgs_size - 4 * groups));
  return written;
}

namespace {

// Four words per iteration into four sums: with one sum, the loop runs at the latency of its
// add chain. Always inlined, so that the builtin becomes the popcnt instruction in a caller
// compiled for it.
__attribute__((always_inline)) inline int64_t popcount_bits(const uint8_t* wmb, int64_t n) {
  int64_t c, i = 0;
  int64_t part[4] = {0, 0, 0, 0};
  for (; i + 256 <= n; i += 256) {
    for (int k = 0; k < 4; ++k) {
      uint64_t w;
      std::memcpy(&w, wmb + i / 8 + 8 * k, 8);
      part[k] += __builtin_popcountll(w);
    }
  }
  c = part[0] + part[1] + part[2] + part[3];
  for (; i + 64 <= n; i += 64) {
    uint64_t w;
    std::memcpy(&w, wmb + i / 8, 8);
    c += __builtin_popcountll(w);
  }
  for (; i < n; ++i) c += (wmb[i >> 3] >> (i & 7)) & 1;
  return c;
}

#ifdef NPUPACK_X86
// The same loop compiled with the popcnt instruction (without it the builtin is a much slower
// bit-trick sequence).
__attribute__((target("popcnt"))) int64_t popcount_bits_hw(const uint8_t* wmb, int64_t n) {
  return popcount_bits(wmb, n);
}
#endif

}  // namespace

int64_t sparse_popcount(const uint8_t* wmb, int64_t n) {
#ifdef NPUPACK_X86
  if (has_ssse3()) return popcount_bits_hw(wmb, n);  // has_ssse3 also checks popcnt
#endif
  return popcount_bits(wmb, n);
}

void sparse_group_popcount(const uint8_t* wmb, int64_t n, int64_t group_elems, int64_t* counts) {
  for (int64_t g = 0, i0 = 0; i0 < n; ++g, i0 += group_elems) {
    const int64_t i1 = n - i0 < group_elems ? n : i0 + group_elems;
    int64_t c = 0, i = i0;
    for (; i < i1 && (i & 7); ++i) c += (wmb[i >> 3] >> (i & 7)) & 1;
    c += sparse_popcount(wmb + (i >> 3), i1 - i);
    counts[g] = c;
  }
}

void sparse_decompress(const uint8_t* data, int64_t data_size, const uint8_t* wmb, int64_t n, int es, uint8_t* out,
                       KernelPath path) {
  const int64_t need = sparse_popcount(wmb, n) * es;
  if (need > data_size) {
    throw LayoutError("decompress: the WMB marks " + std::to_string(need) + " bytes of non-zero data, DATA holds " +
                      std::to_string(data_size));
  }
  int64_t i = 0, pos = 0;
#ifdef NPUPACK_X86
  if (allows(path, KernelPath::kAvx512) && has_avx512()) {
    if (es == 1) {
      decompress_avx512<1>(data, data_size, wmb, n, out, i, pos);
    } else {
      decompress_avx512<2>(data, data_size, wmb, n, out, i, pos);
    }
  }
  if (allows(path, KernelPath::kSsse3) && has_ssse3()) decompress_ssse3(data, data_size, wmb, n, es, out, i, pos);
#else
  (void)path;
#endif
  // The count above was taken once; a caller's thread may set mask bits since (a racing writer
  // gets undefined values, never a read past DATA), so each read is bounded by DATA's size.
  for (; i < n; ++i) {
    uint8_t* o = out + i * es;
    if (((wmb[i >> 3] >> (i & 7)) & 1) && pos + es <= data_size) {
      std::memcpy(o, data + pos, static_cast<size_t>(es));
      pos += es;
    } else {
      std::memset(o, 0, static_cast<size_t>(es));
    }
  }
}

}  // namespace npupack
