// The pshufb gather (2..7 columns) and spread (3, 5, 6, 7 rows) loops (SSSE3), templates
// instantiated by the kernel files transpose_x{8,16}_*xn_ssse3.cpp and
// transpose_x{8,16}_nx*_ssse3.cpp.
#pragma once
#include <cstdint>

#include "common.hpp"

#if defined(__x86_64__) || defined(__i386__)
namespace npupack {
namespace kernels {

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
const ShuffleTable& shuffle_table(int n, int eb, bool spread);

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

}  // namespace kernels
}  // namespace npupack
#endif  // x86
