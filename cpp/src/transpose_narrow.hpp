// Narrow transposes (internal to transpose.cpp): source rows of 9..16 columns, the shape of every
// 3x3 kernel (9 taps per channel) in NVDLA DC weights and clDNN's os_is_yx_* weight formats.
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
// The network (transpose_network.inc) is compiled once per instruction set, each copy in its own
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
// waited on memory. Ask for each matrix's successor one batch ahead, once per cache line. Not when
// the successor is the batch's next matrix (b_fs_yx_fsv16 over 3x3 planes): that is one
// sequential stream, which the hardware follows, and the prefetches would only cost time.
__attribute__((always_inline)) inline void prefetch_next(const RowReader& in, const Batch& b) {
  const int64_t bytes = in.rows * in.stride;
  if (b.count < 2 || in.stride != in.row_bytes || b.ahead != nullptr || b.sstep == bytes) return;
  for (int64_t off = 0; off < bytes; off += 64) _mm_prefetch(in.base + bytes + off, _MM_HINT_T0);
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

// One stage of the 3x3 rotation kernels (avx2 and avx512 run_taps9): a rotation of the nine
// registers w[0..8] by `Shift` at the positions that Blend selects (blend(a, b) takes those
// positions of b; it writes its result through `out`, and the blend, which may hold a mask
// register, comes by reference, so that no vector is passed or returned by value in this
// function, which is compiled for every instruction set): w[v] takes them from w[v - Shift].
// Register type and blend come from the instruction set that inlines it.
template <int Shift, class R, class Blend>
__attribute__((always_inline)) inline void rotate9(R w[9], const Blend& blend) {
  R n[9];
  for (int v = 0; v < 9; ++v) blend(n[v], w[v], w[(v + 9 - Shift) % 9]);
  for (int v = 0; v < 9; ++v) w[v] = n[v];
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
#include "transpose_network.inc"
}  // namespace sse2

#pragma GCC push_options
#pragma GCC target("avx2")
namespace avx2 {
// The same network on both 128-bit lanes of a 256-bit register (every unpack instruction works
// within lanes): 32 rows per block, row k in lane 0 and row k + 16 in lane 1.
struct V {
  using reg = __m256i;
  static constexpr int kRowsU8 = 32;
  NPUPACK_AI reg lo8(reg a, reg b) { return _mm256_unpacklo_epi8(a, b); }
  NPUPACK_AI reg hi8(reg a, reg b) { return _mm256_unpackhi_epi8(a, b); }
  NPUPACK_AI reg lo16(reg a, reg b) { return _mm256_unpacklo_epi16(a, b); }
  NPUPACK_AI reg hi16(reg a, reg b) { return _mm256_unpackhi_epi16(a, b); }
  NPUPACK_AI reg lo32(reg a, reg b) { return _mm256_unpacklo_epi32(a, b); }
  NPUPACK_AI reg hi32(reg a, reg b) { return _mm256_unpackhi_epi32(a, b); }
  NPUPACK_AI reg lo64(reg a, reg b) { return _mm256_unpacklo_epi64(a, b); }
  NPUPACK_AI reg hi64(reg a, reg b) { return _mm256_unpackhi_epi64(a, b); }
  // Lane 0 from a 32-byte read of row k (its upper half is discarded; row k + 16 lies further on,
  // so the read stays inside the matrix), lane 1 from a broadcast read of row k + 16, joined by a
  // blend: loads and a blend keep the shuffle ports free for the network.
  template <int Bytes, bool Ends, int64_t Fixed, int Last>
  NPUPACK_AI reg load(const Rows<Ends, Fixed, Last>& row, int k) {
    const reg lo = _mm256_loadu_si256(reinterpret_cast<const reg*>(row(k)));
    if (row.is_last(k + 16)) return _mm256_inserti128_si256(lo, load_row<Bytes>(row, k + 16), 1);
    const reg hi = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(row(k + 16))));
    return _mm256_blend_epi32(lo, hi, 0xF0);
  }
  NPUPACK_AI void store(char* d, reg v) { _mm256_storeu_si256(reinterpret_cast<reg*>(d), v); }
  // Column k of cursor d: non-temporal stores for a streamed destination (transpose_stream), as
  // two 16-byte halves, since NumPy's buffers are often only 16-byte aligned.
  template <class Cur>
  NPUPACK_AI void put(const Cur& d, int64_t k, reg v) {
    if constexpr (Cur::kStream) {
      _mm_stream_si128(reinterpret_cast<__m128i*>(d[k]), _mm256_castsi256_si128(v));
      _mm_stream_si128(reinterpret_cast<__m128i*>(d[k] + 16), _mm256_extracti128_si256(v, 1));
    } else {
      store(d[k], v);
    }
  }
};
#include "transpose_network.inc"

