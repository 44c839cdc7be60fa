#include "npupack/winograd.hpp"

#include <algorithm>
#include <cmath>
#include <type_traits>
#include <cstring>
#include <string>

#include "npupack/checked.hpp"
#include "npupack/cpu.hpp"
#include "npupack/errors.hpp"
#include "npupack/parallel.hpp"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif
#if defined(__SSE2__)
#define NPUPACK_WG_SSE2 1
#endif

namespace npupack {

namespace {

int64_t target_bytes(WgTarget t) { return t == WgTarget::I8 ? 1 : 2; }

// Binary16 bits -> double, exactly (every half value is a double), by bit assembly.
inline double half_to_double(uint16_t h) {
  const uint64_t sign = static_cast<uint64_t>(h & 0x8000) << 48;
  const uint64_t e = (h >> 10) & 0x1F, m = h & 0x3FF;
  double v;
  if (e == 0) {
    v = static_cast<double>(m) * 5.9604644775390625e-08;  // m * 2^-24, exact
    uint64_t b;
    std::memcpy(&b, &v, 8);
    b |= sign;
    std::memcpy(&v, &b, 8);
    return v;
  }
  const uint64_t b = sign | ((e == 31 ? uint64_t{2047} : e - 15 + 1023) << 52) | (m << 42);
  std::memcpy(&v, &b, 8);
  return v;
}

template <WgSource S>
inline double load(const char* p) {
  if constexpr (S == WgSource::I8) return static_cast<double>(*reinterpret_cast<const int8_t*>(p));
  if constexpr (S == WgSource::U8) return static_cast<double>(*reinterpret_cast<const uint8_t*>(p));
  if constexpr (S == WgSource::I16 || S == WgSource::U16 || S == WgSource::F16) {
    uint16_t b;
    std::memcpy(&b, p, 2);
    if constexpr (S == WgSource::I16) return static_cast<double>(static_cast<int16_t>(b));
    if constexpr (S == WgSource::U16) return static_cast<double>(b);
    if constexpr (S == WgSource::F16) return half_to_double(b);
  }
  if constexpr (S == WgSource::F32) {
    float f;
    std::memcpy(&f, p, 4);
    return static_cast<double>(f);
  }
  if constexpr (S == WgSource::F64) {
    double d;
    std::memcpy(&d, p, 8);
    return d;
  }
  return 0.0;
}

// Four channels side by side (one lane each). GCC/Clang vector arithmetic: in the baseline build
// it becomes SSE2 pairs, inlined into the AVX2 cube it becomes one 256-bit operation.
using Lanes4 = double __attribute__((vector_size(32)));

// t = G g G^T with G = [[1,0,0],[.5,.5,.5],[.5,-.5,.5],[0,0,1]] for four channels at once
// (g[j] = tap j, t[i] = output i, one channel per lane). Scaling by 0.5 is exact, so this is the
// matrix product whatever the association; zero results are made +0 (`+ 0.0`) because the sign
// of a computed zero depends only on the evaluation order (docs/nvdla.md §9.4). The one definition of
// the arithmetic, for every path.
__attribute__((always_inline)) inline void transform4(const Lanes4 g[9], Lanes4 t[16]) {
  Lanes4 a[12];  // a = G g, 4x3
  for (int j = 0; j < 3; ++j) {
    const Lanes4 g0 = g[j], g1 = g[3 + j], g2 = g[6 + j];
    a[j] = g0;
    a[3 + j] = 0.5 * (g0 + g1 + g2);
    a[6 + j] = 0.5 * (g0 - g1 + g2);
    a[9 + j] = g2;
  }
  for (int i = 0; i < 4; ++i) {
    const Lanes4 a0 = a[3 * i], a1 = a[3 * i + 1], a2 = a[3 * i + 2];
    t[4 * i] = a0 + 0.0;
    t[4 * i + 1] = 0.5 * (a0 + a1 + a2) + 0.0;
    t[4 * i + 2] = 0.5 * (a0 - a1 + a2) + 0.0;
    t[4 * i + 3] = a2 + 0.0;
  }
}

// Integer rounding of n values (v * scale) without libm calls or branches: clamped to
// [lo - 1, hi + 1] first, so the int32 conversions are exact; adding and subtracting 1.5 * 2^52
// rounds to nearest even in the default rounding mode (built without -ffast-math, so the
// compiler keeps both operations).
constexpr double kMagic = 6755399441055744.0;

template <IntRounding M>
inline int32_t round_one(double v, double scale, double lo, double hi) {
  v *= scale;
  v = v < lo - 1.0 ? lo - 1.0 : v;
  v = v > hi + 1.0 ? hi + 1.0 : v;
  int32_t r;
  if constexpr (M == IntRounding::NearestEven) {
    r = static_cast<int32_t>((v + kMagic) - kMagic);
  } else if constexpr (M == IntRounding::NearestAway) {
    r = static_cast<int32_t>(v);
    const double d = v - r;
    r += (d >= 0.5) - (d <= -0.5);
  } else {
    r = static_cast<int32_t>(v);
  }
  r = r < lo ? static_cast<int32_t>(lo) : r;
  return r > hi ? static_cast<int32_t>(hi) : r;
}

#ifdef NPUPACK_WG_SSE2
// Two values at a time with SSE2 (baseline on x86-64): the same operations as round_one.
template <IntRounding M>
inline __m128i round_two(__m128d v, __m128d scale, __m128d lo1, __m128d hi1) {
  v = _mm_min_pd(_mm_max_pd(_mm_mul_pd(v, scale), lo1), hi1);
  if constexpr (M == IntRounding::NearestEven) {
    const __m128d magic = _mm_set1_pd(kMagic);
    return _mm_cvttpd_epi32(_mm_sub_pd(_mm_add_pd(v, magic), magic));
  } else if constexpr (M == IntRounding::NearestAway) {
    const __m128i r = _mm_cvttpd_epi32(v);
    const __m128d d = _mm_sub_pd(v, _mm_cvtepi32_pd(r));
    const __m128i up = _mm_shuffle_epi32(_mm_castpd_si128(_mm_cmpge_pd(d, _mm_set1_pd(0.5))), 0x08);
    const __m128i down = _mm_shuffle_epi32(_mm_castpd_si128(_mm_cmple_pd(d, _mm_set1_pd(-0.5))), 0x08);
    return _mm_add_epi32(_mm_sub_epi32(r, up), down);
  } else {
    return _mm_cvttpd_epi32(v);
  }
}

// 64 values -> int8 or int16 (saturating packs; values are already within lo - 1 .. hi + 1).
template <IntRounding M, class Q>
inline void round_cube(const double* t, double scale, Q* out) {
  constexpr bool kInt8 = sizeof(Q) == 1;
  const __m128d s = _mm_set1_pd(scale);
  const __m128d lo1 = _mm_set1_pd(kInt8 ? -129.0 : -32769.0), hi1 = _mm_set1_pd(kInt8 ? 128.0 : 32768.0);
  for (int i = 0; i < 64; i += 8) {
    __m128i q[4];
    for (int j = 0; j < 4; ++j) q[j] = round_two<M>(_mm_loadu_pd(t + i + 2 * j), s, lo1, hi1);
    const __m128i a = _mm_unpacklo_epi64(q[0], q[1]), b = _mm_unpacklo_epi64(q[2], q[3]);
    const __m128i w = _mm_packs_epi32(a, b);  // 8 x int16, saturated
    if constexpr (kInt8) {
      _mm_storel_epi64(reinterpret_cast<__m128i*>(out + i), _mm_packs_epi16(w, w));
    } else {
      _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i), w);
    }
  }
}
#else
template <IntRounding M, class Q>
inline void round_cube(const double* t, double scale, Q* out) {
  constexpr double lo = sizeof(Q) == 1 ? -128.0 : -32768.0, hi = sizeof(Q) == 1 ? 127.0 : 32767.0;
  for (int i = 0; i < 64; ++i) out[i] = static_cast<Q>(round_one<M>(t[i], scale, lo, hi));
}
#endif

