#include "npupack/sparse.hpp"

#include <cstring>
#include <string>

#include "npupack/errors.hpp"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define NPUPACK_X86 1
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
  alignas(16) uint8_t compact2[256][16];
  alignas(16) uint8_t expand1[256][16];
  alignas(16) uint8_t expand2[256][16];
  Tables() {
    for (int m = 0; m < 256; ++m) {
      int j = 0;
      std::memset(compact1[m], 0x80, 16);
      std::memset(compact2[m], 0x80, 16);
      std::memset(expand1[m], 0x80, 16);
      std::memset(expand2[m], 0x80, 16);
      for (int i = 0; i < 8; ++i) {
        if (!(m >> i & 1)) continue;
        compact1[m][j] = static_cast<uint8_t>(i);
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
__attribute__((target("ssse3"))) int64_t compress_ssse3(const uint8_t* s, int64_t n, int es, uint8_t* wmb,
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
      const __m128i a = _mm_shuffle_epi8(v, _mm_load_si128(reinterpret_cast<const __m128i*>(T.compact1[lo])));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(data + pos), a);
      pos += __builtin_popcount(lo);
      const __m128i b = _mm_shuffle_epi8(_mm_srli_si128(v, 8),
                                         _mm_load_si128(reinterpret_cast<const __m128i*>(T.compact1[hi])));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(data + pos), b);
      pos += __builtin_popcount(hi);
    }
  } else {
    for (; i + 8 <= n && pos + 16 <= cap; i += 8) {
      const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + 2 * i));
      const __m128i z = _mm_cmpeq_epi16(v, zero);
      const unsigned m = ~static_cast<unsigned>(_mm_movemask_epi8(_mm_packs_epi16(z, z))) & 0xFFu;
      wmb[i >> 3] = static_cast<uint8_t>(m);
      const __m128i a = _mm_shuffle_epi8(v, _mm_load_si128(reinterpret_cast<const __m128i*>(T.compact2[m])));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(data + pos), a);
      pos += 2 * __builtin_popcount(m);
    }
  }
  // i is a multiple of 8 here, so the scalar tail starts on a fresh WMB byte.
  std::memset(wmb + (i >> 3), 0, static_cast<size_t>((n + 7) / 8 - (i >> 3)));
  return compress_scalar(s, i, n, es, wmb, data, pos, cap);
}

__attribute__((target("ssse3"))) void decompress_ssse3(const uint8_t* data, int64_t data_size, const uint8_t* wmb,
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

bool has_ssse3() {
  static const bool yes = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("ssse3") != 0;
  }();
  return yes;
}
#endif

}  // namespace

void sparse_count(const uint8_t* stream, int64_t n, int es, int64_t group_elems, int64_t* counts) {
  for (int64_t g = 0, i0 = 0; i0 < n; ++g, i0 += group_elems) {
    const int64_t i1 = n - i0 < group_elems ? n : i0 + group_elems;
    int64_t c = 0;
    // Branch-free, so the compiler vectorises both loops.
    if (es == 1) {
      for (int64_t i = i0; i < i1; ++i) c += stream[i] != 0;
    } else {
      for (int64_t i = i0; i < i1; ++i) c += (stream[2 * i] | stream[2 * i + 1]) != 0;
    }
    counts[g] = c;
  }
}

int64_t sparse_compress(const uint8_t* stream, int64_t n, int es, uint8_t* wmb, uint8_t* data, int64_t data_cap) {
#ifdef NPUPACK_X86
  if (has_ssse3()) return compress_ssse3(stream, n, es, wmb, data, data_cap);
#endif
  std::memset(wmb, 0, static_cast<size_t>((n + 7) / 8));
  return compress_scalar(stream, 0, n, es, wmb, data, 0, data_cap);
}

int64_t sparse_popcount(const uint8_t* wmb, int64_t n) {
  int64_t c = 0, i = 0;
  for (; i + 64 <= n; i += 64) {
    uint64_t w;
    std::memcpy(&w, wmb + i / 8, 8);
    c += __builtin_popcountll(w);
  }
  for (; i < n; ++i) c += (wmb[i >> 3] >> (i & 7)) & 1;
  return c;
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
