// The addressing and loop helpers every transpose kernel of cpp/kernels is built from, and the
// SSE2 register helpers of the SSE2 / SSSE3 kernels. Internal to cpp/kernels.
#pragma once
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "kernel.hpp"
#include "narrow.hpp"

#if defined(__x86_64__) || defined(__i386__)
#include <emmintrin.h>
#include <tmmintrin.h>
#endif

namespace npupack {
namespace kernels {

// Addressing of source rows and destination columns: uniform strides or offset tables. The
// kernels are templates over these; at(i, j) gives a cursor for rows/columns i, i+1, ... (element
// offset j inside them) whose [k] is row/column i+k, so the strided case compiles to the same
// pointer arithmetic as a hand-written strided kernel.
// Stream: the destination is written with non-temporal stores (StreamOut; see transpose_stream).
template <class P, bool Stream = false>
struct StridedT {
  P base;
  int64_t stride;
  struct Cursor {
    static constexpr bool kStream = Stream;
    P p;
    int64_t stride;
    P operator[](int64_t k) const { return p + k * stride; }
  };
  Cursor at(int64_t i, int64_t byte) const { return {base + i * stride + byte, stride}; }
  P operator()(int64_t i) const { return base + i * stride; }
};
template <class P, bool Stream = false>
struct TableT {
  P base;
  const int64_t* off;
  struct Cursor {
    static constexpr bool kStream = Stream;
    P p;
    const int64_t* off;
    P operator[](int64_t k) const { return p + off[k]; }
  };
  Cursor at(int64_t i, int64_t byte) const { return {base + byte, off + i}; }
  P operator()(int64_t i) const { return base + off[i]; }
};
struct PtrRows {
  const char* const* rows;
  struct Cursor {
    const char* const* rows;
    int64_t byte;
    const char* operator[](int64_t k) const { return rows[k] + byte; }
  };
  Cursor at(int64_t i, int64_t byte) const { return {rows + i, byte}; }
  const char* operator()(int64_t i) const { return rows[i]; }
};
using Strided = StridedT<const char*>;
using StridedOut = StridedT<char*>;
using StreamOut = StridedT<char*, true>;
using Table = TableT<const char*>;
using TableOut = TableT<char*>;
using StreamTableOut = TableT<char*, true>;

template <int EB, class SR, class DC>
void scalar(SR row, DC col, int64_t r0, int64_t r1, int64_t c0, int64_t c1) {
  for (int64_t r = r0; r < r1; ++r) {
    const char* s = row(r);
    for (int64_t c = c0; c < c1; ++c) std::memcpy(col(c) + r * EB, s + c * EB, EB);
  }
}

// Calls step(i) for i = 0, by, 2 * by, ... while a whole step fits in n (n >= by), then once
// for the last `by` if a remainder is left: that step overlaps the one before it and rewrites
// the same values. (narrow::over_rows does the same in one loop with two tests per step; here
// the loop has one, which matters to kernels of a few instructions per step.)
template <class Step>
__attribute__((always_inline)) inline void over_steps(int64_t n, int64_t by, Step step) {
  int64_t i = 0;
  for (; i + by <= n; i += by) step(i);
  if (i < n) step(n - by);
}

// Runs block(r, c) over a rows x cols grid of rb x cb blocks. A remainder row or column range is
// covered by one last block overlapping the previous one (it rewrites the same values), which
// is faster than finishing element by element even for a single leftover column (3x3 kernels
// give 9 columns). Matrices smaller than a block are done element by element.
template <int EB, class SR, class DC, class Block>
void tile_2d(SR row, DC col, int64_t rows, int64_t cols, int64_t rb, int64_t cb, Block block) {
  if (rows < rb || cols < cb) {
    scalar<EB>(row, col, 0, rows, 0, cols);
    return;
  }
  over_steps(rows, rb, [&](int64_t r) { over_steps(cols, cb, [&](int64_t c) { block(r, c); }); });
}

// Calls f(row, col) for each matrix of the batch b, row and col advanced by its steps. A source
// of row pointers (PtrRows) has no base to advance and is always a single matrix.
template <class SR, class DC, class F>
__attribute__((always_inline)) inline void for_each_matrix(SR row, DC col, const narrow::Batch& b, F f) {
  if constexpr (std::is_same_v<SR, PtrRows>) {
    f(row, col);
  } else {
    for (int64_t i = 0; i < b.count; ++i, row.base += b.sstep, col.base += b.dstep) f(row, col);
  }
}

// The batch of a call, for the kernels that loop over it themselves.
inline narrow::Batch batch_of(const TransposeArgs& a) {
  return {a.count, a.src_step, a.dst_step, a.ahead, a.ahead_bytes};
}

// Calls f(row, col) with the two sides of `a` as the addressing types above. Only the sides in
// Allowed are compiled (a kernel's takes refuses the others).
template <unsigned Allowed, class F>
inline void on_sides(const TransposeArgs& a, F&& f) {
  switch (sides_of(a)) {
    case kFromRowPtrs:
      if constexpr ((Allowed & kFromRowPtrs) != 0) f(PtrRows{a.src_ptrs}, StridedOut{a.dst, a.dst_stride});
      return;
    case kFromRowTable:
      if constexpr ((Allowed & kFromRowTable) != 0) f(Table{a.src, a.src_rows}, StridedOut{a.dst, a.dst_stride});
      return;
    case kToColTable:
      if constexpr ((Allowed & kToColTable) != 0) f(Strided{a.src, a.src_stride}, TableOut{a.dst, a.dst_cols});
      return;
    case kStreamed:
      if constexpr ((Allowed & kStreamed) != 0) f(Strided{a.src, a.src_stride}, StreamOut{a.dst, a.dst_stride});
      return;
    default:
      if constexpr ((Allowed & kStrided) != 0) f(Strided{a.src, a.src_stride}, StridedOut{a.dst, a.dst_stride});
      return;
  }
}

// f(row, col) for each matrix of the call (kernels of one matrix at a time).
template <unsigned Allowed, class F>
inline void each_matrix(const TransposeArgs& a, F f) {
  on_sides<Allowed>(a, [&](auto row, auto col) { for_each_matrix(row, col, batch_of(a), f); });
}

// Whether the call's sides are among `allowed`.
inline bool sides_in(const TransposeArgs& a, unsigned allowed) { return (sides_of(a) & allowed) != 0; }

// A streamed call that a kernel writing 64 bytes of each column per block of `block_rows` rows
// (one store, or two in a row) streams in whole lines: every column segment 64-byte aligned
// (dst, dst_stride and, for a batch, dst_step multiples of 64) and no overlapping last block
// (rows a multiple of block_rows). Non-temporal stores of whole lines need not read them in, and
// leave no partial line in the write-combining buffers wherever the columns lie.
inline bool whole_lines(const TransposeArgs& a, int64_t block_rows) {
  return sides_of(a) == kStreamed && reinterpret_cast<uintptr_t>(a.dst) % 64 == 0 && a.dst_stride % 64 == 0 &&
         (a.count <= 1 || a.dst_step % 64 == 0) && a.rows % block_rows == 0;
}

// A 9..16-column kernel's source rows as a RowReader (strided sources only).
inline narrow::RowReader row_reader(const TransposeArgs& a, int64_t eb) {
  return {a.src, a.src_stride, a.rows, a.cols * eb};
}

// Calls f(std::integral_constant<int, N>) for N = n, one of First..Last (instantiating each).
template <int First, int Last, class F>
inline void with_count(int64_t n, F&& f) {
  if constexpr (First < Last) {
    if (n != First) return with_count<First + 1, Last>(n, f);
  }
  f(std::integral_constant<int, First>());
}

#if defined(__x86_64__) || defined(__i386__)
// SSE2 (every x86-64): 16x8 / 8x8 bytes, 8x8 16-bit, 4x4 32-bit blocks. AVX2 versions of these
// (the same shuffles on both 128-bit lanes) measured slower, so there is no run-time dispatch.
inline __m128i load8(const char* p) { return _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)); }
inline __m128i load16(const char* p) { return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p)); }
inline void store8(char* p, __m128i v) { _mm_storel_epi64(reinterpret_cast<__m128i*>(p), v); }
inline void store16(char* p, __m128i v) { _mm_storeu_si128(reinterpret_cast<__m128i*>(p), v); }
using narrow::put16;