// Two 16-byte rows in one register, `lo` in lane 0 and `hi` in lane 1 (loads and a blend: the
// shuffle ports stay free for the network).
NPUPACK_AI V::reg lanes(__m128i lo, __m128i hi) {
  return _mm256_blend_epi32(_mm256_castsi128_si256(lo), _mm256_broadcastsi128_si256(hi), 0xF0);
}

// Matrices of exactly 16 rows in a batch (clDNN fsv16 weights, 16-channel DC blocks): the 32-row
// network above would need 32 rows of one matrix, so two matrices run side by side instead,
// matrix i in lane 0 and matrix i + 1 in lane 1, and each result is stored as two 16-byte columns.
// Every matrix's row 15 is read so that the read ends at its last byte (the next matrix need not
// follow it in memory).
namespace pairs {
template <class R1>
struct Rows2 {
  R1 a, b;
};
struct Cols2 {
  char* a;
  char* b;
};
template <class Cur>
struct Cur2 {
  Cur a, b;
  Cols2 operator[](int64_t k) const { return {a[k], b[k]}; }
};
struct V : avx2::V {
  template <int Bytes, class R1>
  NPUPACK_AI reg load(const Rows2<R1>& r, int k) {
    return lanes(load_row<Bytes>(r.a, k), load_row<Bytes>(r.b, k));
  }
  NPUPACK_AI void store(Cols2 d, reg v) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(d.a), _mm256_castsi256_si128(v));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(d.b), _mm256_extracti128_si256(v, 1));
  }
};
#include "transpose_network.inc"

// Matrices i and i + 1 of the batch for even i: block(a, b, d) with their first rows a and b and
// their column cursors joined (d[k] = column k of both).
template <class DC, class Block>
void over_pairs(const RowReader& in, DC col, const Batch& batch, Block block) {
  Ahead ahead = ahead_of(batch, std::max<int64_t>(1, batch.count / 2));
  for (int64_t i = 0; i + 2 <= batch.count; i += 2) {
    ahead.step();
    const char* a = in.base + i * batch.sstep;
    DC ca = col, cb = col;
    ca.base += i * batch.dstep;
    cb.base += (i + 1) * batch.dstep;
    block(a, a + batch.sstep, Cur2<decltype(ca.at(0, 0))>{ca.at(0, 0), cb.at(0, 0)});
  }
}

template <int NC, int64_t Fixed, class DC>
NPUPACK_FLAT void run(const RowReader& in, DC col, const Batch& batch) {
  over_pairs(in, col, batch, [&in](const char* a, const char* b, const auto& d) {
    block_u8<NC>(Rows2<Rows<true, Fixed, 15>>{{a, in.stride, 15}, {b, in.stride, 15}}, d);
  });
}
}  // namespace pairs

// 8 rows of 16-bit elements, NC (9..16) columns: lane 0 of a row register holds columns 0..7,
// lane 1 columns 8..15, and one 8x8 network transposes both halves.
template <int NC, bool Ends, int64_t Fixed, int Last, class DCur>
__attribute__((always_inline)) inline void block_u16(const Rows<Ends, Fixed, Last>& row, DCur d) {
  using R = V::reg;
  R a[8], out[8];
  for (int k = 0; k < 8; ++k) {
    a[k] = row.is_last(k) ? _mm256_inserti128_si256(_mm256_castsi128_si256(load_row<16>(row, k)),
                                                    load_row<2 * NC - 16>(Rows<true>{row(k) + 16, 0, 0}, 0), 1)
                         : _mm256_loadu_si256(reinterpret_cast<const R*>(row(k)));
  }
  network_8x8_u16(a, out);
  for (int j = 0; j < 8; ++j) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(d[j]), _mm256_castsi256_si128(out[j]));
    if (8 + j < NC) _mm_storeu_si128(reinterpret_cast<__m128i*>(d[8 + j]), _mm256_extracti128_si256(out[j], 1));
  }
}

