// Copies of many equal rows (rows contiguous on both sides, strided between them): constant-size
// moves for the common row sizes, prefetch of strided rows, the pending slab prefetch spread over
// the rows, and the copy that tests fp16 halves as it moves them. Shared by the row-copy runner
// and any kernel that moves whole rows.
// Spec: docs/design.md §3.8 (memory traffic), §3.9 (fp16 checks during packing).
#pragma once
#include <algorithm>
#include <cstdint>
#include <cstring>

#include "npupack/cpu.hpp"
#include "npupack/prefetch.hpp"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif
#include "plan.hpp"

namespace npupack {
namespace detail {

// n rows of `row` bytes. The atom and channel-block sizes (32, 64, 128 bytes) and the short
// inner blocks of clDNN's 1x1 weights (i%4, i%8, i%16: 4, 8, 16 bytes) get a copy of constant
// size, which compiles to a move or a few instead of a memcpy call per row.
template <size_t N>
void copy_rows_n(const char* src, int64_t sstep, char* dst, int64_t dstep, int64_t n) {
  if (sstep > static_cast<int64_t>(N) && n >= 8) {
    // Rows far apart (1x1 DC weights: one channel block of each kernel of a group) are more
    // read streams than the hardware prefetchers follow; the rows' next blocks are read by the
    // next few calls, so ask for the line kRowsAhead bytes on in each row.
    for (int64_t i = 0; i < n; ++i) {
      __builtin_prefetch(src + i * sstep + kRowsAhead);
      std::memcpy(dst + i * dstep, src + i * sstep, N);
    }
    return;
  }
  for (int64_t i = 0; i < n; ++i) std::memcpy(dst + i * dstep, src + i * sstep, N);
}
// n rows of `row` bytes, W <= row < 2 * W: two overlapping moves of W bytes per row (3x3
// kernels swapped whole, as in ioyx: 9 or 18 bytes), instead of a memcpy call per row.
template <size_t W>
void copy_rows_overlap(const char* src, int64_t sstep, char* dst, int64_t dstep, int64_t n, size_t row) {
  for (int64_t i = 0; i < n; ++i) {
    std::memcpy(dst + i * dstep, src + i * sstep, W);
    std::memcpy(dst + i * dstep + row - W, src + i * sstep + row - W, W);
  }
}
#if defined(__x86_64__) || defined(__i386__)
// copy_rows_overlap<32> with 32-byte AVX moves, where the baseline build makes two 16-byte ones
// for each (post-extended row groups of 5x5 and 7x7 image weights: 40 or 56 bytes).
__attribute__((target("avx2"))) inline void copy_rows_overlap32_avx2(const char* src, int64_t sstep, char* dst,
                                                                    int64_t dstep, int64_t n, size_t row) {
  for (int64_t i = 0; i < n; ++i) {
    const char* s = src + i * sstep;
    char* d = dst + i * dstep;
    const __m256i head = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s));
    const __m256i tail = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + row - 32));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(d), head);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(d + row - 32), tail);
  }
}
#endif
// N bytes (a multiple of 16; dst 16-byte aligned) with non-temporal stores in order, so that
// whole lines of a line-aligned output are written back to back and none is read in first (SSE2,
// which every x86-64 has; plain elsewhere).
template <size_t N>
__attribute__((always_inline)) inline void stream_row(char* dst, const char* src) {
#if defined(__SSE2__)
  for (size_t b = 0; b < N; b += 16) {
    _mm_stream_si128(reinterpret_cast<__m128i*>(dst + b), _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + b)));
  }
#else
  std::memcpy(dst, src, N);
