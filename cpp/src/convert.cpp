#include "npupack/convert.hpp"

#include <cmath>
#include <cstring>

#if defined(__x86_64__) || defined(__i386__)
#include <emmintrin.h>
#define NPUPACK_SSE2_SCAN 1
#endif

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

// Index of the first element whose bits satisfy the predicate, or -1. Chunks are tested with
// SSE2 (8 halves per compare, the lane masks OR-ed together) and only a chunk with a hit is
// searched element by element: the common clean tensor costs one streaming pass.
template <class Scalar, class Lanes>
int64_t first_match(const uint16_t* bits, int64_t n, Scalar scalar, Lanes lanes) {
  constexpr int64_t kChunk = 2048;
  for (int64_t i = 0; i < n; i += kChunk) {
    const int64_t end = i + kChunk < n ? i + kChunk : n;
    int64_t j = i;
    bool hit = false;
#if defined(NPUPACK_SSE2_SCAN)
    __m128i acc = _mm_setzero_si128();
    for (; j + 32 <= end; j += 32) {
      const auto* p = reinterpret_cast<const __m128i*>(bits + j);
      const __m128i m0 = _mm_or_si128(lanes(_mm_loadu_si128(p)), lanes(_mm_loadu_si128(p + 1)));
      const __m128i m1 = _mm_or_si128(lanes(_mm_loadu_si128(p + 2)), lanes(_mm_loadu_si128(p + 3)));
      acc = _mm_or_si128(acc, _mm_or_si128(m0, m1));
    }
    hit = _mm_movemask_epi8(acc) != 0;
#else
    (void)lanes;
#endif
    for (; j < end; ++j) hit = hit || scalar(bits[j]);
    if (hit) {
      for (j = i; j < end; ++j) {
        if (scalar(bits[j])) return j;
      }
    }
  }
  return -1;
}

#if defined(NPUPACK_SSE2_SCAN)
inline __m128i masked_eq(__m128i v, int16_t mask, int16_t value) {
  return _mm_cmpeq_epi16(_mm_and_si128(v, _mm_set1_epi16(mask)), _mm_set1_epi16(value));
}
#endif

}  // namespace

bool fp16_any_inf(const uint16_t* bits, int64_t n) {
  return first_match(
             bits, n, [](uint16_t b) { return (b & 0x7FFFu) == 0x7C00u; },
             [](auto v) { return masked_eq(v, 0x7FFF, 0x7C00); }) >= 0;
}

int64_t fp16_first_nan(const uint16_t* bits, int64_t n) {
  // |b| > 0x7C00 as a signed 16-bit compare: |b| <= 0x7FFF is non-negative.
  return first_match(
      bits, n, [](uint16_t b) { return (b & 0x7FFFu) > 0x7C00u; },
      [](auto v) { return _mm_cmpgt_epi16(_mm_and_si128(v, _mm_set1_epi16(0x7FFF)), _mm_set1_epi16(0x7C00)); });
}

int64_t fp16_first_nonfinite(const uint16_t* bits, int64_t n) {
  return first_match(
      bits, n, [](uint16_t b) { return (b & 0x7C00u) == 0x7C00u; },
      [](auto v) { return masked_eq(v, 0x7C00, 0x7C00); });
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
