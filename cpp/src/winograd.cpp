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
#include "npupack/stream.hpp"
#include "plan.hpp"
#include "winograd_int.hpp"
#include "winograd_int_avx512.hpp"
#include "winograd_avx512.hpp"
#include "winograd_cube_avx2.hpp"
#include "winograd_f16_avx2.hpp"
#include "winograd_round.hpp"
#include "winograd_transform.hpp"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace npupack {

namespace {

using wg::load;
using wg::round_cube;
using wg::store_int_cube;
using wg::Lanes4;
using wg::transform;

#ifdef NPUPACK_WG_F16C
using wg::cube_avx2;
using wg::fp16_cube_f16c;
using wg::tap_bytes;

bool has_f16c(const WinogradSpec& sp) { return allows(sp.path, KernelPath::kAvx2) && cpu().avx2 && cpu().f16c; }
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

// One 4x4x4 cube (4 channels of kernel k) at dst, in its memory order: c fastest, then s, then r.
template <WgSource S, WgTarget T, IntRounding M>
void cube(const char* src, const WinogradSpec& sp, int64_t k, const Lanes& L, char* dst) {
#ifdef NPUPACK_WG_F16C
  constexpr int64_t eb = tap_bytes<S>();
  if (L.plain && sp.stride[3] == eb && sp.stride[2] == 3 * eb &&
      (T != WgTarget::F16 || sp.fp16_rounding == Fp16Rounding::NearestEven) && has_f16c(sp)) {
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
  transform(g, t);
  alignas(32) double tv[64];  // element order i*4 + lane = the cube's memory order
  std::memcpy(tv, t, sizeof tv);
  if constexpr (T == WgTarget::F16) {
    uint16_t vals[64];
#ifdef NPUPACK_WG_F16C
    if (sp.fp16_rounding == Fp16Rounding::NearestEven && has_f16c(sp)) {
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

#ifdef NPUPACK_WG_INT_AVX2
// The kn cubes of one row (channels c .. c + 3 of kernels k0 ..), four kernels at a time where
// `quads`, then two.
template <WgSource S, WgTarget T, IntRounding M>
void int_row(const char* src, const WinogradSpec& sp, int64_t k0, int64_t kn, int64_t c, bool quads, bool stream,
             char* row) {
  constexpr int64_t cube_bytes = 64 * (T == WgTarget::I8 ? 1 : 2);
  const char* base = src + k0 * sp.stride[0] + c * sp.stride[1];
  int64_t k = 0;
  // A row reads a few taps from each of kn kernels, far apart: more streams than the hardware
  // prefetcher follows, so each kernel's taps four rows ahead are asked for here.
  (void)quads, (void)stream;  // read only by the int8 instantiations with AVX-512
#ifdef NPUPACK_WG_INT_AVX512
  if constexpr (S == WgSource::I8 && T == WgTarget::I8) {
    for (; quads && k + 3 < kn; k += 4) {
      const char* const p[4] = {base + k * sp.stride[0], base + (k + 1) * sp.stride[0], base + (k + 2) * sp.stride[0],
                                base + (k + 3) * sp.stride[0]};
      for (const char* at : p) _mm_prefetch(at + 16 * sp.stride[1], _MM_HINT_T0);
      wg::int8_cube_quad<M>(p, row + k * cube_bytes, stream);
    }
  }
#endif
  for (; k + 1 < kn; k += 2) {
    _mm_prefetch(base + k * sp.stride[0] + 16 * sp.stride[1], _MM_HINT_T0);
    _mm_prefetch(base + (k + 1) * sp.stride[0] + 16 * sp.stride[1], _MM_HINT_T0);
    wg::int_cube_pair<S, T, M>(base + k * sp.stride[0], base + (k + 1) * sp.stride[0], sp.stride[1],
                               row + k * cube_bytes, row + (k + 1) * cube_bytes);
  }
  if (k < kn) {  // an odd kernel: its lanes computed twice, the second copy dropped
    alignas(16) char spare[cube_bytes];
    const char* p = base + k * sp.stride[0];
    wg::int_cube_pair<S, T, M>(p, p, sp.stride[1], row + k * cube_bytes, spare);
  }
}
#endif

// Whether the float16 row kernels apply to every cube row of four real channels: float16 to
// float16 rounded to nearest even, 3x3 taps and channels back to back.
template <WgSource S, WgTarget T>
bool f16_rows_plain(const WinogradSpec& sp) {
  return S == WgSource::F16 && T == WgTarget::F16 && sp.fp16_rounding == Fp16Rounding::NearestEven &&
         sp.stride[3] == 2 && sp.stride[2] == 6 && sp.stride[1] == 18;
}

#ifdef NPUPACK_WG_F16C
// A pair kernel: the cubes of channels c .. c + 3 of two kernels (36 halves back to back at a and
// at b) to out_a and out_b, or false when it declines the pair (nothing written).
using F16Pair = bool (*)(const char* a, const char* b, char* out_a, char* out_b, bool saturate);

// The kn cubes of one row (channels c .. c + 3 of kernels k0 ..), two kernels at a time by Pair;
// a pair it declines, and an odd last kernel, by the four-lane float64 cube.
template <F16Pair Pair>
void f16_row(const char* src, const WinogradSpec& sp, int64_t k0, int64_t kn, const Lanes& lanes, char* row) {
  constexpr int64_t cube_bytes = 128;
  const char* base = src + k0 * sp.stride[0] + lanes.c[0] * sp.stride[1];
  int64_t k = 0;
  for (; k + 1 < kn; k += 2) {  // prefetched as int_row does
    const char *a = base + k * sp.stride[0], *b = a + sp.stride[0];
    _mm_prefetch(a + 16 * sp.stride[1], _MM_HINT_T0);
    _mm_prefetch(b + 16 * sp.stride[1], _MM_HINT_T0);
    if (Pair(a, b, row + k * cube_bytes, row + (k + 1) * cube_bytes, sp.saturate)) continue;
    cube<WgSource::F16, WgTarget::F16, IntRounding::NearestEven>(src, sp, k0 + k, lanes, row + k * cube_bytes);
    cube<WgSource::F16, WgTarget::F16, IntRounding::NearestEven>(src, sp, k0 + k + 1, lanes,
                                                                 row + (k + 1) * cube_bytes);
  }
  if (k < kn) {
    cube<WgSource::F16, WgTarget::F16, IntRounding::NearestEven>(src, sp, k0 + k, lanes, row + k * cube_bytes);
  }
}
#endif

#ifdef NPUPACK_WG_AVX512
// Whether f16_row with the AVX-512 pair kernel applies to every cube row of four real channels
// (f16_rows_plain, and AVX-512 BW).
template <WgSource S, WgTarget T>
bool f16_rows(const WinogradSpec& sp) {
  return f16_rows_plain<S, T>(sp) && cpu().avx512bw && cpu().avx2 && cpu().f16c &&
         allows(sp.path, KernelPath::kAvx512);
}
#endif

// Writes every cube straight to its place in the surface. The descriptor (docs/nvdla.md §9.6)
// places each kernel group; inside it the cube rows of the 4-channel blocks follow each other,
// and inside a row the kn cubes of the group, as check_winograd verifies against the descriptor. Work units are
// rows: the transform is compute bound, so they are split across threads for layers of about
// kParallelBytes or more.
template <WgSource S, WgTarget T, IntRounding M>
void pack_all(const char* src, const WinogradSpec& sp, const BlockedLayout& full, char* dst) {
  constexpr int64_t cube_bytes = 64 * (T == WgTarget::I8 ? 1 : 2);
  const int64_t blocks = sp.c_pad * sp.sy * sp.sx / 4, units = ceil_div(sp.k, sp.kpg) * blocks;
  const int64_t total = full.nbytes();
#ifdef NPUPACK_WG_INT_AVX2
  bool exact_int = false, quads = false, stream = false;
  if constexpr (S == WgSource::I8 || S == WgSource::I16) exact_int = wg::int_rows<S, T>(sp);
#ifdef NPUPACK_WG_INT_AVX512
  quads = exact_int && wg::int8_quads<S, T>(sp);
  // From the engine's threshold for whole-line streaming (docs/design.md §3.8).
  stream = quads && total >= detail::kStreamLinesBytes && reinterpret_cast<uintptr_t>(dst) % 64 == 0;
#endif
#endif
#ifdef NPUPACK_WG_AVX512
  const bool f16_pairs = f16_rows<S, T>(sp);
#endif
#if defined(NPUPACK_WG_F16_AVX2) && defined(NPUPACK_WG_F16C)
  const bool f16_pairs_f32 = f16_rows_plain<S, T>(sp) && has_f16c(sp);
#endif
  auto work = [&](int64_t u0, int64_t u1) {
    int64_t group = -1, group_at = 0;
    for (int64_t u = u0; u < u1; ++u) {
      const int64_t k0 = (u / blocks) * sp.kpg, c0 = 4 * (u % blocks);
      const int64_t kn = std::min(sp.kpg, sp.k - k0);
      if (k0 != group) {
        const int64_t idx[4] = {k0, 0, 0, 0};
        group = k0, group_at = full.offset_of(idx);
      }
      const int64_t at = group_at + c0 / 4 * kn * cube_bytes;
      if (at < 0 || kn * cube_bytes > total - at) throw LayoutError("winograd: a cube row runs past the surface");
      char* row = dst + at;
      // Cubes whose four lanes all lie in channel padding are zero; with stride 1 that is every
      // cube past C, so those are filled without evaluating the transform.
      if ((c0 % sp.c_pad) >= sp.c) {
        std::memset(row, 0, static_cast<size_t>(kn * cube_bytes));
        continue;
      }
      const Lanes lanes = lanes_of(sp, c0);
#ifdef NPUPACK_WG_INT_AVX2
      if constexpr ((S == WgSource::I8 || S == WgSource::I16) && T != WgTarget::F16) {
        if (exact_int && lanes.plain) {
          // A streamed store needs its line: checked per row, whatever descriptor placed it.
          int_row<S, T, M>(src, sp, k0, kn, lanes.c[0], quads, stream && reinterpret_cast<uintptr_t>(row) % 64 == 0,
                           row);
          continue;
        }
      }
#endif
#ifdef NPUPACK_WG_AVX512
      if (f16_pairs && lanes.plain) {
        f16_row<wg::f16_cube_pair>(src, sp, k0, kn, lanes, row);
        continue;
      }
#endif
#if defined(NPUPACK_WG_F16_AVX2) && defined(NPUPACK_WG_F16C)
      if (f16_pairs_f32 && lanes.plain) {
        f16_row<wg::f16_cube_pair_f32>(src, sp, k0, kn, lanes, row);
        continue;
      }
#endif
      for (int64_t k = 0; k < kn; ++k) cube<S, T, M>(src, sp, k0 + k, lanes, row + k * cube_bytes);
    }
#ifdef NPUPACK_WG_INT_AVX2
    if (stream) stream_fence();  // each thread orders its own streamed lines before the join
#endif
  };
  const int64_t grain = std::max<int64_t>(1, (kParallelBytes / 4) / (sp.kpg * cube_bytes));
  if (total < kParallelBytes) work(0, units);
  else parallel_for(units, grain, work);
}

using Fill = void (*)(const char*, const WinogradSpec&, const BlockedLayout&, char*);

template <WgSource S, WgTarget T>
Fill by_rounding(const WinogradSpec& sp) {
  switch (sp.int_rounding) {
    case IntRounding::NearestEven: return pack_all<S, T, IntRounding::NearestEven>;
    case IntRounding::NearestAway: return pack_all<S, T, IntRounding::NearestAway>;
    default: return pack_all<S, T, IntRounding::Truncate>;
  }
}

template <WgSource S>
Fill by_target(const WinogradSpec& sp) {
  switch (sp.target) {
    case WgTarget::I8: return by_rounding<S, WgTarget::I8>(sp);
    case WgTarget::I16: return by_rounding<S, WgTarget::I16>(sp);
    default: return pack_all<S, WgTarget::F16, IntRounding::NearestEven>;
  }
}

Fill fill_of(WgSource type, const WinogradSpec& sp) {
  switch (type) {
    case WgSource::I8: return by_target<WgSource::I8>(sp);
    case WgSource::U8: return by_target<WgSource::U8>(sp);
    case WgSource::I16: return by_target<WgSource::I16>(sp);
    case WgSource::U16: return by_target<WgSource::U16>(sp);
    case WgSource::F16: return by_target<WgSource::F16>(sp);
    case WgSource::F32: return by_target<WgSource::F32>(sp);
    default: return by_target<WgSource::F64>(sp);
  }
}

}  // namespace

void winograd_pack(const char* src, WgSource type, const WinogradSpec& sp, const BlockedLayout& full, char* dst,
                   int64_t dst_size) {
  check_winograd(sp, full, dst_size);
  // kpg above K maps as K (one group): clamped, so that no size or grain is computed from it.
  WinogradSpec spec = sp;
  spec.kpg = std::min(sp.kpg, sp.k);
  fill_of(type, spec)(src, spec, full, dst);
}

}  // namespace npupack