// Eight rows (cursor s), 8 bytes each -> d[k] = (column 2k, column 2k+1), 8 bytes each.
template <class Cur>
inline void tr8x8_u8(Cur s, __m128i d[4]) {
  __m128i x[8];
  for (int k = 0; k < 8; ++k) x[k] = load8(s[k]);
  narrow::sse2::network_8x8_u8(x, d);
}

// Interleaves of EB-byte elements: lo/hi of pairs of elements, then of pairs of pairs.
template <int EB>
inline __m128i unpack_lo(__m128i a, __m128i b) {
  if constexpr (EB == 1) return _mm_unpacklo_epi8(a, b);
  else if constexpr (EB == 2) return _mm_unpacklo_epi16(a, b);
  else return _mm_unpacklo_epi32(a, b);
}
template <int EB>
inline __m128i unpack_hi(__m128i a, __m128i b) {
  if constexpr (EB == 1) return _mm_unpackhi_epi8(a, b);
  else if constexpr (EB == 2) return _mm_unpackhi_epi16(a, b);
  else return _mm_unpackhi_epi32(a, b);
}

// 2 or 4 rows (16 bytes of each in v) interleaved into their columns, in order, Rows * EB bytes
// each: 2 or 4 registers.
template <int EB, int Rows>
inline void interleave_regs(const __m128i* v, __m128i* out) {
  if constexpr (Rows == 2) {
    out[0] = unpack_lo<EB>(v[0], v[1]);
    out[1] = unpack_hi<EB>(v[0], v[1]);
  } else {
    const __m128i ab_lo = unpack_lo<EB>(v[0], v[1]), ab_hi = unpack_hi<EB>(v[0], v[1]);
    const __m128i cd_lo = unpack_lo<EB>(v[2], v[3]), cd_hi = unpack_hi<EB>(v[2], v[3]);
    out[0] = unpack_lo<2 * EB>(ab_lo, cd_lo);
    out[1] = unpack_hi<2 * EB>(ab_lo, cd_lo);
    out[2] = unpack_lo<2 * EB>(ab_hi, cd_hi);
    out[3] = unpack_hi<2 * EB>(ab_hi, cd_hi);
  }
}

// The first N columns held in out (Rows * EB bytes each, in order) to dst, `stride` bytes
// apart: back to back in 16-byte stores or one copy of constant size, else one by one.
template <int EB, int Rows, int64_t N>
inline void store_columns(const __m128i* out, char* dst, int64_t stride) {
  constexpr int64_t width = Rows * EB;
  if (stride == width && N * width == 16 * Rows) {
    for (int k = 0; k < Rows; ++k) store16(dst + 16 * k, out[k]);
    return;
  }
  alignas(16) char t[16 * Rows];
  for (int k = 0; k < Rows; ++k) _mm_store_si128(reinterpret_cast<__m128i*>(t + 16 * k), out[k]);
  if (stride == width) {
    std::memcpy(dst, t, N * width);
  } else {
    for (int64_t j = 0; j < N; ++j) std::memcpy(dst + j * stride, t + j * width, width);
  }
}
#endif  // x86

}  // namespace kernels
}  // namespace npupack