// An integer cube: the 64 transformed values (element order i*4 + lane = the cube's memory
// order) rounded and stored at dst.
template <WgTarget T, IntRounding M>
inline void store_int_cube(const double* tv, double scale, char* dst) {
  if constexpr (T == WgTarget::I8) {
    int8_t vals[64];
    round_cube<M>(tv, scale, vals);
    std::memcpy(dst, vals, sizeof vals);
  } else {
    int16_t vals[64];
    round_cube<M>(tv, scale, vals);
    std::memcpy(dst, vals, sizeof vals);
  }
}

#if defined(__x86_64__) || defined(__i386__)
#define NPUPACK_WG_F16C 1
// 64 doubles -> binary16, round to nearest even, with F16C. Converting through float would round
// twice, so each double is first rounded to odd at float precision (docs/nvdla.md §2.4's correctly
// rounded result, the classic double-rounding fix: float keeps 13 more bits than half). In the
// integer domain that is: clear the 29 mantissa bits float drops and set the lowest kept one if
// any of them was set; the result is exactly a float (in float's normal range; anything smaller
// is far below half's smallest subnormal and still gives +-0), so the conversion to float is
// exact and F16C's nearest-even conversion to half finishes it. INF results of finite inputs and
// INF inputs become +-65504 when saturating, like fp16_from_double.
__attribute__((target("avx2,f16c"))) inline __m128 round_to_odd_ps(__m256d d) {
  const __m256i dropped = _mm256_set1_epi64x(0x1FFFFFFF);
  const __m256i lowest_kept = _mm256_set1_epi64x(0x20000000);
  const __m256i b = _mm256_castpd_si256(d);
  const __m256i lost = _mm256_and_si256(b, dropped);
  const __m256i exact = _mm256_cmpeq_epi64(lost, _mm256_setzero_si256());
  const __m256i odd = _mm256_or_si256(_mm256_xor_si256(b, lost), _mm256_andnot_si256(exact, lowest_kept));
  return _mm256_cvtpd_ps(_mm256_castsi256_pd(odd));
}