// Columns 8..NC-1 of row k of 16-bit elements; the last row's read ends at its last element.
template <int NC, bool Ends, int64_t Fixed, int Last>
__attribute__((always_inline)) inline __m128i upper_u16(const Rows<Ends, Fixed, Last>& row, int k) {
  if (row.is_last(k)) return load_row<2 * NC - 16>(Rows<true>{row(k) + 16, 0, 0}, 0);
  return _mm_loadu_si128(reinterpret_cast<const __m128i*>(row(k) + 16));
}

// 16 rows of 16-bit elements, NC (9..16) columns: rows k and k + 8 share a register, one 8x8
// network gives columns 0..7 of all 16 rows (one 32-byte store each) and a second one, pruned to
// its NC - 8 used outputs, columns 8..NC-1. For 3x3 kernels (NC = 9) that is 31 shuffles per 16
// rows where block_u16, whose lane 1 carries only column 8, needs 48.
template <int NC, bool Ends, int64_t Fixed, int Last, class DCur>
__attribute__((always_inline)) inline void block16_u16(const Rows<Ends, Fixed, Last>& row, DCur d) {
  V::reg a[8], out[8];
  for (int k = 0; k < 8; ++k) {
    a[k] = lanes(_mm_loadu_si128(reinterpret_cast<const __m128i*>(row(k))),
                 _mm_loadu_si128(reinterpret_cast<const __m128i*>(row(k + 8))));
  }
  network_8x8_u16(a, out);
  for (int j = 0; j < 8; ++j) V::store(d[j], out[j]);
  for (int k = 0; k < 8; ++k) a[k] = lanes(upper_u16<NC>(row, k), upper_u16<NC>(row, k + 8));
  network_8x8_u16(a, out);
  for (int j = 0; j < NC - 8; ++j) V::store(d[8 + j], out[j]);
}

template <int NC, class DC>
NPUPACK_FLAT void run_u16(RowReader in, DC col, const Batch& batch) {
  if (in.rows >= 16) {
    return over_batch<16>(in, col, batch, [](const RowReader& m, const DC& c, int64_t r) {
      m.block<16, 32, 2 * NC>(r, [&](const auto& row) { block16_u16<NC>(row, c.at(0, 2 * r)); });
    });
  }
  over_batch<8>(in, col, batch, [](const RowReader& m, const DC& c, int64_t r) {
    m.block<8, 32, 2 * NC>(r, [&](const auto& row) { block_u16<NC>(row, c.at(0, 2 * r)); });
  });
}

// Matrices of 9 columns whose rows are back to back (3x3 kernels: DC weights' channel blocks,
// b_fs_yx_fsv16 / fsv32 over a 3x3 plane). A 128-bit lane takes 16 rows of bytes or 8 rows of
// halves: 9 * 16 bytes, exactly nine 16-byte chunks of E elements (E = 16 or 8). As 9 is coprime
// with E, no transpose network is needed: element b = E * q + p (position p of chunk q) is row
// b / 9 of column b % 9 = (E * q + p) % 9. Chunk q is loaded into register v = E * q - c (mod 9),
// a free renaming, so that the element belongs to register (v + c + p) % 9: a rotation of the
// nine registers by an amount that depends only on the position, done as one blend stage per bit
// of the amount (register v takes the selected positions of register v - 2^s). Each register
// then holds one column, one element per position, and one pshufb per column puts the rows in
// order. Nine loads at 16-byte steps from the block start, three or four blend stages and nine
// (16-bit) or eighteen (8-bit) shuffles per block, where the row-pair network it replaced made
// 16 or 32 unaligned loads and 23 or 35 shuffles.
//
// The rotation stages are narrow::rotate9, with the blends below.
template <int Imm>
struct Words {  // 16-bit positions by an immediate mask (the same in both lanes)
  void operator()(V::reg& out, const V::reg& a, const V::reg& b) const { out = _mm256_blend_epi16(a, b, Imm); }
};
struct Bytes {  // byte positions by a mask register
  V::reg mask;
  void operator()(V::reg& out, const V::reg& a, const V::reg& b) const { out = _mm256_blendv_epi8(a, b, mask); }
};

