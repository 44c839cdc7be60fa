// Narrow transposes (internal to the transpose kernels of cpp/kernels): source rows of 9..16 columns, the shape of every
// 3x3 kernel (9 taps per channel) in NVDLA DC weights and clDNN's os_is_yx_* weight formats; and
// the rotation stage (rotate<N>) of the tap rotation kernels, 9 or 25 taps.
//
// The generic kernel covers 9 columns with two overlapping 8-column blocks, which does the work of
// 16 columns. Here each row is read whole (16 bytes; 32 for 16-bit elements) and one full
// transpose network runs once, its unused outputs pruned at compile time (NC, the column count,
// is a template argument). The AVX2 variant of the byte network runs two networks side by side,
// one per 128-bit lane: lane 0 holds rows r..r+15, lane 1 rows r+16..r+31, so each 256-bit result
// is 32 consecutive rows of one column, which is one store.
//
// A whole-row load may reach past the row's last column. It stays inside the matrix (the bytes
// belong to the next row) except for the matrix's last row, which is read so that the read ends
// at its last element and then shifted into place: nothing outside [first row, last element] is
// ever read.
//
// The network (network.inc) is compiled once per instruction set, each copy in its own
// namespace and the AVX2 one inside a target pragma, so the baseline copy has no AVX instruction.
#pragma once
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "npupack/prefetch.hpp"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace npupack {
namespace narrow {

// The row and batch descriptions below are portable: the block loops of transpose.cpp take them on
// every target; the SIMD kernels after them exist only on x86.

// The rows of a block: row k starts at first + k * stride. With Ends, row `last` is the one row
// whose whole-row read would pass the matrix's last element; the loads read it so that the read
// ends exactly at its last element and shift the bytes into place. Only the matrix's last row can
// be such a row: rows are at least row_bytes apart and a read overshoots by less than that.
//
// Fixed, when not 0, is the stride known at compile time (rows back to back: the common case of a
// contiguous source), so every row address is the block start plus a constant.
//
// Last, when not -1, is `last` known at compile time: the block that holds the matrix's last row
// is the final one, which over_rows places to end at that row, so the row is the block's last
// (and the per-row checks fold away).
template <bool Ends, int64_t Fixed = 0, int Last = -1>
struct Rows {
  const char* first;
  int64_t stride;
  int last;
  const char* operator()(int k) const { return first + k * (Fixed ? Fixed : stride); }
  bool is_last(int k) const { return Ends && k == (Last >= 0 ? Last : last); }
};

// The rows of a strided matrix: block<N, Width, Fixed>(r, f) calls f(Rows) for rows r..r+N-1
// (the check for a last row is compiled only into the one block that holds it; rows exactly
// Fixed bytes apart get constant offsets).
struct RowReader {
  const char* base;
  int64_t stride, rows, row_bytes;

  template <int N, int Width, int64_t Fixed, class F>
  void block(int64_t r, F&& f) const {
    const char* first = base + r * stride;
    const bool ends = (r + N - 1) * stride + Width > (rows - 1) * stride + row_bytes;
    const int last = static_cast<int>(rows - 1 - r);
    if (stride == Fixed) {
      if (!ends) f(Rows<false, Fixed>{first, stride, -1});
      else if (last == N - 1) f(Rows<true, Fixed, N - 1>{first, stride, last});
      else f(Rows<true, Fixed>{first, stride, last});
    } else {
      if (!ends) f(Rows<false>{first, stride, -1});
      else if (last == N - 1) f(Rows<true, 0, N - 1>{first, stride, last});
      else f(Rows<true>{first, stride, last});
    }
  }
};

// Equally spaced matrices transposed in one call: matrix i starts at src + i * sstep and
// dst + i * dstep (bytes). `ahead`, when not null, is a source range of `ahead_bytes` that the
// caller will read next (DC weights: the next kernel group), prefetched a share at a time
// between the blocks of this batch instead of each matrix's successor (prefetch_next).
struct Batch {
  int64_t count = 1, sstep = 0, dstep = 0;
  const char* ahead = nullptr;
  int64_t ahead_bytes = 0;
};

// Batch::ahead spread over `steps` blocks of the batch.
inline Ahead ahead_of(const Batch& b, int64_t steps) { return Ahead(b.ahead, b.ahead_bytes, steps); }

// Calls block(r) for blocks of rb rows covering [0, rows) (rows >= rb); a remainder is one last
// block overlapping the previous one, which rewrites the same values.
template <class Block>
inline void over_rows(int64_t rows, int64_t rb, Block block) {
  for (int64_t r = 0;; r += rb) {
    if (r + rb > rows) r = rows - rb;
    block(r);
    if (r + rb >= rows) break;
  }
}

#if defined(__x86_64__) || defined(__i386__)
#define NPUPACK_AI __attribute__((always_inline)) static inline
// For the AVX2 kernels' entry points: over_batch, over_rows and the lambdas they call are
// compiled without the AVX2 target (they serve every instruction set), so GCC cannot inline an
// AVX2 block into them and called it once per block, with a vzeroupper and the block's constants
// reloaded each time. Flattening inlines the whole loop into the AVX2 entry point, so the
// vzeroupper and the constants' loads happen once per call.
#define NPUPACK_FLAT __attribute__((flatten))

// 16 bytes from row k, whose first `Bytes` (9..16) are the row's; for the last row the read ends
// at its last byte (SSE2, so every instruction set may use it).
template <int Bytes, bool Ends, int64_t Fixed, int Last>
__attribute__((always_inline)) inline __m128i load_row(const Rows<Ends, Fixed, Last>& row, int k) {
  if (row.is_last(k)) {
    const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(row(k) + Bytes - 16));
    return _mm_srli_si128(v, 16 - Bytes);
  }
  return _mm_loadu_si128(reinterpret_cast<const __m128i*>(row(k)));
}

// 16 bytes to column k of cursor d: a non-temporal store for a streamed destination (SSE2, so
// every instruction set may use it).
template <class Cur>
__attribute__((always_inline)) inline void put16(const Cur& d, int64_t k, __m128i v) {
  if constexpr (Cur::kStream) _mm_stream_si128(reinterpret_cast<__m128i*>(d[k]), v);
  else _mm_storeu_si128(reinterpret_cast<__m128i*>(d[k]), v);
}

// For outputs far larger than the caches (a streamed destination): the rows of a tall matrix are
// N read streams, more than the hardware prefetchers follow, and the reads waited on memory.
// Once per cache line of a row (every Per columns), ask for the line 256 bytes ahead in each
// row (a distance chosen by measurement, docs/performance.md).
template <int N, int Per, class Cur>
NPUPACK_AI void prefetch_rows(const Cur& s, int64_t c) {
  if (c % Per != 0) return;
  for (int k = 0; k < N; ++k) _mm_prefetch(s[k] + 256, _MM_HINT_T0);
}

// A batch of contiguous matrices whose rows continue after each matrix (DC weights: the next
// channel block of the same kernel, read by the next batch): 32 and more kernel rows far apart
// are more read streams than the hardware prefetchers follow, and past the caches the loads
// waited on memory. Ask for each matrix's successor one batch ahead, once per cache line, into L2
// (a batch's successors are more than L1 holds; the rotation kernels do enough work per line that
// an L2 hit costs them little, and L2 keeps more misses in flight than L1). Not when
// the successor is the batch's next matrix (b_fs_yx_fsv16 over 3x3 planes): that is one
// sequential stream, which the hardware follows, and the prefetches would only cost time.
__attribute__((always_inline)) inline void prefetch_next(const RowReader& in, const Batch& b) {
  const int64_t bytes = in.rows * in.stride;
  if (b.count < 2 || in.stride != in.row_bytes || b.ahead != nullptr || b.sstep == bytes) return;
  for (int64_t off = 0; off < bytes; off += 64) _mm_prefetch(in.base + bytes + off, _MM_HINT_T1);
}

// The loop of a batch kernel: matrix by matrix (each prefetching its successor, prefetch_next),
// blocks of N rows (over_rows), Batch::ahead spread over the blocks. block(in, col, r) transposes
// rows r..r+N-1 of the matrix `in` into `col`.
template <int N, class DC, class Block>
__attribute__((always_inline)) inline void over_batch(RowReader in, DC col, const Batch& batch, Block block) {
  Ahead ahead = ahead_of(batch, batch.count * ((in.rows + N - 1) / N));
  for (int64_t i = 0; i < batch.count; ++i, in.base += batch.sstep, col.base += batch.dstep) {
    prefetch_next(in, batch);
    over_rows(in.rows, N, [&](int64_t r) {
      ahead.step();
      block(in, col, r);
    });
  }
}

// One stage of the rotation kernels (avx2 run_taps9, avx512 run_taps): a rotation of the N
// registers w[0..N-1] by `Shift` at the positions that Blend selects (blend(a, b) takes those
// positions of b; it writes its result through `out`, and the blend, which may hold a mask
// register, comes by reference, so that no vector is passed or returned by value in this
// function, which is compiled for every instruction set): w[v] takes them from w[v - Shift].
// Register type and blend come from the instruction set that inlines it.
template <int N, int Shift, class R, class Blend>
__attribute__((always_inline)) inline void rotate(R w[N], const Blend& blend) {
  R n[N];
#pragma GCC unroll 32
  for (int v = 0; v < N; ++v) blend(n[v], w[v], w[(v + N - Shift) % N]);
#pragma GCC unroll 32
  for (int v = 0; v < N; ++v) w[v] = n[v];
}

namespace sse2 {
// The network on 128-bit registers: 16 rows per block.
struct V {
  using reg = __m128i;
  static constexpr int kRowsU8 = 16;
  NPUPACK_AI reg lo8(reg a, reg b) { return _mm_unpacklo_epi8(a, b); }
  NPUPACK_AI reg hi8(reg a, reg b) { return _mm_unpackhi_epi8(a, b); }
  NPUPACK_AI reg lo16(reg a, reg b) { return _mm_unpacklo_epi16(a, b); }
  NPUPACK_AI reg hi16(reg a, reg b) { return _mm_unpackhi_epi16(a, b); }
  NPUPACK_AI reg lo32(reg a, reg b) { return _mm_unpacklo_epi32(a, b); }
  NPUPACK_AI reg hi32(reg a, reg b) { return _mm_unpackhi_epi32(a, b); }
  NPUPACK_AI reg lo64(reg a, reg b) { return _mm_unpacklo_epi64(a, b); }
  NPUPACK_AI reg hi64(reg a, reg b) { return _mm_unpackhi_epi64(a, b); }
  template <int Bytes, bool Ends, int64_t Fixed, int Last>
  NPUPACK_AI reg load(const Rows<Ends, Fixed, Last>& row, int k) { return load_row<Bytes>(row, k); }
  NPUPACK_AI void store(char* d, reg v) { _mm_storeu_si128(reinterpret_cast<reg*>(d), v); }
};
#include "network.inc"
}  // namespace sse2

#endif  // x86

}  // namespace narrow
}  // namespace npupack