// Eight doubles (two vectors) -> eight binary16, stored at out.
__attribute__((target("avx2,f16c"))) inline void store8_fp16(__m256d a, __m256d b, char* out, bool saturate) {
  const __m256 f = _mm256_insertf128_ps(_mm256_castps128_ps256(round_to_odd_ps(a)), round_to_odd_ps(b), 1);
  __m128i v = _mm256_cvtps_ph(f, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  if (saturate) {
    const __m128i inf = _mm_cmpeq_epi16(_mm_and_si128(v, _mm_set1_epi16(0x7FFF)), _mm_set1_epi16(0x7C00));
    v = _mm_sub_epi16(v, _mm_and_si128(inf, _mm_set1_epi16(1)));  // 0x7C00 -> 0x7BFF, keeps the sign
  }
  _mm_storeu_si128(reinterpret_cast<__m128i*>(out), v);
}

__attribute__((target("avx2,f16c"))) void fp16_cube_f16c(const double* t, uint16_t* out, bool saturate) {
  for (int i = 0; i < 64; i += 8) {
    store8_fp16(_mm256_loadu_pd(t + i), _mm256_loadu_pd(t + i + 4), reinterpret_cast<char*>(out + i), saturate);
  }
}

bool has_f16c() { return cpu().avx2 && cpu().f16c; }

template <WgSource S>
constexpr int64_t tap_bytes() {
  return S == WgSource::I8 || S == WgSource::U8 ? 1 : S == WgSource::F32 ? 4 : S == WgSource::F64 ? 8 : 2;
}

// The 9 taps of one channel, back to back in the source, as doubles: taps 0-3, 4-7 and 8.
template <WgSource S>
__attribute__((target("avx2,f16c"))) inline void load_taps(const char* p, __m256d& lo, __m256d& hi, double& last) {
  if constexpr (S == WgSource::I8 || S == WgSource::U8) {  // 8 of the 9 bytes, widened exactly
    const __m128i b = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p));
    const __m256i w = S == WgSource::I8 ? _mm256_cvtepi8_epi32(b) : _mm256_cvtepu8_epi32(b);
    lo = _mm256_cvtepi32_pd(_mm256_castsi256_si128(w));
    hi = _mm256_cvtepi32_pd(_mm256_extracti128_si256(w, 1));
  } else if constexpr (S == WgSource::I16 || S == WgSource::U16) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    const __m256i w = S == WgSource::I16 ? _mm256_cvtepi16_epi32(h) : _mm256_cvtepu16_epi32(h);
    lo = _mm256_cvtepi32_pd(_mm256_castsi256_si128(w));
    hi = _mm256_cvtepi32_pd(_mm256_extracti128_si256(w, 1));
  } else if constexpr (S == WgSource::F16) {
    const __m256 f = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    lo = _mm256_cvtps_pd(_mm256_castps256_ps128(f));
    hi = _mm256_cvtps_pd(_mm256_extractf128_ps(f, 1));
  } else if constexpr (S == WgSource::F32) {
    const __m256 f = _mm256_loadu_ps(reinterpret_cast<const float*>(p));
    lo = _mm256_cvtps_pd(_mm256_castps256_ps128(f));
    hi = _mm256_cvtps_pd(_mm256_extractf128_ps(f, 1));
  } else {
    lo = _mm256_loadu_pd(reinterpret_cast<const double*>(p));
    hi = _mm256_loadu_pd(reinterpret_cast<const double*>(p) + 4);
  }
  last = load<S>(p + 8 * tap_bytes<S>());
}