// Chunk controls for bytes (E = 16, c = 1): amounts k = (p + 1) % 9 take every value 1..7 at two
// positions and 0 and 8 at one each. The first pshufb (`pre`) puts the two positions of each
// amount 1..7 in one 16-bit word and those of 0 and 8 in the last, so that the stages of bits 0..2
// are word blends (vpblendw, which here runs beside the shuffles, not on their ports) and only
// bit 3 (amount 8: byte 14) is a byte blend. `post[j]`: row r of column j from the position of
// element 9r + j.
struct Taps9Bytes {
  alignas(32) int8_t pre[32] = {};
  alignas(32) int8_t post[9][32] = {};
  alignas(32) int8_t bit3[32] = {};
  constexpr Taps9Bytes() {
    int at[16] = {};  // the position after `pre` of the byte at position p
    for (int w = 0; w < 7; ++w) {
      at[w] = 2 * w;           // amount w + 1
      at[w + 9] = 2 * w + 1;   // amount (w + 10) % 9 = w + 1
    }
    at[7] = 14;  // amount 8
    at[8] = 15;  // amount 0
    for (int p = 0; p < 16; ++p) pre[at[p]] = pre[16 + at[p]] = static_cast<int8_t>(p);
    for (int j = 0; j < 9; ++j) {
      for (int r = 0; r < 16; ++r) post[j][r] = post[j][16 + r] = static_cast<int8_t>(at[(9 * r + j) % 16]);
    }
    bit3[14] = bit3[30] = -1;
  }
};
inline constexpr Taps9Bytes kTaps9Bytes{};

// Chunk controls for halves (E = 8, c = 0): amount k = p (0..7, three word-blend stages);
// `post[j]`: row r of column j from the half at position (9r + j) % 8.
struct Taps9Halves {
  alignas(32) int8_t post[9][32] = {};
  constexpr Taps9Halves() {
    for (int j = 0; j < 9; ++j) {
      for (int r = 0; r < 8; ++r) {
        const int p = (9 * r + j) % 8;
        for (int lane = 0; lane < 32; lane += 16) {
          post[j][lane + 2 * r] = static_cast<int8_t>(2 * p);
          post[j][lane + 2 * r + 1] = static_cast<int8_t>(2 * p + 1);
        }
      }
    }
  }
};
inline constexpr Taps9Halves kTaps9Halves{};

NPUPACK_AI V::reg load_control(const int8_t* c) { return _mm256_load_si256(reinterpret_cast<const __m256i*>(c)); }
NPUPACK_AI void store_column(char* d, V::reg v) { V::store(d, v); }
NPUPACK_AI void store_column(pairs::Cols2 d, V::reg v) { pairs::V::store(d, v); }

// Chunk q of both lanes: 16 bytes at s0 + 16q (lane 0) and s1 + 16q (lane 1).
NPUPACK_AI V::reg chunk(const char* s0, const char* s1, int q) {
  return lanes(_mm_loadu_si128(reinterpret_cast<const __m128i*>(s0 + 16 * q)),
               _mm_loadu_si128(reinterpret_cast<const __m128i*>(s1 + 16 * q)));
}

// After the rotation: column j, its rows put in order by post[j], to column cursor d[j].
template <class DCur>
NPUPACK_AI void store_columns(const V::reg w[9], const int8_t (*post)[32], DCur d) {
  for (int j = 0; j < 9; ++j) store_column(d[j], _mm256_shuffle_epi8(w[j], load_control(post[j])));
}

// 32 rows of 8-bit elements: 16 from s0 (lane 0) and 16 from s1 (lane 1; s0 + 144 for 32 rows
// of one matrix, the next matrix for two 16-row matrices side by side), 144 bytes each.
template <class DCur>
NPUPACK_AI void block_u8_taps9(const char* s0, const char* s1, DCur d) {
  using R = V::reg;
  const R pre = load_control(kTaps9Bytes.pre);
  R w[9];
  for (int v = 0; v < 9; ++v) {
    const int q = 4 * (v + 1) % 9;  // v = 16q - 1 = 7q - 1 (mod 9); 4 = 7^-1 (mod 9)
    w[v] = _mm256_shuffle_epi8(chunk(s0, s1, q), pre);
  }
  rotate9<1>(w, Words<0x55>());  // amounts 1, 3, 5, 7: words 0, 2, 4, 6
  rotate9<2>(w, Words<0x66>());  // 2, 3, 6, 7: words 1, 2, 5, 6
  rotate9<4>(w, Words<0x78>());  // 4..7: words 3..6
  rotate9<8>(w, Bytes{load_control(kTaps9Bytes.bit3)});  // 8: byte 14
  store_columns(w, kTaps9Bytes.post, d);
}

