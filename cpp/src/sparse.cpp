#include "npupack/sparse.hpp"

#include <cstring>
#include <string>

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
// Shuffle tables: for an 8-bit mask m, kCompact1[m] gathers the bytes whose bit is set to the
// front (8 lanes of 1 byte); kCompact2[m] does the same for 8 lanes of 2 bytes.
struct Tables {
  alignas(16) uint8_t compact1[256][16];
  alignas(16) uint8_t compact1_hi[256][8];  // compact1 + 8: the same gather on the upper 8 bytes
  alignas(16) uint8_t compact2[256][16];
  alignas(16) uint8_t expand1[256][16];
  alignas(16) uint8_t expand2[256][16];
  uint64_t byte_mask[256];  // 0xFF in byte i where bit i of the index is set
  uint64_t half_mask[16];   // 0xFFFF in half i where bit i of the index is set
  Tables() {
    for (int m = 0; m < 256; ++m) {
      byte_mask[m] = 0;
      for (int i = 0; i < 8; ++i) byte_mask[m] |= (m >> i & 1) ? uint64_t{0xFF} << (8 * i) : 0;
    }
    for (int m = 0; m < 16; ++m) {
      half_mask[m] = 0;
      for (int i = 0; i < 4; ++i) half_mask[m] |= (m >> i & 1) ? uint64_t{0xFFFF} << (16 * i) : 0;
    }
    for (int m = 0; m < 256; ++m) {
      int j = 0;
      std::memset(compact1[m], 0x80, 16);
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

// 32 bytes per step (AVX2 compare, BMI2 compaction): the inverted compare result is, per 8-byte
// quarter, exactly the byte mask of the kept bytes (es = 1) or kept halves (es = 2), so pext
// compacts a quarter in one instruction and popcnt(mask) / 8 is the bytes it keeps. A dense
// step (nothing to drop) is one 32-byte store. Chosen only where pext is a single fast
// instruction (not on AMD Zen 1/2, where it is microcoded).
template <int es>
// The three buffers never overlap (__restrict): without it every store to DATA or WMB would
// order the following loads of the stream behind it.
__attribute__((target("avx2,bmi,bmi2,popcnt"))) int64_t compress_avx2(const uint8_t* __restrict s, int64_t n,
                                                                     uint8_t* __restrict wmb,
                                                                     uint8_t* __restrict data, int64_t cap,
                                                                     int64_t& i_done) {
  const Tables& T = tables();
  const __m256i zero = _mm256_setzero_si256();
  constexpr int64_t step = 32 / es;  // elements per step; a multiple of 8, so WMB bytes stay whole
  int64_t pos = 0, i = 0;
  for (; i + step <= n && pos + 32 <= cap; i += step) {
    const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + i * es));
    const __m256i z = es == 1 ? _mm256_cmpeq_epi8(v, zero) : _mm256_cmpeq_epi16(v, zero);
    const uint32_t zbits = static_cast<uint32_t>(_mm256_movemask_epi8(z));
    if constexpr (es == 1) {
      const uint32_t m = ~zbits;
      std::memcpy(wmb + (i >> 3), &m, 4);
    } else {
      const uint16_t m = static_cast<uint16_t>(~_pext_u32(zbits, 0x55555555u));
      std::memcpy(wmb + (i >> 3), &m, 2);
    }
    if (zbits == 0) {
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(data + pos), v);
      pos += 32;
      continue;
    }
    // Per 8-byte quarter: its kept-byte mask from a table indexed by its mask bits (general
    // registers only: moving vector lanes to them was the bottleneck), pext, and an offset from
    // prefix sums that do not depend on pos, so one step chains to the next by a single add.
    const uint32_t keep = ~zbits;  // two bits per element for es = 2
    uint64_t packed[4];
    int64_t at[5] = {0};
    for (int q = 0; q < 4; ++q) {
      const uint32_t bits = (keep >> (8 * q)) & 0xFFu;
      const uint64_t mask = es == 1 ? T.byte_mask[bits] : T.half_mask[_pext_u32(bits, 0x55u)];
      uint64_t x;
      std::memcpy(&x, s + i * es + 8 * q, 8);
      packed[q] = _pext_u64(x, mask);
      at[q + 1] = at[q] + __builtin_popcount(bits);  // kept bytes: one bit per byte of the quarter
    }
    for (int q = 0; q < 4; ++q) std::memcpy(data + pos + at[q], &packed[q], 8);
    pos += at[4];
  }
  i_done = i;
  return pos;
}