// 4x4 transpose of doubles: rows r[l] (one channel each) -> columns c[j] (one tap, four channels).
__attribute__((target("avx2"))) inline void transpose4(const __m256d r[4], __m256d* c) {
  const __m256d t0 = _mm256_unpacklo_pd(r[0], r[1]), t1 = _mm256_unpackhi_pd(r[0], r[1]);
  const __m256d t2 = _mm256_unpacklo_pd(r[2], r[3]), t3 = _mm256_unpackhi_pd(r[2], r[3]);
  c[0] = _mm256_permute2f128_pd(t0, t2, 0x20);
  c[1] = _mm256_permute2f128_pd(t1, t3, 0x20);
  c[2] = _mm256_permute2f128_pd(t0, t2, 0x31);
  c[3] = _mm256_permute2f128_pd(t1, t3, 0x31);
}

// One cube of four consecutive channels (lane l at base + l * cstride, taps back to back), kept
// in registers: the taps are loaded whole and transposed into lanes (the scalar path assembles
// them element by element in memory, and reading them as vectors right after scalar writes
// stalled on store forwarding). fp16 targets are rounded from the registers as fp16_cube_f16c
// does; integer targets go through round_cube from whole-vector stores.
template <WgSource S, WgTarget T, IntRounding M>
__attribute__((target("avx2,f16c"))) void cube_avx2(const char* base, int64_t cstride, char* out, bool saturate,
                                                     double scale) {
  __m256d lo[4], hi[4], taps[8];
  double last[4];
  for (int l = 0; l < 4; ++l) load_taps<S>(base + l * cstride, lo[l], hi[l], last[l]);
  transpose4(lo, taps);
  transpose4(hi, taps + 4);
  Lanes4 g[9], t[16];
  for (int j = 0; j < 8; ++j) g[j] = taps[j];
  g[8] = Lanes4{last[0], last[1], last[2], last[3]};
  transform4(g, t);
  if constexpr (T == WgTarget::F16) {
    for (int i = 0; i < 16; i += 2) store8_fp16(t[i], t[i + 1], out + 8 * i, saturate);
  } else {
    alignas(32) double tv[64];
    std::memcpy(tv, t, sizeof tv);
    store_int_cube<T, M>(tv, scale, out);
  }
}
#endif

// Where the four lanes of a 4-channel block read from: source channel and stride phase.
// Computed once per block (integer division is slow), shared by every kernel.
struct Lanes {
  int64_t c[4], py[4], px[4];
  bool plain;  // stride 1 and four real channels: 3x3 taps, no bounds checks
};

