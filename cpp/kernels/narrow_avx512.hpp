// The AVX-512 VBMI 3x3 rotation blocks, shared by the 8- and 16-bit kernels of cpp/kernels.
#pragma once
#include "narrow.hpp"

#if defined(__x86_64__) || defined(__i386__)
namespace npupack {
namespace narrow {

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
// at once, and a streamed destination (64-byte aligned columns; common.hpp whole_lines) takes
// one non-temporal store per line. Per 576 bytes: 9 loads, 36 blends, 9 permutes, 9 stores, where the AVX2 kernel (two
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
    if constexpr (DCur::kStream) _mm512_stream_si512(reinterpret_cast<__m512i*>(d[j]), column);
    else _mm512_storeu_si512(d[j], column);
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

}  // namespace narrow
}  // namespace npupack
#endif  // x86
