// The AVX-512 VBMI rotation blocks (3x3 and 5x5 taps), shared by the 8- and 16-bit kernels of cpp/kernels.
#pragma once
#include "narrow.hpp"

#if defined(__x86_64__) || defined(__i386__)
namespace npupack {
namespace narrow {

#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vbmi")
namespace avx512 {
// The rotation kernel (avx2::run_taps9) on 512-bit registers, for matrices of 64 rows of bytes or
// 32 rows of halves whose N columns (taps) are back to back: NVDLA DC weights of 3x3 (N = 9) and
// 5x5 (N = 25) kernels, one channel block of 64 channels per matrix (of halves: two blocks of 32
// rows). A block is N 64-byte chunks of
// E = 64 / EB elements; E is a power of two, so for odd N chunk q -> register v = E * q (mod N)
// is one to one, and element p of register v belongs to column (v + p) % N. A rotation by p % N
// (ceil(log2 N) stages, each one mask blend per register: vpblendmb / vpblendmw, any position) gathers
// every column in one register, and one full permute per column (vpermb / vpermw: across the
// whole register, no lanes) puts its rows in order. The whole column is one 64-byte store, so
// every line of the output is written at once, and a streamed destination (64-byte aligned
// columns; common.hpp whole_lines) takes one non-temporal store per line. N = 9 per 576 bytes:
// 9 loads, 36 blends, 9 permutes, 9 stores, where the AVX2 kernel (two 288-byte blocks) needs
// 36 loads, 18 lane blends, 36 (bytes) or 18 (halves) shuffles, 72 or 54 blends and 18 stores.
// N = 25 holds 25 of the 32 registers.

// Stage s of the rotation: the positions (of `n`) whose amount p % N has bit s.
constexpr uint64_t stage_mask(int taps, int n, int s) {
  uint64_t m = 0;
  for (int p = 0; p < n; ++p) m |= static_cast<uint64_t>(((p % taps) >> s) & 1) << p;
  return m;
}

// Row r of column j is element N*r + j, at position (N*r + j) % E of register j after the
// rotation.
template <int N>
struct TapsPermutes {
  alignas(64) uint8_t bytes[N][64] = {};
  alignas(64) uint16_t halves[N][32] = {};
  constexpr TapsPermutes() {
    for (int j = 0; j < N; ++j) {
      for (int r = 0; r < 64; ++r) bytes[j][r] = static_cast<uint8_t>((N * r + j) % 64);
      for (int r = 0; r < 32; ++r) halves[j][r] = static_cast<uint16_t>((N * r + j) % 32);
    }
  }
};
template <int N>
inline constexpr TapsPermutes<N> kTapsPermutes{};

// The positions that mask M selects (bytes or halves), for narrow::rotate.
template <int EB, uint64_t M>
struct MaskBlend {
  void operator()(__m512i& out, const __m512i& a, const __m512i& b) const {
    if constexpr (EB == 1) out = _mm512_mask_blend_epi8(static_cast<__mmask64>(M), a, b);
    else out = _mm512_mask_blend_epi16(static_cast<__mmask32>(M), a, b);
  }
};

// Stages S, S + 1, ... of the rotation by p % N (while 2^S < N).
template <int N, int EB, int S = 0>
NPUPACK_AI void rotate_taps(__m512i* w) {
  if constexpr ((1 << S) < N) {
    rotate<N, (1 << S)>(w, MaskBlend<EB, stage_mask(N, 64 / EB, S)>());
    rotate_taps<N, EB, S + 1>(w);
  }
}

// One block: 64 * N bytes from s (64 rows of bytes or 32 of halves) to column cursor d. With a
// non-null `largest` (halves only: pack_checked's fp16 watch) the magnitudes of every half read
// are max-reduced into it, as in the AVX2 kernel.
template <int N, int EB, class DCur>
NPUPACK_AI void block_taps(const char* s, DCur d, __m512i* largest) {
  static_assert(N % 2 == 1 && N <= 25, "odd tap counts whose registers fit in the 32");
  constexpr int kE = 64 / EB;
  __m512i w[N];  // unrolled, so that w lives in registers
#pragma GCC unroll 32
  for (int q = 0; q < N; ++q) {
    const __m512i chunk = _mm512_loadu_si512(s + 64 * q);
    if (EB == 2 && largest) *largest = _mm512_max_epu16(*largest, _mm512_and_si512(chunk, _mm512_set1_epi16(0x7FFF)));
    w[kE % N * q % N] = chunk;
  }
  rotate_taps<N, EB>(w);
#pragma GCC unroll 32
  for (int j = 0; j < N; ++j) {
    __m512i column;
    if constexpr (EB == 1) {
      column = _mm512_permutexvar_epi8(_mm512_load_si512(kTapsPermutes<N>.bytes[j]), w[j]);
    } else {
      column = _mm512_permutexvar_epi16(_mm512_load_si512(kTapsPermutes<N>.halves[j]), w[j]);
    }
    if constexpr (DCur::kStream) _mm512_stream_si512(reinterpret_cast<__m512i*>(d[j]), column);
    else _mm512_storeu_si512(d[j], column);
  }
}

// avx2::run_taps9 for N taps, matrices of at least 64 (8-bit) or 32 (16-bit) rows back to back.
template <int N, int EB, class DC>
NPUPACK_FLAT void run_taps(const RowReader& in, DC col, const Batch& batch, bool* nonfinite = nullptr) {
  constexpr int kRows = 64 / EB;
  if (EB == 2 && nonfinite) {
    __m512i largest = _mm512_setzero_si512();
    over_batch<kRows>(in, col, batch, [&largest](const RowReader& m, const DC& c, int64_t r) {
      block_taps<N, EB>(m.base + r * N * EB, c.at(0, EB * r), &largest);
    });
    *nonfinite = _mm512_cmpgt_epu16_mask(largest, _mm512_set1_epi16(0x7BFF)) != 0;
  } else {
    over_batch<kRows>(in, col, batch, [](const RowReader& m, const DC& c, int64_t r) {
      block_taps<N, EB>(m.base + r * N * EB, c.at(0, EB * r), nullptr);
    });
  }
}

// run_taps for the tap counts the kernels take: 9 or 25 columns.
inline bool taps_cols(int64_t cols) { return cols == 9 || cols == 25; }
template <int EB, class DC>
inline void run_taps_of(int64_t cols, const RowReader& in, DC col, const Batch& batch, bool* nonfinite = nullptr) {
  if (cols == 9) run_taps<9, EB>(in, col, batch, nonfinite);
  else run_taps<25, EB>(in, col, batch, nonfinite);
}
}  // namespace avx512
#pragma GCC pop_options

}  // namespace narrow
}  // namespace npupack
#endif  // x86