// pack_checked's fp16 watch inside the 16-bit kernels: the largest magnitude (v & 0x7FFF) of
// the halves read, INF and NaN being the magnitudes >= 0x7C00 (a signed compare: magnitudes are
// at most 0x7FFF). Two vector ALU instructions per 32 bytes, on ports the networks' shuffles
// leave idle, instead of a separate pass that read each slab from L3 before it was packed.
NPUPACK_AI __m256i watch_halves(__m256i largest, __m256i v) {
  return _mm256_max_epu16(largest, _mm256_and_si256(v, _mm256_set1_epi16(0x7FFF)));
}
NPUPACK_AI bool any_nonfinite(__m256i largest) {
  return !_mm256_testz_si256(_mm256_cmpgt_epi16(largest, _mm256_set1_epi16(0x7BFF)), _mm256_set1_epi16(-1));
}

// 16 rows of 16-bit elements from s (8 per lane, s and s + 144), 144 bytes per lane.
// With a non-null `largest` (pack_checked's fp16 watch) the magnitudes of every half read are
// max-reduced into it, as in tall_u16: the nine chunks are the 16 rows exactly.
template <class DCur>
NPUPACK_AI void block_u16_taps9(const char* s, DCur d, V::reg* largest = nullptr) {
  using R = V::reg;
  R w[9];
  for (int v = 0; v < 9; ++v) {
    const int q = (9 - v) % 9;  // v = 8q = -q (mod 9)
    w[v] = chunk(s, s + 144, q);
    if (largest) *largest = watch_halves(*largest, w[v]);
  }
  rotate9<1>(w, Words<0xAA>());  // amounts 1, 3, 5, 7
  rotate9<2>(w, Words<0xCC>());  // 2, 3, 6, 7
  rotate9<4>(w, Words<0xF0>());  // 4..7
  store_columns(w, kTaps9Halves.post, d);
}

// run_u8<9> for rows back to back (in.stride == 9) and run_u16<9> for 16 rows and more back to
// back (in.stride == 18): the rotation kernels above on each block of 32 (8-bit) or 16 (16-bit)
// rows.
// With a non-null `nonfinite` (16-bit only) every half moved is tested for fp16 INF/NaN, as in
// tall_u16.
template <int EB, class DC>
NPUPACK_FLAT void run_taps9(const RowReader& in, DC col, const Batch& batch, bool* nonfinite = nullptr) {
  constexpr int kRows = EB == 1 ? 32 : 16;
  if constexpr (EB == 1) {
    over_batch<kRows>(in, col, batch, [](const RowReader& m, const DC& c, int64_t r) {
      block_u8_taps9(m.base + r * 9, m.base + r * 9 + 144, c.at(0, r));
    });
  } else if (nonfinite) {
    V::reg largest = _mm256_setzero_si256();
    over_batch<kRows>(in, col, batch, [&largest](const RowReader& m, const DC& c, int64_t r) {
      block_u16_taps9(m.base + r * 18, c.at(0, 2 * r), &largest);
    });
    *nonfinite = any_nonfinite(largest);
  } else {
    over_batch<kRows>(in, col, batch, [](const RowReader& m, const DC& c, int64_t r) {
      block_u16_taps9(m.base + r * 18, c.at(0, 2 * r));
    });
  }
}

// 8-bit matrices of 16 rows, at least two in the batch (see pairs); an odd last one takes SSE2.
// Nine columns with rows back to back take the 3x3 rotation kernel, one matrix per lane.
template <int NC, class DC>
NPUPACK_FLAT void run_u8_pairs(RowReader in, DC col, const Batch& batch) {
  if constexpr (NC == 9) {
    if (in.stride == 9) {
      pairs::over_pairs(in, col, batch, [](const char* a, const char* b, const auto& d) { block_u8_taps9(a, b, d); });
    } else {
      pairs::run<9, 0>(in, col, batch);
    }
  } else if (in.stride == NC) {
    pairs::run<NC, NC>(in, col, batch);
  } else {
    pairs::run<NC, 0>(in, col, batch);
  }
  if (batch.count % 2) {
    in.base += (batch.count - 1) * batch.sstep;
    col.base += (batch.count - 1) * batch.dstep;
    sse2::run_u8<NC>(in, col, Batch{});
  }
}