bool has_fast_pext() { return cpu().avx2 && cpu().popcnt && cpu().fast_pext; }

__attribute__((target("ssse3,popcnt"))) void decompress_ssse3(const uint8_t* data, int64_t data_size, const uint8_t* wmb,
                                                        int64_t n, int es, uint8_t* out, int64_t& i_done,
                                                        int64_t& pos_done) {
  const Tables& T = tables();
  int64_t pos = 0, i = 0;
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
  const bool avx2 = path == KernelPath::kAvx2 ? cpu().avx2 && cpu().bmi2 && cpu().popcnt
                                              : path == KernelPath::kAuto && has_fast_pext();
  if (avx2) {
    int64_t i = 0;
    const int64_t pos = es == 1 ? compress_avx2<1>(stream, n, wmb, data, data_cap, i)
                                : compress_avx2<2>(stream, n, wmb, data, data_cap, i);
    // i is a multiple of 8 here, so the scalar tail starts on a fresh WMB byte.
    std::memset(wmb + (i >> 3), 0, static_cast<size_t>((n + 7) / 8 - (i >> 3)));
    return compress_scalar(stream, i, n, es, wmb, data, pos, data_cap);
  }
  if (path != KernelPath::kScalar && has_ssse3()) return compress_ssse3(stream, n, es, wmb, data, data_cap);
#else
  (void)path;
#endif
  std::memset(wmb, 0, static_cast<size_t>((n + 7) / 8));
  return compress_scalar(stream, 0, n, es, wmb, data, 0, data_cap);
}

namespace {

template <bool Hw>
int64_t popcount_bits(const uint8_t* wmb, int64_t n) {
  int64_t c = 0, i = 0;
  for (; i + 64 <= n; i += 64) {
    uint64_t w;
    std::memcpy(&w, wmb + i / 8, 8);
    c += __builtin_popcountll(w);
  }
  for (; i < n; ++i) c += (wmb[i >> 3] >> (i & 7)) & 1;
  return c;
}

#ifdef NPUPACK_X86
// The same loop compiled with the popcnt instruction (without it the builtin is a bit-trick
// sequence several times slower).
__attribute__((target("popcnt"))) int64_t popcount_bits_hw(const uint8_t* wmb, int64_t n) {
  return popcount_bits<true>(wmb, n);
}
#endif

}  // namespace

int64_t sparse_popcount(const uint8_t* wmb, int64_t n) {
#ifdef NPUPACK_X86
  if (has_ssse3()) return popcount_bits_hw(wmb, n);  // has_ssse3 also checks popcnt
#endif
  return popcount_bits<false>(wmb, n);
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

void sparse_decompress(const uint8_t* data, int64_t data_size, const uint8_t* wmb, int64_t n, int es, uint8_t* out) {
  const int64_t need = sparse_popcount(wmb, n) * es;
  if (need > data_size) {
    throw LayoutError("decompress: the WMB marks " + std::to_string(need) + " bytes of non-zero data, DATA holds " +
                      std::to_string(data_size));
  }
  int64_t i = 0, pos = 0;
#ifdef NPUPACK_X86
  if (has_ssse3()) decompress_ssse3(data, data_size, wmb, n, es, out, i, pos);
#endif
  for (; i < n; ++i) {
    uint8_t* o = out + i * es;
    if ((wmb[i >> 3] >> (i & 7)) & 1) {
      std::memcpy(o, data + pos, static_cast<size_t>(es));
      pos += es;
    } else {
      std::memset(o, 0, static_cast<size_t>(es));
    }
  }
}

}  // namespace npupack
