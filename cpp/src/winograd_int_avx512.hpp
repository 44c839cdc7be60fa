// Winograd cubes of int8 weights to int8 at scale 1 with AVX-512 (docs/nvdla.md §9.4, 9.5): the
// integer transform of winograd_int.hpp on sixteen int16 lanes (half the operations of int32
// lanes, which bound this pass), four channels of four kernels whose cubes follow each other in
// the cube row. Each kernel's 36 taps (9 per channel, channels back to back) are read by one
// masked load and gathered into taps by vpermt2b; dword permutes put each cube together.
#pragma once
#include <cstdint>

#include "npupack/cpu.hpp"
#include "winograd_int.hpp"

#if defined(NPUPACK_WG_INT_AVX2)
#define NPUPACK_WG_INT_AVX512 1

namespace npupack {
namespace wg {

// vpermt2b indices over two kernels' taps (the first at bytes 0-35, the second at 64-99): for
// taps 0-7, 128-bit lane i holds tap 2i then tap 2i + 1, eight bytes each (channels 0-3 of the
// first kernel, then of the second); `last` holds tap 8 in bytes 0-7 the same way.
struct QuadIndex {
  alignas(64) uint8_t taps[64], last[64];
};

inline const QuadIndex& quad_index() {
  static const QuadIndex ix = [] {
    QuadIndex x{};
    for (int e = 0; e < 64; ++e) {
      const int tap = 2 * (e / 16) + (e / 8) % 2, p = e % 8;
      x.taps[e] = static_cast<uint8_t>((p < 4 ? 0 : 64) + 9 * (p % 4) + tap);
      x.last[e] = static_cast<uint8_t>((p < 4 ? 0 : 64) + 9 * (p % 4) + 8);
    }
    return x;
  }();
  return ix;
}

// Whether a cube row may take four kernels at a time: int8 to int8 with each kernel's channels
// back to back, AVX-512 VBMI (the other conditions are those of the AVX2 rows).
template <WgSource S, WgTarget T>
bool int8_quads(const WinogradSpec& sp) {
  return S == WgSource::I8 && T == WgTarget::I8 && sp.stride[1] == 9 && cpu().avx512vbmi &&
         allows(sp.path, KernelPath::kAvx512);
}

// Cubes of channels c .. c + 3 of four kernels (36 int8 taps back to back at k[0] .. k[3], none
// read past them), written as four 64-byte cubes back to back from out. The arithmetic is that of
// int_cube_pair on int16 lanes: q = (2G) g (2G)^T weighs each of the nine int8 taps by at most 4
// in magnitude, so |q| <= 9 * 4 * 128, well within int16 (as are the sums on the way).
template <IntRounding M>
__attribute__((target("avx512f,avx512bw,avx512vbmi,avx2"))) void int8_cube_quad(const char* const k[4], char* out,
                                                                               bool stream) {
  const QuadIndex& ix = quad_index();
  constexpr __mmask64 kTaps = (__mmask64{1} << 36) - 1;
  __m512i w[4];
  for (int q = 0; q < 4; ++q) w[q] = _mm512_maskz_loadu_epi8(kTaps, k[q]);
  const __m512i taps = _mm512_load_si512(ix.taps), last = _mm512_load_si512(ix.last);
  const __m512i ab = _mm512_permutex2var_epi8(w[0], taps, w[1]), cd = _mm512_permutex2var_epi8(w[2], taps, w[3]);
  // 128-bit lane i: tap 2i (even) or 2i + 1 (odd) of the 16 lanes, kernel by kernel.
  const __m512i even = _mm512_unpacklo_epi64(ab, cd), odd = _mm512_unpackhi_epi64(ab, cd);
  const __m512i t8 = _mm512_unpacklo_epi64(_mm512_permutex2var_epi8(w[0], last, w[1]),
                                           _mm512_permutex2var_epi8(w[2], last, w[3]));
  // int16 lanes: 128-bit lane 0 holds kernels 0 and 1 (four channels each), lane 1 kernels 2, 3.
  __m256i g[9];
  g[0] = _mm256_cvtepi8_epi16(_mm512_castsi512_si128(even));
  g[1] = _mm256_cvtepi8_epi16(_mm512_castsi512_si128(odd));
  g[2] = _mm256_cvtepi8_epi16(_mm512_extracti32x4_epi32(even, 1));
  g[3] = _mm256_cvtepi8_epi16(_mm512_extracti32x4_epi32(odd, 1));
  g[4] = _mm256_cvtepi8_epi16(_mm512_extracti32x4_epi32(even, 2));
  g[5] = _mm256_cvtepi8_epi16(_mm512_extracti32x4_epi32(odd, 2));
  g[6] = _mm256_cvtepi8_epi16(_mm512_extracti32x4_epi32(even, 3));
  g[7] = _mm256_cvtepi8_epi16(_mm512_extracti32x4_epi32(odd, 3));
  g[8] = _mm256_cvtepi8_epi16(_mm512_castsi512_si128(t8));
  __m256i q[16];
  int_transform<Int16Lanes<M>>(g, q);
  // packs work within 128-bit lanes: z[n] holds, as dwords (four channels' bytes), outputs
  // 4n .. 4n + 3 as [o.k0, o.k1, o+1.k0, o+1.k1, o.k2, o.k3, o+1.k2, o+1.k3] for o = 4n, then 4n + 2.
  __m512i z[4];
  for (int n = 0; n < 4; ++n) {
    const __m256i lo = _mm256_packs_epi16(q[4 * n], q[4 * n + 1]), hi = _mm256_packs_epi16(q[4 * n + 2], q[4 * n + 3]);
    z[n] = _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
  }
  // Kernels 0 and 1 (2 and 3) of outputs 0-7 from z[0], z[1] and of outputs 8-15 from z[2], z[3]:
  // [outputs of k0 | outputs of k1], then the halves put together per kernel.
  const __m512i k01 = _mm512_set_epi32(27, 25, 19, 17, 11, 9, 3, 1, 26, 24, 18, 16, 10, 8, 2, 0);
  const __m512i k23 = _mm512_set_epi32(31, 29, 23, 21, 15, 13, 7, 5, 30, 28, 22, 20, 14, 12, 6, 4);
  const __m512i u0 = _mm512_permutex2var_epi32(z[0], k01, z[1]), u1 = _mm512_permutex2var_epi32(z[2], k01, z[3]);
  const __m512i v0 = _mm512_permutex2var_epi32(z[0], k23, z[1]), v1 = _mm512_permutex2var_epi32(z[2], k23, z[3]);
  const __m512i cube[4] = {_mm512_shuffle_i64x2(u0, u1, 0x44), _mm512_shuffle_i64x2(u0, u1, 0xEE),
                           _mm512_shuffle_i64x2(v0, v1, 0x44), _mm512_shuffle_i64x2(v0, v1, 0xEE)};
  for (int i = 0; i < 4; ++i) {  // `stream`: out is on a line; whole lines bypass the caches
    if (stream) _mm512_stream_si512(reinterpret_cast<__m512i*>(out + 64 * i), cube[i]);
    else _mm512_storeu_si512(out + 64 * i, cube[i]);
  }
}

}  // namespace wg
}  // namespace npupack
#endif