// tall_u16's loop; Watch: test the halves moved (see tall_u16).
template <bool Watch, class SR, class DC>
NPUPACK_AI void tall_u16_loop(SR row, DC col, int64_t rows, int64_t cols, bool* nonfinite) {
  using R = V::reg;
  R largest = _mm256_setzero_si256();
  const auto step = [&](int64_t r, int64_t c) {
    const auto s = row.at(r, 2 * c);
    // Past the caches (streamed), and for 32 rows (b_fs_yx_fsv32 fp16 activations) in L3 too,
    // more rows are read at once than the hardware prefetchers follow, so they are prefetched.
    if (decltype(col.at(0, 0))::kStream || rows == 32) prefetch_rows<16, 32>(s, c);
    R a[8], out[8];
    for (int k = 0; k < 8; ++k) {
      a[k] = lanes(_mm_loadu_si128(reinterpret_cast<const __m128i*>(s[k])),
                   _mm_loadu_si128(reinterpret_cast<const __m128i*>(s[k + 8])));
      if constexpr (Watch) largest = watch_halves(largest, a[k]);
    }
    network_8x8_u16(a, out);
    const auto d = col.at(c, 2 * r);
    for (int j = 0; j < 8; ++j) V::put(d, j, out[j]);
  };
  if (rows == 32) {
    // 64-byte columns (b_fs_yx_fsv32 fp16 activations): both halves of a column in one step, so
    // that each line is written whole while it is in L1, not once per 16-row pass over a
    // plane's worth of columns. Streamed, each line's two non-temporal stores come 8 stores
    // apart, and the line leaves the write-combining buffer whole.
    over_rows(cols, 8, [&](int64_t c) {
      step(0, c);
      step(16, c);
    });
  } else {
    over_rows(rows, 16, [&](int64_t r) { over_rows(cols, 8, [&](int64_t c) { step(r, c); }); });
  }
  if constexpr (Watch) *nonfinite = any_nonfinite(largest);
}

// 16-bit elements, 16 rows x 8 columns per step (rows >= 16, cols >= 8; remainders are
// overlapping last steps): rows r..r+7 in lane 0 and r+8..r+15 in lane 1, one 8x8 network for
// both, and each column's 16 rows (32 bytes, consecutive in the destination) in one store. Half
// the shuffles per byte of the SSE2 8x8 blocks. Cursors as in transpose.cpp.
// With a non-null `nonfinite` (fp16 input packed by pack_checked) every half moved is also
// tested for INF/NaN (watch_halves).
template <class SR, class DC>
NPUPACK_FLAT void tall_u16(SR row, DC col, int64_t rows, int64_t cols, bool* nonfinite = nullptr) {
  if (nonfinite) {
    tall_u16_loop<true>(row, col, rows, cols, nonfinite);
  } else {
    tall_u16_loop<false>(row, col, rows, cols, nullptr);
  }
}

// The loop of the tall and wide byte kernels: blocks of RB rows x CB columns (remainders are
// overlapping last blocks), block(s, d) with the block's row cursor s and column cursor d; for a
// streamed destination, rows prefetched once per Per columns (prefetch_rows).
template <int RB, int CB, int Per, class SR, class DC, class Block>
NPUPACK_AI void over_blocks(const SR& row, const DC& col, int64_t rows, int64_t cols, Block block) {
  over_rows(rows, RB, [&](int64_t r) {
    over_rows(cols, CB, [&](int64_t c) {
      const auto s = row.at(r, c);
      if constexpr (decltype(col.at(0, 0))::kStream) prefetch_rows<RB, Per>(s, c);
      block(s, col.at(c, r));
    });
  });
}

// Column j of cursor d as a store target for networks whose V::store needs the cursor (streamed
// or split columns).
template <class Cur>
struct ColumnOf {
  const Cur* d;
  int64_t j;
};
template <class Cur>
struct Columns {
  Cur d;
  ColumnOf<Cur> operator[](int64_t j) const { return {&d, j}; }
};

// 8-bit elements, 32 rows x 8 columns per step (rows >= 32, 8 <= cols < 16; remainders are
// overlapping last steps): rows r..r+15 in lane 0 and r+16..r+31 in lane 1 (8 bytes each, in
// the low half), two 8x8 byte networks per lane, and each column's 32 rows in one store.
template <class SR, class DC>
NPUPACK_FLAT void tall_u8(SR row, DC col, int64_t rows, int64_t cols) {
  using R = V::reg;
  over_blocks<32, 8, 64>(row, col, rows, cols, [](const auto& s, const auto& d) {
    R a[16];
    for (int k = 0; k < 16; ++k) {
      const R lo = _mm256_castsi128_si256(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(s[k])));
      const R hi = _mm256_broadcastq_epi64(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(s[k + 16])));
      a[k] = _mm256_blend_epi32(lo, hi, 0x30);  // lane 1, low 8 bytes
    }
    // t[g][k] = columns 2k, 2k+1 of rows 8g..8g+7 of each lane.
    R t[2][4];
    network_8x8_u8(a, t[0]);
    network_8x8_u8(a + 8, t[1]);
    for (int k = 0; k < 4; ++k) {
      V::put(d, 2 * k, V::lo64(t[0][k], t[1][k]));
      V::put(d, 2 * k + 1, V::hi64(t[0][k], t[1][k]));
    }
  });
}