#endif
}
// copy_rows_n for the rows of a DC channel block (64 or 128 bytes), with the pending prefetch
// range (next_slab_part) spread over the rows: one row's share of lines before each row.
// Stream: rows that are whole lines of a line-aligned output (Plan::stream_lines).
template <size_t N, bool Stream = false>
void copy_rows_ahead(const char* src, int64_t sstep, char* dst, int64_t dstep, int64_t n, Ahead ahead) {
  for (int64_t i = 0; i < n; ++i) {
    ahead.step();
    if constexpr (Stream) stream_row<N>(dst + i * dstep, src + i * sstep);
    else std::memcpy(dst + i * dstep, src + i * sstep, N);
  }
}
// 16 or 32 bytes of 16-bit lanes as GCC vector types: copy_rows_max16 is one loop for both
// widths, which compiles to SSE2 or AVX2 moves as the function it is inlined into is targeted
// (plain C++ elsewhere).
typedef int16_t Halves16 __attribute__((vector_size(16)));
typedef int16_t Halves32 __attribute__((vector_size(32)));
template <class Vec, int64_t N, bool Stream = false>
__attribute__((always_inline)) inline bool copy_rows_max16(const char* src, int64_t sstep, char* dst,
                                                           int64_t dstep, int64_t n, int64_t row, Ahead ahead) {
  constexpr int64_t kV = static_cast<int64_t>(sizeof(Vec));
  if (N > 0) row = N;
  const Vec mag = Vec{} + 0x7FFF;
  Vec top{};
  int16_t top1 = 0;  // rows shorter than a vector, half by half
  const auto move = [&](const char* s, char* d) {
    Vec v;
    std::memcpy(&v, s, sizeof v);
    if constexpr (Stream) stream_row<sizeof(Vec)>(d, reinterpret_cast<const char*>(&v));
    else std::memcpy(d, &v, sizeof v);
    const Vec m = v & mag;
    top = top > m ? top : m;
  };
  for (int64_t i = 0; i < n; ++i) {
    ahead.step();
    const char* s = src + i * sstep;
    char* d = dst + i * dstep;
    if (N == 0 && row < kV) {
      for (int64_t b = 0; b + 2 <= row; b += 2) {
        int16_t h;
        std::memcpy(&h, s + b, 2);
        std::memcpy(d + b, &h, 2);
        top1 = std::max<int16_t>(top1, static_cast<int16_t>(h & 0x7FFF));
      }
      continue;
    }
    int64_t b = 0;
#pragma GCC unroll 8
    for (; b + kV <= row; b += kV) move(s + b, d + b);
    // A row that is not a whole number of vectors (a short last channel block): its last vector
    // overlaps the one before and moves some halves twice, the same values.
    if (N == 0 && b < row) move(s + row - kV, d + row - kV);
  }
  // Any lane over the largest finite magnitude (0x7BFF), reduced through 64-bit words.
  const Vec over = top > (Vec{} + 0x7BFF);
  uint64_t words[sizeof(Vec) / 8];
  std::memcpy(words, &over, sizeof words);
  uint64_t any = 0;
  for (uint64_t w : words) any |= w;
  return any == 0 && top1 <= 0x7BFF;
}
#if defined(__x86_64__) || defined(__i386__)
template <int64_t N, bool Stream>
__attribute__((target("avx2"))) bool copy_rows_finite16_avx2(const char* src, int64_t sstep, char* dst,
                                                             int64_t dstep, int64_t n, Ahead ahead) {
  return copy_rows_max16<Halves32, N, Stream>(src, sstep, dst, dstep, n, N, ahead);
}
#endif
// copy_rows_ahead for rows of `row` bytes (even) of 16-bit elements, returning whether every
// element moved is finite as binary16 (kFp16NonFinite): the test rides on the copy's loads
// instead of a second pass over the slab. N > 0: rows of exactly N bytes (channel blocks of 64
// or 128 bytes), unrolled, with 32-byte moves where the CPU has AVX2; 0: any even size (a short
// last channel block), 16 bytes at a time, the last 16 overlapping; rows under 16 bytes half by
// half, as a 16-byte load would read past them. An exponent of all ones is a magnitude (h & 0x7FFF) of 0x7C00 or more,
// so the loop keeps only the largest magnitude per lane and compares once at the end (and + max
// per vector instead of and + compare + or), which makes the test almost free next to the copy.
// Stream: rows that are whole lines of a line-aligned output (N 64 or 128), non-temporal stores.
template <int64_t N, bool Stream = false>
bool copy_rows_finite16(const char* src, int64_t sstep, char* dst, int64_t dstep, int64_t n, int64_t row,
                        Ahead ahead) {
#if defined(__x86_64__) || defined(__i386__)
  if constexpr (N > 0 && N % 32 == 0) {
    if (cpu().avx2) return copy_rows_finite16_avx2<N, Stream>(src, sstep, dst, dstep, n, ahead);
  }
#endif
  return copy_rows_max16<Halves16, N, Stream>(src, sstep, dst, dstep, n, row, ahead);
}
// n rows of `row` bytes, by the constant-size copies above where the size has one.
inline void copy_rows(const char* src, int64_t sstep, char* dst, int64_t dstep, int64_t n, size_t row) {
  if (row > 4 && row < 64 && row != 8 && row != 16 && row != 32) {
    if (row < 8) return copy_rows_overlap<4>(src, sstep, dst, dstep, n, row);
    if (row < 16) return copy_rows_overlap<8>(src, sstep, dst, dstep, n, row);
    if (row < 32) return copy_rows_overlap<16>(src, sstep, dst, dstep, n, row);
#if defined(__x86_64__) || defined(__i386__)
    if (cpu().avx2) return copy_rows_overlap32_avx2(src, sstep, dst, dstep, n, row);
#endif
    return copy_rows_overlap<32>(src, sstep, dst, dstep, n, row);
  }
  switch (row) {
    case 4: return copy_rows_n<4>(src, sstep, dst, dstep, n);
    case 8: return copy_rows_n<8>(src, sstep, dst, dstep, n);
    case 16: return copy_rows_n<16>(src, sstep, dst, dstep, n);
    case 32: return copy_rows_n<32>(src, sstep, dst, dstep, n);
    case 64: return copy_rows_n<64>(src, sstep, dst, dstep, n);
    case 128: return copy_rows_n<128>(src, sstep, dst, dstep, n);
    default:
      for (int64_t i = 0; i < n; ++i) std::memcpy(dst + i * dstep, src + i * sstep, row);
  }
}

}  // namespace detail
}  // namespace npupack
