#include "npupack/convert.hpp"

#include <cmath>
#include <cstring>

#include "../kernels/fp16_test.hpp"
#include "../kernels/kernel.hpp"

namespace npupack {

uint16_t fp16_from_float(float x, Fp16Rounding rounding, bool saturate) {
  uint32_t b;
  std::memcpy(&b, &x, sizeof b);
  const uint16_t sign = static_cast<uint16_t>((b >> 16) & 0x8000);
  const uint32_t e8 = (b >> 23) & 0xFF;
  const uint32_t m = b & 0x7FFFFF;
  if (e8 == 0xFF) {
    if (m != 0) return static_cast<uint16_t>(sign | 0x7E00 | (m >> 13));  // quiet NaN, payload kept
    return sign | (saturate ? detail::kMaxHalf : detail::kInfHalf);
  }
  if (e8 == 0) return sign;  // zero or float32 subnormal: far below half's smallest subnormal
  return detail::round_to_half(sign, static_cast<int>(e8) - 127, m | 0x800000u, 23, rounding, saturate);
}

void to_fp16(const float* in, uint16_t* out, int64_t n, Fp16Rounding rounding, bool saturate) {
  for (int64_t i = 0; i < n; ++i) out[i] = fp16_from_float(in[i], rounding, saturate);
}

void to_fp16(const double* in, uint16_t* out, int64_t n, Fp16Rounding rounding, bool saturate) {
  for (int64_t i = 0; i < n; ++i) out[i] = fp16_from_double(in[i], rounding, saturate);
}

namespace {

using detail::Fp16Test;

// Index of the first element that passes t, or -1. Chunks are tested by the list's fp16-scan
// kernel (docs/design.md §4.9) in whole steps and only a chunk with a hit is searched element by
// element: the common clean tensor costs one streaming pass.
int64_t first_match(const uint16_t* bits, int64_t n, const Fp16Test& t, KernelPath path) {
  constexpr int64_t kChunk = 2048;
  const kernels::Fp16ScanKernelInfo& k = kernels::select_fp16_scan(path);
  const int64_t block = k.tile;  // 0: the scalar kernel, no bulk part
  kernels::Fp16ScanArgs a;
  a.mask = t.mask;
  a.value = t.value;
  a.greater = t.greater;
  for (int64_t i = 0; i < n; i += kChunk) {
    const int64_t end = i + kChunk < n ? i + kChunk : n;
    int64_t j = i;
    bool hit = false;
    if (block > 0) {
      a.bits = bits + i;
      a.n = (end - i) / block * block;
      if (a.n > 0) hit = k.run(a);
      j += a.n;
    }
    for (; j < end; ++j) hit = hit || t(bits[j]);
    if (hit) {
      for (j = i; j < end; ++j) {
        if (t(bits[j])) return j;
      }
    }
  }
  return -1;
}

}  // namespace

bool fp16_any_inf(const uint16_t* bits, int64_t n, KernelPath path) {
  return first_match(bits, n, detail::kFp16Inf, path) >= 0;
}

int64_t fp16_first_nan(const uint16_t* bits, int64_t n, KernelPath path) {
  return first_match(bits, n, detail::kFp16Nan, path);
}

int64_t fp16_first_nonfinite(const uint16_t* bits, int64_t n, KernelPath path) {
  return first_match(bits, n, detail::kFp16NonFinite, path);
}

namespace {

// nvdla/sw's quantiser, every step a separately rounded float32 operation (built with
// -ffp-contract=off): scale = m/qmax, inv = 1/scale, q = clamp(floor(w*inv + 0.5)).
template <class Q>
void quantize_blocks(const float* w, int64_t blocks, int64_t len, Q* q, float* scales, float qmax, float qmin) {
  for (int64_t b = 0; b < blocks; ++b) {
    const float* wb = w + b * len;
    Q* qb = q + b * len;
    float m = 0.0f;
    for (int64_t i = 0; i < len; ++i) m = std::fmax(m, std::fabs(wb[i]));
    if (m == 0.0f) {
      scales[b] = 0.0f;
      for (int64_t i = 0; i < len; ++i) qb[i] = 0;
      continue;
    }
    const float scale = m / qmax;
    const float inv = 1.0f / scale;
    scales[b] = scale;
    for (int64_t i = 0; i < len; ++i) {
      const float p = wb[i] * inv;
      const float h = p + 0.5f;
      float f = std::floor(h);
      f = f > qmax ? qmax : (f < qmin ? qmin : f);
      qb[i] = static_cast<Q>(f);
    }
  }
}

}  // namespace

void quantize_int8(const float* w, int64_t blocks, int64_t block_len, int8_t* q, float* scales) {
  quantize_blocks<int8_t>(w, blocks, block_len, q, scales, 127.0f, -128.0f);
}

void quantize_int16(const float* w, int64_t blocks, int64_t block_len, int16_t* q, float* scales) {
  quantize_blocks<int16_t>(w, blocks, block_len, q, scales, 32767.0f, -32768.0f);
}

}  // namespace npupack