// 8-bit elements, 32 rows x 16 columns per step (rows >= 32, cols >= 16; NVDLA int8 feature data
// and b_fs_yx_fsv32 int8 activations: 32 channels x H*W): rows r..r+15 in lane 0 and r+16..r+31
// in lane 1, 16 bytes each, the whole byte network on both lanes (block_u8), and each column's 32
// rows in one store. Against tall_u8's 8 columns per step, each row is read in half as many
// loads and the blends that join the lanes are halved, for 8 more shuffles per 256 bytes, a net
// gain. Its own entry point: folded into tall_u8 behind a column test, the one flattened
// function is slower.
namespace tall {
struct V : avx2::V {
  template <int Bytes, class Cur>
  NPUPACK_AI reg load(const Cur& s, int k) {
    return lanes(_mm_loadu_si128(reinterpret_cast<const __m128i*>(s[k])),
                 _mm_loadu_si128(reinterpret_cast<const __m128i*>(s[k + 16])));
  }
  template <class Cur>
  NPUPACK_AI void store(ColumnOf<Cur> c, reg v) { put(*c.d, c.j, v); }
};
#include "transpose_network.inc"
}  // namespace tall

template <class SR, class DC>
NPUPACK_FLAT void tall16_u8(SR row, DC col, int64_t rows, int64_t cols) {
  over_blocks<32, 16, 64>(row, col, rows, cols, [](const auto& s, const auto& d) {
    tall::block_u8<16>(s, Columns<std::decay_t<decltype(d)>>{d});
  });
}

// 8-bit elements, 16 to 31 rows (b_fs_yx_fsv16 activations: 16 channels x H*W), 32 columns per
// step (cols >= 32): row k's 32 bytes are one load, columns c..c+15 in lane 0 and c+16..c+31 in
// lane 1, and the 16-row byte network on both lanes gives columns j and j + 16 in one register
// (two 16-byte stores). 64 shuffles per 512 bytes where the SSE2 16x8 blocks need 128.
namespace wide {
struct V : avx2::V {
  template <int Bytes, class Cur>
  NPUPACK_AI reg load(const Cur& s, int k) { return _mm256_loadu_si256(reinterpret_cast<const reg*>(s[k])); }
  // Column j of the step: lane 0 goes to column j, lane 1 to column j + 16 of cursor d.
  template <class Cur>
  NPUPACK_AI void store(ColumnOf<Cur> c, reg v) {
    put16(*c.d, c.j, _mm256_castsi256_si128(v));
    put16(*c.d, c.j + 16, _mm256_extracti128_si256(v, 1));
  }
};
#include "transpose_network.inc"
}  // namespace wide

template <class SR, class DC>
NPUPACK_FLAT void wide16_u8(SR row, DC col, int64_t rows, int64_t cols) {
  over_blocks<16, 32, 64>(row, col, rows, cols, [](const auto& s, const auto& d) {
    wide::block_u8<16>(s, Columns<std::decay_t<decltype(d)>>{d});
  });
}
}  // namespace avx2
#pragma GCC pop_options

