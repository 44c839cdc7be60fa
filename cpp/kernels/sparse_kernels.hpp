// The kernels of NVDLA's sparse weight compression (docs/nvdla.md §11, docs/design.md §4.4):
// the scalar compaction every path ends in, and the x86 kernels in
// cpp/kernels/bitmask-{compress,decompress}_x8x16_*.cpp with the tables they share. Each file's
// list entry (BitmaskArgs, kernels.def) wraps its kernel; sparse.cpp chooses through the list
// (docs/design.md §4.9). Internal to the extension.
#pragma once
#include <cstdint>
#include <cstring>

#include "kernel.hpp"
#include "npupack/errors.hpp"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace npupack {
namespace sparse_kernels {

inline bool nonzero(const uint8_t* p, int es) {
  if (es == 1) return *p != 0;
  uint16_t v;
  std::memcpy(&v, p, 2);
  return v != 0;
}

// Scalar compaction of elements [i0, i1): bits OR-ed into wmb (the bytes must start zeroed).
inline int64_t compress_scalar(const uint8_t* s, int64_t i0, int64_t i1, int es, uint8_t* wmb, uint8_t* data,
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

#if defined(__x86_64__) || defined(__i386__)
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

inline const Tables& tables() {
  static const Tables t;
  return t;
}

template <int es>
constexpr uint64_t kDenseStep = es == 1 ? ~uint64_t{0} : 0xFFFFFFFFu;

// A dense step's 64 bytes as two 32-byte stores (compression and decompression).
__attribute__((target("avx512f"), always_inline)) inline void store_halves(uint8_t* d, __m512i v) {
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(d), _mm512_castsi512_si256(v));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(d + 32), _mm512_extracti64x4_epi64(v, 1));
}

// The declarations repeat their definitions' target attributes: a definition cannot add one to
// an earlier declaration.
#define NPUPACK_SPARSE_SSSE3 __attribute__((target("ssse3,popcnt")))
#define NPUPACK_SPARSE_AVX2 __attribute__((target("avx2,popcnt")))
#define NPUPACK_SPARSE_AVX512 __attribute__((target("avx512f,avx512bw,avx512vbmi2,popcnt")))
NPUPACK_SPARSE_SSSE3 int64_t compress_ssse3(const uint8_t* s, int64_t n, int es, uint8_t* wmb, uint8_t* data,
                                            int64_t cap);
template <int es>
NPUPACK_SPARSE_AVX2 int64_t compress_avx2(const uint8_t* __restrict s, int64_t n, uint8_t* __restrict wmb,
                                          uint8_t* __restrict data, int64_t cap, int64_t& i_done);
template <int es>
NPUPACK_SPARSE_AVX512 int64_t compress_avx512(const uint8_t* __restrict s, int64_t n, uint8_t* __restrict wmb,
                                              uint8_t* __restrict data, int64_t cap, int64_t& i_done);
NPUPACK_SPARSE_SSSE3 void decompress_ssse3(const uint8_t* data, int64_t data_size, const uint8_t* wmb, int64_t n,
                                           int es, uint8_t* out, int64_t& i_done, int64_t& pos_done);
template <int es>
NPUPACK_SPARSE_AVX512 void decompress_avx512(const uint8_t* __restrict data, int64_t data_size,
                                             const uint8_t* __restrict wmb, int64_t n, uint8_t* __restrict out,
                                             int64_t& i_done, int64_t& pos_done);
#undef NPUPACK_SPARSE_SSSE3
#undef NPUPACK_SPARSE_AVX2
#undef NPUPACK_SPARSE_AVX512
#endif  // x86

}  // namespace sparse_kernels
}  // namespace npupack
