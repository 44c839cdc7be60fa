// Winograd cubes of integer weights to integer targets at scale 1, exactly in int32
// (docs/nvdla.md §9.4, 9.5). 4 * G g G^T is an integer combination of the taps (2G has integer
// entries), and the float64 transform of integer taps is exact, so q = 4t here is 4 times the
// float64 value; q / 4 is rounded by the chosen mode in integer arithmetic and saturated by the
// packs, which gives the integers wg::round_cube gives for t (rounding is monotonic, so clamping
// before or after it is the same). Eight lanes per register: four channels of two kernels, whose
// cubes are neighbours in the cube row.
#pragma once
#include <cstdint>

#include "npupack/cpu.hpp"
#include "npupack/winograd.hpp"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define NPUPACK_WG_INT_AVX2 1

namespace npupack {
namespace wg {

// Rows r[l] (taps 0-7 of lane l) -> r[j] (tap j of the eight lanes).
__attribute__((target("avx2"))) inline void transpose8(__m256i r[8]) {
  __m256i t[8], u[8];
  for (int i = 0; i < 8; i += 2) {
    t[i] = _mm256_unpacklo_epi32(r[i], r[i + 1]);
    t[i + 1] = _mm256_unpackhi_epi32(r[i], r[i + 1]);
  }
  for (int h = 0; h < 8; h += 4) {
    u[h] = _mm256_unpacklo_epi64(t[h], t[h + 2]);
    u[h + 1] = _mm256_unpackhi_epi64(t[h], t[h + 2]);
    u[h + 2] = _mm256_unpacklo_epi64(t[h + 1], t[h + 3]);
    u[h + 3] = _mm256_unpackhi_epi64(t[h + 1], t[h + 3]);
  }
  for (int j = 0; j < 4; ++j) {
    r[j] = _mm256_permute2x128_si256(u[j], u[4 + j], 0x20);
    r[4 + j] = _mm256_permute2x128_si256(u[j], u[4 + j], 0x31);
  }
}

// q / 4 rounded as IntRounding M rounds t = q / 4 (arithmetic shifts floor), on lanes of V (its
// integer operations; V::kBits bits a lane): one definition for int32 and int16 lanes.
template <class V, IntRounding M>
__attribute__((target("avx2"), always_inline)) inline typename V::Reg quarter(typename V::Reg q) {
  if constexpr (M == IntRounding::NearestEven) {  // floor((q + 1 + bit 2 of q) / 4)
    const auto odd = _mm256_and_si256(V::template srai<2>(q), V::set1(1));
    return V::template srai<2>(V::add(V::add(q, V::set1(1)), odd));
  } else {  // on |q|, the sign put back: halves away from zero, or toward zero
    const auto sign = V::template srai<V::kBits - 1>(q);
    auto m = V::abs(q);
    if constexpr (M == IntRounding::NearestAway) m = V::add(m, V::set1(2));
    return V::sub(_mm256_xor_si256(V::template srli<2>(m), sign), sign);
  }
}

// m / 2 rounded as IntRounding M rounds it: the outputs on the border of the cube, whose q is
// 2m (quarter(2m) and half(m) round the same number, m / 2).
template <class V, IntRounding M>
__attribute__((target("avx2"), always_inline)) inline typename V::Reg half(typename V::Reg m) {
  if constexpr (M == IntRounding::NearestEven) {  // floor((m + bit 1 of m) / 2)
    return V::template srai<1>(V::add(m, _mm256_and_si256(V::template srai<1>(m), V::set1(1))));
  } else {
    const auto sign = V::template srai<V::kBits - 1>(m);
    auto a = V::abs(m);
    if constexpr (M == IntRounding::NearestAway) a = V::add(a, V::set1(1));
    return V::sub(_mm256_xor_si256(V::template srli<1>(a), sign), sign);
  }
}

// Whether int_row applies to every cube row of four real channels: 8- or 16-bit integer taps back
// to back (3x3, stride 1 is checked per row), an integer target at scale 1, AVX2.
template <WgSource S, WgTarget T>
bool int_rows(const WinogradSpec& sp) {
  constexpr int64_t eb = S == WgSource::I8 ? 1 : 2;
  return (S == WgSource::I8 || S == WgSource::I16) && T != WgTarget::F16 && sp.scale == 1.0 &&
         sp.stride[3] == eb && sp.stride[2] == 3 * eb && cpu().avx2 &&
         allows(sp.path, KernelPath::kAvx2);
}

// The integer Winograd transform on lanes of V (V::add, V::sub, V::quarter, V::half): h = 2G g
// (4x3), q = h (2G)^T = 4 G g G^T, each q then quartered (rounded); the taps g[3r + s], the
// rounded outputs q[4i + j]. Rows 0 and 3 of h are 2g and columns 0 and 3 of (2G)^T double once
// more, so the four corners are the corner taps themselves (q = 4g) and the other border outputs
// are halves of sums of taps or of h (q = 2m): the same numbers as quartering 4G g G^T, with
// fewer operations. int_cube_pair runs it on int32 lanes, the AVX-512 quads on int16 lanes.
template <class V>
__attribute__((target("avx2"), always_inline)) inline void int_transform(const typename V::Reg g[9],
                                                                         typename V::Reg q[16]) {
  typename V::Reg h[6];  // rows 1 and 2 of h: sums and differences of the tap rows
  for (int j = 0; j < 3; ++j) {
    const auto s02 = V::add(g[j], g[6 + j]);
    h[j] = V::add(s02, g[3 + j]);
    h[3 + j] = V::sub(s02, g[3 + j]);
  }
  for (int i = 0; i < 4; i += 3) {  // rows 0 and 3: the tap rows r = 0 and 2, h = 2g
    const auto* r = g + (i == 0 ? 0 : 6);
    const auto s02 = V::add(r[0], r[2]);
    q[4 * i] = r[0];
    q[4 * i + 1] = V::half(V::add(s02, r[1]));
    q[4 * i + 2] = V::half(V::sub(s02, r[1]));
    q[4 * i + 3] = r[2];
  }
  for (int i = 1; i < 3; ++i) {
    const auto* r = h + 3 * (i - 1);
    const auto s02 = V::add(r[0], r[2]);
    q[4 * i] = V::half(r[0]);
    q[4 * i + 1] = V::quarter(V::add(s02, r[1]));
    q[4 * i + 2] = V::quarter(V::sub(s02, r[1]));
    q[4 * i + 3] = V::half(r[2]);
  }
}

// The lane types of int_transform and quarter: eight int32 lanes (AVX2 pairs) or sixteen int16
// lanes (AVX-512 quads, winograd_int_avx512.hpp).
#define NPUPACK_WG_LANES(Name, bits, W)                                                                       \
  template <IntRounding M>                                                                                    \
  struct Name {                                                                                               \
    using Reg = __m256i;                                                                                      \
    static constexpr int kBits = bits;                                                                        \
    __attribute__((target("avx2"), always_inline)) static Reg add(Reg a, Reg b) { return _mm256_add_##W(a, b); } \
    __attribute__((target("avx2"), always_inline)) static Reg sub(Reg a, Reg b) { return _mm256_sub_##W(a, b); } \
    __attribute__((target("avx2"), always_inline)) static Reg abs(Reg a) { return _mm256_abs_##W(a); }           \
    __attribute__((target("avx2"), always_inline)) static Reg set1(int v) { return _mm256_set1_##W(v); }         \
    template <int N>                                                                                          \
    __attribute__((target("avx2"), always_inline)) static Reg srai(Reg a) { return _mm256_srai_##W(a, N); }      \
    template <int N>                                                                                          \
    __attribute__((target("avx2"), always_inline)) static Reg srli(Reg a) { return _mm256_srli_##W(a, N); }      \
    __attribute__((target("avx2"), always_inline)) static Reg quarter(Reg q) { return wg::quarter<Name, M>(q); } \
    __attribute__((target("avx2"), always_inline)) static Reg half(Reg m) { return wg::half<Name, M>(m); }       \
  };
NPUPACK_WG_LANES(Int32Lanes, 32, epi32)
NPUPACK_WG_LANES(Int16Lanes, 16, epi16)
#undef NPUPACK_WG_LANES

// Cubes of four channels of two kernels: lanes 0-3 read channels at a + l * cstride, lanes 4-7
// at b + l * cstride (9 taps back to back each); written to out_a and out_b in the cube's
// memory order (c fastest, then s, then r).
template <WgSource S, WgTarget T, IntRounding M>
__attribute__((target("avx2"))) void int_cube_pair(const char* a, const char* b, int64_t cstride, char* out_a,
                                                   char* out_b) {
  static_assert(S == WgSource::I8 || S == WgSource::I16, "signed integer sources only");
  constexpr int64_t eb = S == WgSource::I8 ? 1 : 2;
  __m256i g[9];
  alignas(32) int32_t last[8];
  for (int l = 0; l < 8; ++l) {
    const char* p = (l < 4 ? a : b) + (l & 3) * cstride;
    if constexpr (S == WgSource::I8) {
      g[l] = _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
      last[l] = *reinterpret_cast<const int8_t*>(p + 8);
    } else {
      g[l] = _mm256_cvtepi16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
      int16_t v;
      __builtin_memcpy(&v, p + 8 * eb, 2);
      last[l] = v;
    }
  }
  transpose8(g);
  g[8] = _mm256_load_si256(reinterpret_cast<const __m256i*>(last));
  __m256i q[16];
  int_transform<Int32Lanes<M>>(g, q);
  // packs work within 128-bit halves: the low half of each result is kernel a's, the high b's.
  for (int i = 0; i < 16; i += 4) {
    const __m256i w0 = _mm256_packs_epi32(q[i], q[i + 1]), w1 = _mm256_packs_epi32(q[i + 2], q[i + 3]);
    if constexpr (T == WgTarget::I8) {
      const __m256i v = _mm256_packs_epi16(w0, w1);
      _mm_storeu_si128(reinterpret_cast<__m128i*>(out_a + 4 * i), _mm256_castsi256_si128(v));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(out_b + 4 * i), _mm256_extracti128_si256(v, 1));
    } else {
      _mm_storeu_si128(reinterpret_cast<__m128i*>(out_a + 8 * i), _mm256_castsi256_si128(w0));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(out_b + 8 * i), _mm256_extracti128_si256(w0, 1));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(out_a + 8 * i + 16), _mm256_castsi256_si128(w1));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(out_b + 8 * i + 16), _mm256_extracti128_si256(w1, 1));
    }
  }
}

}  // namespace wg
}  // namespace npupack
#endif