#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vbmi")
namespace avx512 {
// The 3x3 rotation kernel (avx2::run_taps9) on 512-bit registers, for matrices of 64 rows of
// bytes or 32 rows of halves (NVDLA DC weights of 3x3 kernels: one 64-byte channel block per
// matrix): a block is 576 bytes, nine 64-byte chunks of E = 64 / EB elements, and 64 = 1, 32 = 5
// (mod 9). Chunk q goes to register v = E * q (mod 9), so that element p of register v belongs
// to column (v + p) % 9: a rotation by p % 9, as in the AVX2 kernel, but each stage is one mask
// blend (vpblendmb / vpblendmw: any position, no pre-shuffle to gather the amounts in words), and
// one full permute per column (vpermb / vpermw: across the whole register, no lanes) puts its
// rows in order. The whole column is one 64-byte store, so every line of the output is written
// at once. Per 576 bytes: 9 loads, 36 blends, 9 permutes, 9 stores, where the AVX2 kernel (two
// 288-byte blocks) needs 36 loads, 18 lane blends, 36 (bytes) or 18 (halves) shuffles, 72 or 54
// blends and 18 stores.

// Stage s of the rotation: the positions (of `n`) whose amount p % 9 has bit s.
constexpr uint64_t stage_mask(int n, int s) {
  uint64_t m = 0;
  for (int p = 0; p < n; ++p) m |= static_cast<uint64_t>(((p % 9) >> s) & 1) << p;
  return m;
}

// Row r of column j is element 9r + j, at position (9r + j) % E of register j after the rotation.
struct Taps9Permutes {
  alignas(64) uint8_t bytes[9][64] = {};
  alignas(64) uint16_t halves[9][32] = {};
  constexpr Taps9Permutes() {
    for (int j = 0; j < 9; ++j) {
      for (int r = 0; r < 64; ++r) bytes[j][r] = static_cast<uint8_t>((9 * r + j) % 64);
      for (int r = 0; r < 32; ++r) halves[j][r] = static_cast<uint16_t>((9 * r + j) % 32);
    }
  }
};
inline constexpr Taps9Permutes kTaps9Permutes{};

// The positions that mask M selects (bytes or halves), for narrow::rotate9.
template <int EB, uint64_t M>
struct MaskBlend {
  void operator()(__m512i& out, const __m512i& a, const __m512i& b) const {
    if constexpr (EB == 1) out = _mm512_mask_blend_epi8(static_cast<__mmask64>(M), a, b);
    else out = _mm512_mask_blend_epi16(static_cast<__mmask32>(M), a, b);
  }
};

// One block: 576 bytes from s (64 rows of bytes or 32 of halves) to column cursor d. With a
// non-null `largest` (halves only: pack_checked's fp16 watch) the magnitudes of every half read
// are max-reduced into it, as in the AVX2 kernel.
template <int EB, class DCur>
NPUPACK_AI void block_taps9(const char* s, DCur d, __m512i* largest) {
  constexpr int kE = 64 / EB;
  __m512i w[9];
  for (int q = 0; q < 9; ++q) {
    const __m512i chunk = _mm512_loadu_si512(s + 64 * q);
    if (EB == 2 && largest) *largest = _mm512_max_epu16(*largest, _mm512_and_si512(chunk, _mm512_set1_epi16(0x7FFF)));
    w[kE % 9 * q % 9] = chunk;
  }
  rotate9<1>(w, MaskBlend<EB, stage_mask(kE, 0)>());
  rotate9<2>(w, MaskBlend<EB, stage_mask(kE, 1)>());
  rotate9<4>(w, MaskBlend<EB, stage_mask(kE, 2)>());
  rotate9<8>(w, MaskBlend<EB, stage_mask(kE, 3)>());
  for (int j = 0; j < 9; ++j) {
    __m512i column;
    if constexpr (EB == 1) {
      column = _mm512_permutexvar_epi8(_mm512_load_si512(kTaps9Permutes.bytes[j]), w[j]);
    } else {
      column = _mm512_permutexvar_epi16(_mm512_load_si512(kTaps9Permutes.halves[j]), w[j]);
    }
    _mm512_storeu_si512(d[j], column);
  }
}

// avx2::run_taps9 for matrices of at least 64 (8-bit) or 32 (16-bit) rows back to back.
template <int EB, class DC>
NPUPACK_FLAT void run_taps9(const RowReader& in, DC col, const Batch& batch, bool* nonfinite = nullptr) {
  constexpr int kRows = 64 / EB;
  if (EB == 2 && nonfinite) {
    __m512i largest = _mm512_setzero_si512();
    over_batch<kRows>(in, col, batch, [&largest](const RowReader& m, const DC& c, int64_t r) {
      block_taps9<EB>(m.base + r * 9 * EB, c.at(0, EB * r), &largest);
    });
    *nonfinite = _mm512_cmpgt_epu16_mask(largest, _mm512_set1_epi16(0x7BFF)) != 0;
  } else {
    over_batch<kRows>(in, col, batch, [](const RowReader& m, const DC& c, int64_t r) {
      block_taps9<EB>(m.base + r * 9 * EB, c.at(0, EB * r), nullptr);
    });
  }
}
}  // namespace avx512
#pragma GCC pop_options

#undef NPUPACK_AI
#undef NPUPACK_FLAT
#endif  // x86

}  // namespace narrow
}  // namespace npupack
