#include "npupack/winograd.hpp"

#include <cmath>
#include <cstring>
#include <string>

#include "npupack/checked.hpp"
#include "npupack/errors.hpp"

namespace npupack {

namespace {

int64_t target_bytes(WgTarget t) { return t == WgTarget::I8 ? 1 : 2; }

// Binary16 bits -> double, exactly (every half value is a double).
double half_to_double(uint16_t h) {
  const int e = (h >> 10) & 0x1F;
  const int m = h & 0x3FF;
  double v;
  if (e == 0) v = std::ldexp(static_cast<double>(m), -24);
  else if (e == 31) v = m ? std::nan("") : HUGE_VAL;
  else v = std::ldexp(static_cast<double>(m | 0x400), e - 25);
  return (h & 0x8000) ? -v : v;
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

// t = G g G^T with G = [[1,0,0],[.5,.5,.5],[.5,-.5,.5],[0,0,1]]. Scaling by 0.5 is exact, so
// this is the matrix product whatever the association; zero results are made +0 (`+ 0.0`)
// because the sign of a computed zero depends only on the evaluation order (nvdla.md 9.4).
inline void transform(const double g[9], double t[16]) {
  double a[12];  // a = G g, 4x3
  for (int j = 0; j < 3; ++j) {
    const double g0 = g[j], g1 = g[3 + j], g2 = g[6 + j];
    a[j] = g0;
    a[3 + j] = 0.5 * (g0 + g1 + g2);
    a[6 + j] = 0.5 * (g0 - g1 + g2);
    a[9 + j] = g2;
  }
  for (int i = 0; i < 4; ++i) {
    const double a0 = a[3 * i], a1 = a[3 * i + 1], a2 = a[3 * i + 2];
    t[4 * i] = a0 + 0.0;
    t[4 * i + 1] = 0.5 * (a0 + a1 + a2) + 0.0;
    t[4 * i + 2] = 0.5 * (a0 - a1 + a2) + 0.0;
    t[4 * i + 3] = a2 + 0.0;
  }
}

template <class Q>
inline Q round_int(double v, IntRounding mode, double lo, double hi) {
  double r;
  switch (mode) {
    case IntRounding::NearestEven: r = std::nearbyint(v); break;  // default FP mode: ties to even
    case IntRounding::NearestAway: r = std::round(v); break;
    default: r = std::trunc(v); break;
  }
  r = r < lo ? lo : (r > hi ? hi : r);
  return static_cast<Q>(r);
}

// One 4x4x4 cube (4 channels c0..c0+3 of kernel k), lanes c fastest, then s, then r.
template <WgSource S, WgTarget T>
void cube(const char* src, const WinogradSpec& sp, int64_t k, int64_t c0, char* dst) {
  using Out = std::conditional_t<T == WgTarget::I8, int8_t, uint16_t>;
  Out vals[64];
  for (int l = 0; l < 4; ++l) {
    const int64_t ce = c0 + l;
    const int64_t phase = ce / sp.c_pad, c = ce % sp.c_pad;
    const int64_t py = phase / sp.sx, px = phase % sp.sx;
    double g[9] = {0, 0, 0, 0, 0, 0, 0, 0, 0};
    if (c < sp.c) {
      const char* base = src + k * sp.stride[0] + c * sp.stride[1];
      for (int r = 0; r < 3; ++r) {
        const int64_t rr = r * sp.sy + py;
        if (rr >= sp.r) break;
        for (int s = 0; s < 3; ++s) {
          const int64_t ss = s * sp.sx + px;
          if (ss >= sp.s) break;
          g[3 * r + s] = load<S>(base + rr * sp.stride[2] + ss * sp.stride[3]);
        }
      }
    }
    double t[16];
    transform(g, t);
    for (int i = 0; i < 16; ++i) {
      if constexpr (T == WgTarget::F16) {
        vals[4 * i + l] = fp16_from_double(t[i], sp.fp16_rounding, sp.saturate);
      } else if constexpr (T == WgTarget::I8) {
        vals[4 * i + l] = round_int<int8_t>(t[i] * sp.scale, sp.int_rounding, -128.0, 127.0);
      } else {
        vals[4 * i + l] = static_cast<uint16_t>(round_int<int16_t>(t[i] * sp.scale, sp.int_rounding, -32768.0, 32767.0));
      }
    }
  }
  std::memcpy(dst, vals, sizeof vals);  // little-endian host: elements are stored LE
}

template <WgSource S, WgTarget T>
void pack_all(const char* src, const WinogradSpec& sp, char* dst) {
  const int64_t es = target_bytes(T);
  const int64_t c_ext = sp.c_pad * sp.sy * sp.sx;
  const int64_t cube_bytes = 64 * es;
  // Cubes whose four lanes all lie in channel padding are zero; with stride 1 that is every
  // cube past C, so those are filled without evaluating the transform.
  for (int64_t k0 = 0; k0 < sp.k; k0 += sp.kpg) {
    const int64_t kn = sp.k - k0 < sp.kpg ? sp.k - k0 : sp.kpg;
    char* group = dst + k0 * c_ext * 16 * es;
    for (int64_t cb = 0; cb < c_ext / 4; ++cb) {
      const int64_t c0 = 4 * cb;
      const bool padding = (c0 % sp.c_pad) >= sp.c;
      char* row = group + cb * kn * cube_bytes;
      if (padding) {
        std::memset(row, 0, static_cast<size_t>(kn * cube_bytes));
        continue;
      }
      for (int64_t k = k0; k < k0 + kn; ++k) cube<S, T>(src, sp, k, c0, row + (k - k0) * cube_bytes);
    }
  }
}

template <WgSource S>
void dispatch_target(const char* src, const WinogradSpec& sp, char* dst) {
  switch (sp.target) {
    case WgTarget::I8: pack_all<S, WgTarget::I8>(src, sp, dst); break;
    case WgTarget::I16: pack_all<S, WgTarget::I16>(src, sp, dst); break;
    default: pack_all<S, WgTarget::F16>(src, sp, dst); break;
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
