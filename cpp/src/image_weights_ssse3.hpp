// Image-input weights by byte permutation with SSSE3 (docs/nvdla.md §8.3-8.5): the window table
// of image_weights_table.hpp applied 16 output bytes at a time, each chunk the OR of a few pshufb
// of 16-byte loads from the window (an index with its top bit set makes a zero byte). A step
// then makes m kernels' row groups from a handful of loads and shuffles, where interleaving each
// kernel's planes into pixels and copying its rows out cost a call, plane loads and row moves
// per kernel.
#pragma once
#include <algorithm>
#include <cstdint>
#include <cstring>

#include "image_weights_table.hpp"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define NPUPACK_IMAGE_SHUFFLE 1

namespace npupack {
namespace image {

// The steps of a window table: chunk j (16 output bytes) is the OR of the shuffles
// first[j] .. first[j + 1] - 1, shuffle i taking its bytes from the 16 at offset[i] of the window.
struct ShuffleTable {
  static constexpr int kMaxShuffles = 16;
  int64_t chunks = 0;  // 16-byte output chunks of a step (m * seg bytes, rounded up)
  int64_t reach = 0;   // bytes from the window start that a step reads
  int first[5] = {};
  int offset[kMaxShuffles] = {};
  alignas(16) int8_t control[kMaxShuffles][16] = {};
};

// A geometry's tables: the row groups before the last one and the last (maybe short), with
// their shuffle steps where the SSSE3 pass applies them; fits is false where a table needs more
// shuffles than a ShuffleTable holds.
struct WindowTables {
  int64_t key[8] = {};
  RowTable first{}, last{};
  ShuffleTable first_st, last_st;
  bool fits = false;
  static const WindowTables& none() {
    static const WindowTables empty;
    return empty;
  }
};

// The shuffles of table t for m kernels: each takes the lowest window byte a chunk still needs
// and every other byte of the chunk within 16 bytes of it. False when the chunks need more than
// kMaxShuffles (the interleaving pass runs then).
inline bool shuffle_table(const RowTable& t, int64_t m, ShuffleTable& st) {
  st = ShuffleTable{};
  const int64_t full = m * t.seg;
  st.chunks = (full + 15) / 16;
  int n = 0;
  for (int64_t j = 0; j < st.chunks; ++j) {
    st.first[j] = n;
    uint32_t need = 0;  // chunk positions not yet given a byte
    for (int64_t p = 0; p < 16 && 16 * j + p < full; ++p) {
      if (t.keep >> (16 * j + p) & 1) need |= 1u << p;
    }
    while (need != 0) {
      if (n == ShuffleTable::kMaxShuffles) return false;
      int low = 255;
      for (int p = 0; p < 16; ++p) {
        if (need >> p & 1) low = std::min<int>(low, t.index[16 * j + p]);
      }
      st.offset[n] = low;
      st.reach = std::max<int64_t>(st.reach, low + 16);
      for (int p = 0; p < 16; ++p) {
        const int at = t.index[16 * j + p] - low;
        const bool take = (need >> p & 1) && at < 16;
        st.control[n][p] = static_cast<int8_t>(take ? at : -1);
        if (take) need &= ~(1u << p);
      }
      ++n;
    }
  }
  st.first[st.chunks] = n;
  return true;
}

// The row groups of kernels k0 .. k0 + kn - 1 at their row a * f, m kernels per step, written
// back to back from d: kn * t.seg bytes and not one more (a step that would pass them, or that
// holds kernels past kn, goes through a buffer). Nothing at or past end is read: a window that
// reaches it is copied into a zeroed buffer first.
__attribute__((target("ssse3"))) inline void row_groups_ssse3(const char* src, const char* end,
                                                             const ImageWeightsSpec& sp, int64_t k0, int64_t kn,
                                                             int64_t a, int64_t m, const RowTable& t,
                                                             const ShuffleTable& st, char* d) {
  const int64_t seg = t.seg, kbytes = sp.c * sp.r * sp.s * sp.es, full = m * seg, chunks = st.chunks;
  const int64_t reach = st.reach;
  const char* const stop = d + kn * seg;
  const char* w = src + k0 * kbytes + a * sp.f * sp.s * sp.es;
  alignas(16) char window[128 + 16];  // >= reach: window indices stay below 128
  alignas(16) char chunk_buf[64];
  for (int64_t q = 0; q < kn; q += m, w += m * kbytes, d += full) {
    const char* base = w;
    if (end - w < reach) {
      std::memset(window, 0, sizeof window);
      std::memcpy(window, w, static_cast<size_t>(std::max<int64_t>(0, end - w)));
      base = window;
    }
    const bool whole = d + 16 * chunks <= stop;
    char* o = whole ? d : chunk_buf;
    for (int64_t j = 0; j < chunks; ++j) {
      __m128i v = _mm_setzero_si128();
      for (int i = st.first[j]; i < st.first[j + 1]; ++i) {
        const __m128i in = _mm_loadu_si128(reinterpret_cast<const __m128i*>(base + st.offset[i]));
        v = _mm_or_si128(v, _mm_shuffle_epi8(in, _mm_load_si128(reinterpret_cast<const __m128i*>(st.control[i]))));
      }
      _mm_storeu_si128(reinterpret_cast<__m128i*>(o + 16 * j), v);
    }
    if (!whole) std::memcpy(d, chunk_buf, static_cast<size_t>(std::min<int64_t>(full, stop - d)));
  }
}

}  // namespace image
}  // namespace npupack
#endif
