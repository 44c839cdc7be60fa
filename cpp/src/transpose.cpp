#include "npupack/transpose.hpp"

#include <cstring>
#include <type_traits>
#include <vector>

#include "npupack/cpu.hpp"
#include "transpose_narrow.hpp"

#if defined(__x86_64__) || defined(__i386__)
#include <emmintrin.h>
#include <tmmintrin.h>
#define NPUPACK_SSE2 1
#endif

namespace npupack {

namespace {

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
template <class P>
struct TableT {
  P base;
  const int64_t* off;
  struct Cursor {
    static constexpr bool kStream = false;
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

#if defined(NPUPACK_SSE2)
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

// A batch of matrices of 2 or 4 rows of Bytes (8..15) bytes, fewer than an interleave step,
// rows `stride` >= Bytes apart (o_is_yx_isv4 on a 3x3 kernel: 4 rows of 9 taps per o and i/4).
// Each row is read whole: every row but the last reads on into the next row's place, and the
// last is read so that the read ends at its last byte, then shifted into place, so nothing
// outside the matrix's span is read. The columns, Rows * EB bytes each, are stored back to back
// in one copy of constant size, or one by one.
template <int EB, int Rows, int Bytes>
void interleave_short(Strided row, StridedOut col, const narrow::Batch& batch) {
  constexpr int64_t n = Bytes / EB;
  for (int64_t i = 0; i < batch.count; ++i, row.base += batch.sstep, col.base += batch.dstep) {
    __m128i v[4], out[4];
    for (int k = 0; k + 1 < Rows; ++k) v[k] = load16(row(k));
    v[Rows - 1] = _mm_srli_si128(load16(row(Rows - 1) + Bytes - 16), 16 - Bytes);
    interleave_regs<EB, Rows>(v, out);
    store_columns<EB, Rows, n>(out, col.base, col.stride);
  }
}

template <int EB, int Rows>
bool try_interleave_short(const Strided& row, StridedOut col, int64_t cols, const narrow::Batch& b) {
  const int64_t bytes = cols * EB;
  if (bytes < 8 || bytes >= 16 || row.stride < bytes) return false;
  switch (bytes) {
    case 8: interleave_short<EB, Rows, 8>(row, col, b); break;
    case 9: interleave_short<EB, Rows, 9>(row, col, b); break;
    case 10: interleave_short<EB, Rows, 10>(row, col, b); break;
    case 11: interleave_short<EB, Rows, 11>(row, col, b); break;
    case 12: interleave_short<EB, Rows, 12>(row, col, b); break;
    case 13: interleave_short<EB, Rows, 13>(row, col, b); break;
    case 14: interleave_short<EB, Rows, 14>(row, col, b); break;
    default: interleave_short<EB, Rows, 15>(row, col, b); break;
  }
  return true;
}

// The short interleaves for this element size and row count, if they take the shape.
bool try_short_rows(const Strided& row, StridedOut col, int64_t rows, int64_t cols, int64_t eb,
                    const narrow::Batch& b) {
  if (eb == 1 && rows == 2) return try_interleave_short<1, 2>(row, col, cols, b);
  if (eb == 1 && rows == 4) return try_interleave_short<1, 4>(row, col, cols, b);
  if (eb == 2 && rows == 2) return try_interleave_short<2, 2>(row, col, cols, b);
  if (eb == 2 && rows == 4) return try_interleave_short<2, 4>(row, col, cols, b);
  return false;
}

// 2 or 4 rows of 1- or 2-byte elements, so rows * EB-byte columns (Kneron 4W4C8B atoms,
// 3-channel images padded to 4, clDNN's fsv2 / fsv4 and bsv*_fsv2 / fsv4 blocks): an interleave,
// 16 bytes of each row per step, which leaves the columns in order in 2 or 4 registers. Back to
// back columns are stored 16 bytes at a time; columns further apart (a bsv16_fsv4 block: 4 bytes
// every 64) one by one, still a store per column instead of one per element.
// Over a batch of equally spaced matrices in one call (unpacking 1x2 and 2x2 kernels: one matrix
// per kernel and channel block).
template <int EB, int Rows, class SR>
void interleave(SR row, StridedOut col, int64_t cols, const narrow::Batch& b) {
  constexpr int64_t per = 16 / EB;  // columns per step
  for_each_matrix(row, col, b, [cols](const SR& row, const StridedOut& col) {
    int64_t c = 0;
    for (; c + per <= cols; c += per) {
      const auto s = row.at(0, c * EB);
      __m128i v[4], out[4];
      for (int k = 0; k < Rows; ++k) v[k] = load16(s[k]);
      interleave_regs<EB, Rows>(v, out);
      store_columns<EB, Rows, per>(out, col(c), col.stride);
    }
    scalar<EB>(row, col, 0, Rows, c, cols);
  });
}

// Rows of 9..16 columns read whole (transpose_narrow.hpp). NC is a template argument so the
// network's unused outputs are pruned; the variants are instantiated per column count. `batch`
// repeats the transpose over equally spaced matrices inside the kernel (one dispatch for all).
// `avx512`: the 3x3 rotation kernel may take its AVX-512 variant (64 rows of bytes or 32 of
// halves per block) where the matrices have that many rows.
enum class NarrowKernel { U8Sse2, U8Avx2, U8Avx2Pairs, U16Avx2 };

template <NarrowKernel K, int NC, class DC>
void run_narrow(const narrow::RowReader& in, DC col, const narrow::Batch& b, bool avx512) {
  if constexpr (K == NarrowKernel::U8Sse2) narrow::sse2::run_u8<NC>(in, col, b);
  else if constexpr (K == NarrowKernel::U8Avx2 && NC == 9) {
    if (in.stride == 9 && avx512 && in.rows >= 64) narrow::avx512::run_taps9<1>(in, col, b);
    else if (in.stride == 9) narrow::avx2::run_taps9<1>(in, col, b);
    else narrow::avx2::run_u8<9>(in, col, b);
  } else if constexpr (K == NarrowKernel::U8Avx2) narrow::avx2::run_u8<NC>(in, col, b);
  else if constexpr (K == NarrowKernel::U8Avx2Pairs) narrow::avx2::run_u8_pairs<NC>(in, col, b);
  else if constexpr (NC == 9) {
    if (in.stride == 18 && avx512 && in.rows >= 32) narrow::avx512::run_taps9<2>(in, col, b);
    else if (in.stride == 18 && in.rows >= 16) narrow::avx2::run_taps9<2>(in, col, b);
    else narrow::avx2::run_u16<9>(in, col, b);
  } else narrow::avx2::run_u16<NC>(in, col, b);
}

template <NarrowKernel K, class DC>
bool narrow(const Strided& row, DC col, int64_t rows, int64_t cols, int64_t eb, int64_t min_rows,
            const narrow::Batch& batch, bool avx512) {
  if (cols < 9 || cols > 16 || rows < min_rows || row.stride < cols * eb) return false;
  const narrow::RowReader in{row.base, row.stride, rows, cols * eb};
  switch (cols) {
    case 9: run_narrow<K, 9>(in, col, batch, avx512); break;
    case 10: run_narrow<K, 10>(in, col, batch, avx512); break;
    case 11: run_narrow<K, 11>(in, col, batch, avx512); break;
    case 12: run_narrow<K, 12>(in, col, batch, avx512); break;
    case 13: run_narrow<K, 13>(in, col, batch, avx512); break;
    case 14: run_narrow<K, 14>(in, col, batch, avx512); break;
    case 15: run_narrow<K, 15>(in, col, batch, avx512); break;
    default: run_narrow<K, 16>(in, col, batch, avx512); break;
  }
  return true;
}

// Whether kernels asked for `path` may use AVX2, and AVX-512, on this CPU.
bool use_avx2(KernelPath path) { return allows(path, KernelPath::kAvx2) && cpu().avx2; }
bool use_avx512(KernelPath path) { return allows(path, KernelPath::kAvx512) && cpu().avx512vbmi; }

// The narrow kernels for this element size, CPU and kernel path, if they take the shape (else
// false).
template <class DC>
bool try_narrow(const Strided& row, DC col, int64_t rows, int64_t cols, int64_t eb, const narrow::Batch& b,
                KernelPath path = KernelPath::kAuto) {
  const bool avx2 = use_avx2(path), avx512 = use_avx512(path);
  if (eb == 1) {
    if (avx2 && narrow<NarrowKernel::U8Avx2>(row, col, rows, cols, 1, 32, b, avx512)) return true;
    if (avx2 && rows == 16 && b.count >= 2 && narrow<NarrowKernel::U8Avx2Pairs>(row, col, rows, cols, 1, 16, b, false)) {
      return true;
    }
    return narrow<NarrowKernel::U8Sse2>(row, col, rows, cols, 1, 16, b, false);
  }
  return eb == 2 && avx2 && narrow<NarrowKernel::U16Avx2>(row, col, rows, cols, 2, 8, b, avx512);
}

// 16x8 byte blocks (16 rows and more): each block writes 16 bytes to each of 8 columns.
template <class SR, class DC>
void blocks_u8_16x8(SR row, DC col, int64_t rows, int64_t cols) {
  tile_2d<1>(row, col, rows, cols, 16, 8, [&](int64_t r, int64_t c) {
    if constexpr (DC::Cursor::kStream) narrow::prefetch_rows<16, 64>(row.at(r, c), c);
    __m128i top[4], bot[4];
    tr8x8_u8(row.at(r, c), top);
    tr8x8_u8(row.at(r + 8, c), bot);
    const auto d = col.at(c, r);
    for (int k = 0; k < 4; ++k) {
      put16(d, 2 * k, _mm_unpacklo_epi64(top[k], bot[k]));
      put16(d, 2 * k + 1, _mm_unpackhi_epi64(top[k], bot[k]));
    }
  });
}

// 8x8 blocks of 16-bit elements: each block writes 16 bytes to each of 8 columns.
template <class SR, class DC>
void blocks_u16_8x8(SR row, DC col, int64_t rows, int64_t cols) {
  tile_2d<2>(row, col, rows, cols, 8, 8, [&](int64_t r, int64_t c) {
    __m128i a[8], out[8];
    const auto s = row.at(r, 2 * c);
    if constexpr (DC::Cursor::kStream) narrow::prefetch_rows<8, 32>(s, c);
    for (int k = 0; k < 8; ++k) a[k] = load16(s[k]);
    narrow::sse2::network_8x8_u16(a, out);
    const auto d = col.at(c, 2 * r);
    for (int k = 0; k < 8; ++k) put16(d, k, out[k]);
  });
}

// Matrices of 2 to 7 columns whose rows are back to back (NVDLA DC weights of 1xN, Nx1 and 2x2
// kernels: each kernel's channels x R*S taps) are narrower than every block kernel and would go
// element by element, many times slower per byte than 3x3 kernels; so would their inverse, 3,
// 5, 6 or 7 rows interleaved into back-to-back columns (unpacking those weights).
// 16 / EB rows of N columns are exactly N 16-byte registers, and so are their N columns: each
// register of one side is built from every register of the other with one byte shuffle each,
// ORed together. A ShuffleTable holds, for (N, EB) and a direction, the shuffle control
// ctrl[j][q] that takes register q's share of register j (0x80: a byte from another register).
struct ShuffleTable {
  alignas(16) uint8_t ctrl[7][7][16];
};

// gather: N columns of back-to-back rows -> column j; spread: N rows -> interleaved register j.
// Not inlined: the kernels that call it are flattened, and its table builder is cold code.
__attribute__((noinline)) const ShuffleTable& shuffle_table(int n, int eb, bool spread) {
  static const std::vector<ShuffleTable> tables = [] {
    std::vector<ShuffleTable> t(32);
    for (int dir = 0; dir < 2; ++dir) {
      for (int e = 1; e <= 2; ++e) {
        for (int cols = 2; cols <= 7; ++cols) {
          ShuffleTable& g = t[static_cast<size_t>(dir * 16 + (e - 1) * 8 + cols)];
          const int w = cols * e;  // bytes per row (gather) or per interleaved column (spread)
          for (int j = 0; j < cols; ++j) {
            for (int q = 0; q < cols; ++q) {
              for (int b = 0; b < 16; ++b) {
                int at;  // the byte's place in register q, or -1
                if (dir == 0) {
                  const int from = (b / e) * w + j * e + b % e;  // row b / e, column j
                  at = from / 16 == q ? from % 16 : -1;
                } else {
                  const int t16 = 16 * j + b;  // element t16 / w of the rows, row (t16 % w) / e
                  at = (t16 % w) / e == q ? (t16 / w) * e + t16 % e : -1;
                }
                g.ctrl[j][q][b] = at < 0 ? 0x80 : static_cast<uint8_t>(at);
              }
            }
          }
        }
      }
    }
    return t;
  }();
  return tables[static_cast<size_t>((spread ? 16 : 0) + (eb - 1) * 8 + n)];
}

// The gather and spread kernels below are compiled for SSSE3 (pshufb) as one region, so that the
// lambdas they hand to over_steps are SSSE3 code too and, flattened into the kernel, inline into
// it. Their callers check cpu().ssse3 first.
#pragma GCC push_options
#pragma GCC target("ssse3")

// Register j of the other side from the N registers in.
template <int N>
__attribute__((always_inline)) inline __m128i shuffle_join(const __m128i* in, const ShuffleTable& T, int j) {
  auto ctrl = [&T, j](int q) { return _mm_load_si128(reinterpret_cast<const __m128i*>(T.ctrl[j][q])); };
  __m128i v = _mm_shuffle_epi8(in[0], ctrl(0));
  for (int q = 1; q < N; ++q) v = _mm_or_si128(v, _mm_shuffle_epi8(in[q], ctrl(q)));
  return v;
}

// Rows r..r + 16 / EB - 1 of Cols back-to-back columns into 16 bytes of each column.
template <int Cols, int EB, class DC>
__attribute__((always_inline)) inline void gather_step(const Strided& row, const DC& col, int64_t r,
                                                       const ShuffleTable& T) {
  __m128i in[Cols];
  for (int q = 0; q < Cols; ++q) in[q] = load16(row(r) + 16 * q);
  const auto d = col.at(0, r * EB);
  for (int j = 0; j < Cols; ++j) put16(d, j, shuffle_join<Cols>(in, T, j));
}

// rows >= 16 / EB; the last step overlaps the one before it (the same values again). Over a
// batch of equally spaced matrices in one call: a matrix is often one kernel's channel block
// (64 rows of 3 taps: four steps), where a call per matrix cost as much as its shuffles.
template <int Cols, int EB, class DC>
__attribute__((flatten)) void gather_columns(Strided row, DC col, int64_t rows, const narrow::Batch& b) {
  const ShuffleTable& T = shuffle_table(Cols, EB, false);
  for_each_matrix(row, col, b, [&](const Strided& row, const DC& col) {
    over_steps(rows, 16 / EB, [&](int64_t r) { gather_step<Cols, EB>(row, col, r, T); });
  });
}

// Columns c..c + 16 / EB - 1 of Rows rows into those interleaved columns.
template <int Rows, int EB, class SR>
__attribute__((always_inline)) inline void spread_step(const SR& row, const StridedOut& col, int64_t c,
                                                       const ShuffleTable& T) {
  const auto s = row.at(0, c * EB);
  __m128i v[Rows], out[Rows];
  for (int k = 0; k < Rows; ++k) v[k] = load16(s[k]);
  for (int j = 0; j < Rows; ++j) out[j] = shuffle_join<Rows>(v, T, j);
  store_columns<EB, Rows, 16 / EB>(out, col(c), col.stride);
}

// Rows (3, 5, 6, 7) rows interleaved into their columns, 16 / EB columns per step (cols >= 16 /
// EB; the last step overlaps the one before it), over the batch b: the inverse of
// gather_columns.
template <int Rows, int EB, class SR>
__attribute__((flatten)) void spread_rows(SR row, StridedOut col, int64_t cols, const narrow::Batch& b) {
  const ShuffleTable& T = shuffle_table(Rows, EB, true);
  for_each_matrix(row, col, b, [&](const SR& row, const StridedOut& col) {
    over_steps(cols, 16 / EB, [&](int64_t c) { spread_step<Rows, EB>(row, col, c, T); });
  });
}

#pragma GCC pop_options

// The gather kernel where it applies (SSSE3, 2..7 columns, back-to-back rows, 16 / eb rows or
// more), over the batch b.
template <int EB, class SR, class DC>
bool try_gather(const SR& row, const DC& col, int64_t rows, int64_t cols, const narrow::Batch& b = {}) {
  if constexpr (!std::is_same_v<SR, Strided>) {
    return false;
  } else {
    if (cols < 2 || cols > 7 || rows < 16 / EB || row.stride != cols * EB || !cpu().ssse3) return false;
    switch (cols) {
      case 2: gather_columns<2, EB>(row, col, rows, b); break;
      case 3: gather_columns<3, EB>(row, col, rows, b); break;
      case 4: gather_columns<4, EB>(row, col, rows, b); break;
      case 5: gather_columns<5, EB>(row, col, rows, b); break;
      case 6: gather_columns<6, EB>(row, col, rows, b); break;
      default: gather_columns<7, EB>(row, col, rows, b); break;
    }
    return true;
  }
}

// 2..7 rows interleaved into back-to-back columns, over the batch b: 2 and 4 rows by unpacks
// (every SSE2 CPU), 3, 5, 6 and 7 by the spread kernel (SSSE3, 16 / EB columns or more). False
// for other row counts.
template <int EB, class SR>
bool try_interleave(const SR& row, const StridedOut& col, int64_t rows, int64_t cols, const narrow::Batch& b) {
  if (rows == 2) return interleave<EB, 2>(row, col, cols, b), true;
  if (rows == 4) return interleave<EB, 4>(row, col, cols, b), true;
  if (cols < 16 / EB || !cpu().ssse3) return false;
  switch (rows) {
    case 3: spread_rows<3, EB>(row, col, cols, b); return true;
    case 5: spread_rows<5, EB>(row, col, cols, b); return true;
    case 6: spread_rows<6, EB>(row, col, cols, b); return true;
    case 7: spread_rows<7, EB>(row, col, cols, b); return true;
    default: return false;
  }
}

// 2..7 columns gathered or 2..7 rows interleaved, over the batch b, where a kernel takes them.
template <int EB>
bool try_few(const Strided& row, const StridedOut& col, int64_t rows, int64_t cols, const narrow::Batch& b) {
  return try_gather<EB>(row, col, rows, cols, b) || try_interleave<EB>(row, col, rows, cols, b);
}

template <class SR, class DC>
void kernel_u8(SR row, DC col, int64_t rows, int64_t cols, KernelPath path) {
  if constexpr (std::is_same_v<DC, StridedOut>) {
    if (try_interleave<1>(row, col, rows, cols, narrow::Batch{})) return;
  }
  if constexpr (std::is_same_v<SR, Strided>) {
    if (try_narrow(row, col, rows, cols, 1, narrow::Batch{}, path)) return;
  }
  if (cols < 8 && try_gather<1>(row, col, rows, cols)) return;
  const bool avx2 = use_avx2(path);
  if (rows >= 32 && cols >= 16 && avx2) return narrow::avx2::tall16_u8(row, col, rows, cols);
  if (rows >= 32 && cols >= 8 && avx2) return narrow::avx2::tall_u8(row, col, rows, cols);  // cols < 16
  if (rows >= 16 && cols >= 32 && avx2) return narrow::avx2::wide16_u8(row, col, rows, cols);
  if (rows < 16) {  // 8x8 blocks for 8..15 rows (8-byte atoms, short channel blocks)
    tile_2d<1>(row, col, rows, cols, 8, 8, [&](int64_t r, int64_t c) {
      __m128i t[4];
      tr8x8_u8(row.at(r, c), t);
      const auto d = col.at(c, r);
      for (int k = 0; k < 4; ++k) {
        store8(d[2 * k], t[k]);
        store8(d[2 * k + 1], _mm_unpackhi_epi64(t[k], t[k]));
      }
    });
    return;
  }
  blocks_u8_16x8(row, col, rows, cols);
}

template <class SR, class DC>
void kernel_u16(SR row, DC col, int64_t rows, int64_t cols, KernelPath path) {
  if constexpr (std::is_same_v<DC, StridedOut>) {
    if (try_interleave<2>(row, col, rows, cols, narrow::Batch{})) return;
  }
  if constexpr (std::is_same_v<SR, Strided>) {
    if (try_narrow(row, col, rows, cols, 2, narrow::Batch{}, path)) return;
  }
  if (rows >= 16 && cols >= 8 && use_avx2(path)) return narrow::avx2::tall_u16(row, col, rows, cols);
  if (cols < 8 && try_gather<2>(row, col, rows, cols)) return;
  blocks_u16_8x8(row, col, rows, cols);
}

template <class SR, class DC>
void kernel_u32(SR row, DC col, int64_t rows, int64_t cols) {
  tile_2d<4>(row, col, rows, cols, 4, 4, [&](int64_t r, int64_t c) {
    const auto s = row.at(r, 4 * c);
    const __m128i a0 = load16(s[0]), a1 = load16(s[1]), a2 = load16(s[2]), a3 = load16(s[3]);
    const __m128i b0 = _mm_unpacklo_epi32(a0, a1), b1 = _mm_unpackhi_epi32(a0, a1);
    const __m128i b2 = _mm_unpacklo_epi32(a2, a3), b3 = _mm_unpackhi_epi32(a2, a3);
    const auto d = col.at(c, 4 * r);
    store16(d[0], _mm_unpacklo_epi64(b0, b2));
    store16(d[1], _mm_unpackhi_epi64(b0, b2));
    store16(d[2], _mm_unpacklo_epi64(b1, b3));
    store16(d[3], _mm_unpackhi_epi64(b1, b3));
  });
}
#endif

template <class SR, class DC>
void dispatch(SR row, DC col, int64_t rows, int64_t cols, int64_t eb, KernelPath path = KernelPath::kAuto) {
#if defined(NPUPACK_SSE2)
  switch (eb) {
    case 1: return kernel_u8(row, col, rows, cols, path);
    case 2: return kernel_u16(row, col, rows, cols, path);
    case 4: return kernel_u32(row, col, rows, cols);
    default: return scalar<8>(row, col, 0, rows, 0, cols);
  }
#else
  (void)path;
  switch (eb) {
    case 1: return scalar<1>(row, col, 0, rows, 0, cols);
    case 2: return scalar<2>(row, col, 0, rows, 0, cols);
    case 4: return scalar<4>(row, col, 0, rows, 0, cols);
    default: return scalar<8>(row, col, 0, rows, 0, cols);
  }
#endif
}

}  // namespace

void transpose(const char* src, int64_t src_stride, char* dst, int64_t dst_stride, int64_t rows, int64_t cols,
               int64_t eb) {
  dispatch(Strided{src, src_stride}, StridedOut{dst, dst_stride}, rows, cols, eb);
}

void transpose_stream(const char* src, int64_t src_stride, char* dst, int64_t dst_stride, int64_t rows, int64_t cols,
                      int64_t eb) {
#if defined(NPUPACK_SSE2)
  // Only back-to-back columns (dst_stride = rows * eb) that one kernel pass writes whole (16 or 32
  // bytes, one store per column and block; 64 bytes of 32 halves, two stores in one tall_u16
  // step), so that the stores fill each line in quick succession: a line written in parts at
  // different times would leave partial lines in the write-combining buffers, which costs more
  // than the read it saves.
  if (dst_stride != rows * eb) return transpose(src, src_stride, dst, dst_stride, rows, cols, eb);
  const Strided row{src, src_stride};
  const StreamOut col{dst, dst_stride};
  if (cols >= 8 && reinterpret_cast<uintptr_t>(dst) % 16 == 0) {  // non-temporal stores are 16 bytes, aligned
    if (eb == 1 && rows == 32 && cols >= 16 && cpu().avx2) return narrow::avx2::tall16_u8(row, col, rows, cols);
    if (eb == 1 && rows == 32 && cpu().avx2) return narrow::avx2::tall_u8(row, col, rows, cols);
    if (eb == 2 && (rows == 16 || rows == 32) && cpu().avx2) return narrow::avx2::tall_u16(row, col, rows, cols);
    if (eb == 1 && rows == 16 && cols >= 32 && cpu().avx2) return narrow::avx2::wide16_u8(row, col, rows, cols);
    if (eb == 1 && rows == 16) return blocks_u8_16x8(row, col, rows, cols);
    if (eb == 2 && rows == 8) return blocks_u16_8x8(row, col, rows, cols);
  }
#endif
  transpose(src, src_stride, dst, dst_stride, rows, cols, eb);
}

int transpose_finite16(const char* src, int64_t src_stride, char* dst, int64_t dst_stride, int64_t rows, int64_t cols,
                       bool stream) {
#if defined(NPUPACK_SSE2)
  // The kernels transpose / transpose_stream choose, where they can test: tall_u16 (streamed
  // under transpose_stream's own conditions: 16 rows, columns back to back and aligned), and for
  // 9 columns with rows back to back the 3x3 rotation kernel. Other narrow shapes (9..16
  // columns) are left to their own kernels, untested.
  if (rows < 16 || cols < 8 || !cpu().avx2) return -1;
  if (stream && rows == 16 && dst_stride == 32 && reinterpret_cast<uintptr_t>(dst) % 16 == 0) {
    bool nonfinite = false;
    narrow::avx2::tall_u16(Strided{src, src_stride}, StreamOut{dst, dst_stride}, rows, cols, &nonfinite);
    return nonfinite ? 0 : 1;
  }
  if (cols >= 9 && cols <= 16) return transpose_batch_finite16(src, src_stride, 0, dst, dst_stride, 0, rows, cols, 1);
  bool nonfinite = false;
  narrow::avx2::tall_u16(Strided{src, src_stride}, StridedOut{dst, dst_stride}, rows, cols, &nonfinite);
  return nonfinite ? 0 : 1;
#else
  (void)src, (void)src_stride, (void)dst, (void)dst_stride, (void)rows, (void)cols, (void)stream;
  return -1;
#endif
}

bool transpose_batch(const char* src, int64_t src_stride, int64_t src_step, char* dst, int64_t dst_stride,
                     int64_t dst_step, int64_t rows, int64_t cols, int64_t count, int64_t eb, const char* ahead,
                     int64_t ahead_bytes, KernelPath path) {
#if defined(NPUPACK_SSE2)
  const narrow::Batch batch{count, src_step, dst_step, ahead, ahead_bytes};
  if (try_narrow(Strided{src, src_stride}, StridedOut{dst, dst_stride}, rows, cols, eb, batch, path)) return true;
  if (try_short_rows(Strided{src, src_stride}, StridedOut{dst, dst_stride}, rows, cols, eb, batch)) return false;
  if (eb == 1 ? try_few<1>(Strided{src, src_stride}, StridedOut{dst, dst_stride}, rows, cols, batch)
              : eb == 2 && try_few<2>(Strided{src, src_stride}, StridedOut{dst, dst_stride}, rows, cols, batch)) {
    return false;
  }
#else
  (void)ahead, (void)ahead_bytes;
#endif
  for (int64_t i = 0; i < count; ++i) {
    dispatch(Strided{src + i * src_step, src_stride}, StridedOut{dst + i * dst_step, dst_stride}, rows, cols, eb, path);
  }
  return false;
}

int transpose_batch_finite16(const char* src, int64_t src_stride, int64_t src_step, char* dst, int64_t dst_stride,
                             int64_t dst_step, int64_t rows, int64_t cols, int64_t count, const char* ahead,
                             int64_t ahead_bytes, KernelPath path) {
#if defined(NPUPACK_SSE2)
  // The cases in which transpose_batch runs run_taps9<2> (narrow, run_narrow).
  if (!use_avx2(path) || cols != 9 || src_stride != 18 || rows < 16) return -1;
  const narrow::RowReader in{src, src_stride, rows, 18};
  const narrow::Batch batch{count, src_step, dst_step, ahead, ahead_bytes};
  bool nonfinite = false;
  if (use_avx512(path) && rows >= 32) {
    narrow::avx512::run_taps9<2>(in, StridedOut{dst, dst_stride}, batch, &nonfinite);
  } else {
    narrow::avx2::run_taps9<2>(in, StridedOut{dst, dst_stride}, batch, &nonfinite);
  }
  return nonfinite ? 0 : 1;
#else
  (void)src, (void)src_stride, (void)src_step, (void)dst, (void)dst_stride, (void)dst_step, (void)rows, (void)cols;
  (void)count, (void)ahead, (void)ahead_bytes, (void)path;
  return -1;
#endif
}

bool batch_reads_rows_once_u8(int64_t rows, int64_t cols) {
#if defined(NPUPACK_SSE2)
  return cpu().avx2 && cols >= 9 && cols <= 16 && (rows >= 32 || rows == 16);
#else
  (void)rows;
  (void)cols;
  return false;
#endif
}

void transpose_to_cols(const char* src, int64_t src_stride, char* dst, const int64_t* dst_cols, int64_t rows,
                       int64_t cols, int64_t eb) {
  dispatch(Strided{src, src_stride}, TableOut{dst, dst_cols}, rows, cols, eb);
}

void transpose_from_ptrs(const char* const* rows, char* dst, int64_t dst_stride, int64_t nrows, int64_t cols,
                         int64_t eb) {
  dispatch(PtrRows{rows}, StridedOut{dst, dst_stride}, nrows, cols, eb);
}

void transpose_from_rows(const char* src, const int64_t* src_rows, char* dst, int64_t dst_stride, int64_t rows,
                         int64_t cols, int64_t eb) {
  dispatch(Table{src, src_rows}, StridedOut{dst, dst_stride}, rows, cols, eb);
}

}  // namespace npupack