Lanes lanes_of(const WinogradSpec& sp, int64_t c0) {
  Lanes L{};
  for (int l = 0; l < 4; ++l) {
    const int64_t ce = c0 + l, phase = ce / sp.c_pad;
    L.c[l] = ce % sp.c_pad;
    L.py[l] = phase / sp.sx;
    L.px[l] = phase % sp.sx;
  }
  L.plain = sp.sy == 1 && sp.sx == 1 && c0 + 3 < sp.c;
  return L;
}

// One 4x4x4 cube (4 channels of kernel k), lanes c fastest, then s, then r.
template <WgSource S, WgTarget T, IntRounding M>
void cube(const char* src, const WinogradSpec& sp, int64_t k, const Lanes& L, char* dst) {
#ifdef NPUPACK_WG_F16C
  constexpr int64_t eb = tap_bytes<S>();
  if (L.plain && sp.stride[3] == eb && sp.stride[2] == 3 * eb &&
      (T != WgTarget::F16 || sp.fp16_rounding == Fp16Rounding::NearestEven) && has_f16c()) {
    cube_avx2<S, T, M>(src + k * sp.stride[0] + L.c[0] * sp.stride[1], sp.stride[1], dst, sp.saturate, sp.scale);
    return;
  }
#endif
  Lanes4 g[9] = {};
  for (int l = 0; l < 4; ++l) {
    const char* base = src + k * sp.stride[0] + L.c[l] * sp.stride[1];
    if (L.plain) {
      for (int r = 0; r < 3; ++r) {
        for (int s = 0; s < 3; ++s) g[3 * r + s][l] = load<S>(base + r * sp.stride[2] + s * sp.stride[3]);
      }
      continue;
    }
    if (L.c[l] >= sp.c) continue;
    for (int r = 0; r < 3; ++r) {
      const int64_t rr = r * sp.sy + L.py[l];
      if (rr >= sp.r) break;
      for (int s = 0; s < 3; ++s) {
        const int64_t ss = s * sp.sx + L.px[l];
        if (ss >= sp.s) break;
        g[3 * r + s][l] = load<S>(base + rr * sp.stride[2] + ss * sp.stride[3]);
      }
    }
  }
  Lanes4 t[16];
  transform4(g, t);
  alignas(32) double tv[64];  // element order i*4 + lane = the cube's memory order
  std::memcpy(tv, t, sizeof tv);
  if constexpr (T == WgTarget::F16) {
    uint16_t vals[64];
#ifdef NPUPACK_WG_F16C
    if (sp.fp16_rounding == Fp16Rounding::NearestEven && has_f16c()) {
      fp16_cube_f16c(tv, vals, sp.saturate);
      std::memcpy(dst, vals, sizeof vals);
      return;
    }
#endif
    for (int i = 0; i < 64; ++i) vals[i] = fp16_from_double(tv[i], sp.fp16_rounding, sp.saturate);
    std::memcpy(dst, vals, sizeof vals);  // little-endian host: elements are stored LE
  } else {
    store_int_cube<T, M>(tv, sp.scale, dst);
  }
}

template <WgSource S, WgTarget T, IntRounding M>
void pack_all(const char* src, const WinogradSpec& sp, char* dst) {
  const int64_t es = target_bytes(T);
  const int64_t c_ext = sp.c_pad * sp.sy * sp.sx;
  const int64_t cube_bytes = 64 * es;
  const int64_t blocks = c_ext / 4;
  const int64_t groups = ceil_div(sp.k, sp.kpg);
  // Work units: (kernel group, 4-channel block), each writing its own kn cubes. The transform
  // is compute bound, so units are split across threads for layers of about 1 MiB or more.
  const int64_t units = groups * blocks;
  const int64_t unit_bytes = sp.kpg * cube_bytes;
  const int64_t grain = std::max<int64_t>(1, (kParallelBytes / 4) / unit_bytes);
  const int64_t total = units * unit_bytes;
  auto work = [&](int64_t u0, int64_t u1) {
    for (int64_t u = u0; u < u1; ++u) {
      const int64_t k0 = (u / blocks) * sp.kpg, cb = u % blocks;
      const int64_t kn = sp.k - k0 < sp.kpg ? sp.k - k0 : sp.kpg;
      const int64_t c0 = 4 * cb;
      char* row = dst + k0 * c_ext * 16 * es + cb * kn * cube_bytes;
      // Cubes whose four lanes all lie in channel padding are zero; with stride 1 that is every
      // cube past C, so those are filled without evaluating the transform.
      if ((c0 % sp.c_pad) >= sp.c) {
        std::memset(row, 0, static_cast<size_t>(kn * cube_bytes));
        continue;
      }
      const Lanes lanes = lanes_of(sp, c0);
      for (int64_t k = k0; k < k0 + kn; ++k) cube<S, T, M>(src, sp, k, lanes, row + (k - k0) * cube_bytes);
    }
  };
  if (total < kParallelBytes) work(0, units);
  else parallel_for(units, grain, work);
}

template <WgSource S, WgTarget T>
void dispatch_rounding(const char* src, const WinogradSpec& sp, char* dst) {
  switch (sp.int_rounding) {
    case IntRounding::NearestEven: pack_all<S, T, IntRounding::NearestEven>(src, sp, dst); break;
    case IntRounding::NearestAway: pack_all<S, T, IntRounding::NearestAway>(src, sp, dst); break;
    default: pack_all<S, T, IntRounding::Truncate>(src, sp, dst); break;
  }
}

template <WgSource S>
void dispatch_target(const char* src, const WinogradSpec& sp, char* dst) {
  switch (sp.target) {
    case WgTarget::I8: dispatch_rounding<S, WgTarget::I8>(src, sp, dst); break;
    case WgTarget::I16: dispatch_rounding<S, WgTarget::I16>(src, sp, dst); break;
    default: pack_all<S, WgTarget::F16, IntRounding::NearestEven>(src, sp, dst); break;
  }
}

}  // namespace

int64_t winograd_bytes(const WinogradSpec& sp) {
  if (sp.k < 1 || sp.c < 1 || sp.r < 1 || sp.s < 1 || sp.sy < 1 || sp.sx < 1 || sp.kpg < 1) {
    throw LayoutError("winograd: dimensions, strides and kernels per group must be >= 1");
  }
  if (ceil_div(sp.r, sp.sy) != 3 || ceil_div(sp.s, sp.sx) != 3) {
    throw LayoutError("winograd: the kernel does not become 3x3 after channel extension");
  }
  if (sp.c_pad < sp.c || sp.c_pad % 4) throw LayoutError("winograd: c_pad must be >= C and a multiple of 4");
  const int64_t c_ext = checked_mul(checked_mul(sp.c_pad, sp.sy, "winograd"), sp.sx, "winograd");
  return checked_mul(checked_mul(checked_mul(sp.k, c_ext, "winograd"), 16, "winograd"), target_bytes(sp.target),
                     "winograd");
}

void winograd_pack(const char* src, WgSource type, const WinogradSpec& sp, char* dst, int64_t dst_size) {
  const int64_t need = winograd_bytes(sp);
  if (dst_size < need) {
    throw LayoutError("winograd: the output holds " + std::to_string(dst_size) + " bytes, " + std::to_string(need) +
                      " are needed");
  }
  switch (type) {
    case WgSource::I8: dispatch_target<WgSource::I8>(src, sp, dst); break;
    case WgSource::U8: dispatch_target<WgSource::U8>(src, sp, dst); break;
    case WgSource::I16: dispatch_target<WgSource::I16>(src, sp, dst); break;
    case WgSource::U16: dispatch_target<WgSource::U16>(src, sp, dst); break;
    case WgSource::F16: dispatch_target<WgSource::F16>(src, sp, dst); break;
    case WgSource::F32: dispatch_target<WgSource::F32>(src, sp, dst); break;
    default: dispatch_target<WgSource::F64>(src, sp, dst); break;
  }
}

}  // namespace npupack
