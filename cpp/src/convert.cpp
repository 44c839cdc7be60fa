#include "npupack/convert.hpp"

#include "fp16_test.hpp"

#include <cmath>
#include <cstring>

#if (defined(__x86_64__) || defined(__i386__)) && defined(__SSE2__)
#include <immintrin.h>
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

using detail::Fp16Test;

#if defined(NPUPACK_SSE2_SCAN)
using detail::fp16_lanes_sse2;

// Whether any of the n (a multiple of 32) halves at p passes t: 8 halves per compare, the lane
// masks OR-ed together.
bool any_sse2(const uint16_t* bits, int64_t n, const Fp16Test& t) {
  __m128i acc = _mm_setzero_si128();
  for (int64_t j = 0; j < n; j += 32) {
    const auto* p = reinterpret_cast<const __m128i*>(bits + j);
    const __m128i m0 = _mm_or_si128(fp16_lanes_sse2(_mm_loadu_si128(p), t),
                                    fp16_lanes_sse2(_mm_loadu_si128(p + 1), t));
    const __m128i m1 = _mm_or_si128(fp16_lanes_sse2(_mm_loadu_si128(p + 2), t),
                                    fp16_lanes_sse2(_mm_loadu_si128(p + 3), t));
    acc = _mm_or_si128(acc, _mm_or_si128(m0, m1));
  }
  return _mm_movemask_epi8(acc) != 0;
}

#pragma GCC push_options
#pragma GCC target("avx2")
inline __m256i lanes_avx2(const __m256i* p, __m256i mask, __m256i value, bool greater) {
  const __m256i m = _mm256_and_si256(_mm256_loadu_si256(p), mask);
  return greater ? _mm256_cmpgt_epi16(m, value) : _mm256_cmpeq_epi16(m, value);
}

// The same, n a multiple of 64, 16 halves per compare (AVX2): fp16 weight packing checks each
// kernel group just before packing it, from L2, where the wider compares run faster than SSE2's.
bool any_avx2(const uint16_t* bits, int64_t n, const Fp16Test& t) {
  const __m256i mask = _mm256_set1_epi16(static_cast<int16_t>(t.mask));
  const __m256i value = _mm256_set1_epi16(static_cast<int16_t>(t.value));
  __m256i a0 = _mm256_setzero_si256(), a1 = a0;
  for (int64_t j = 0; j < n; j += 64) {
    const auto* p = reinterpret_cast<const __m256i*>(bits + j);
    a0 = _mm256_or_si256(a0, _mm256_or_si256(lanes_avx2(p, mask, value, t.greater),
                                             lanes_avx2(p + 1, mask, value, t.greater)));
    a1 = _mm256_or_si256(a1, _mm256_or_si256(lanes_avx2(p + 2, mask, value, t.greater),
                                             lanes_avx2(p + 3, mask, value, t.greater)));
  }
  return _mm256_movemask_epi8(_mm256_or_si256(a0, a1)) != 0;
}
#pragma GCC pop_options
#endif

// Index of the first element that passes t, or -1. Chunks are tested with SIMD and only a chunk
// with a hit is searched element by element: the common clean tensor costs one streaming pass.
int64_t first_match(const uint16_t* bits, int64_t n, const Fp16Test& t, KernelPath path) {
  constexpr int64_t kChunk = 2048;
#if defined(NPUPACK_SSE2_SCAN)
  const bool avx2 = cpu().avx2 && allows(path, KernelPath::kAvx2);
  const int64_t block = path == KernelPath::kScalar ? kChunk + 1 : avx2 ? 64 : 32;  // scalar: no bulk part
#else
  (void)path;
#endif
  for (int64_t i = 0; i < n; i += kChunk) {
    const int64_t end = i + kChunk < n ? i + kChunk : n;
    int64_t j = i;
    bool hit = false;
#if defined(NPUPACK_SSE2_SCAN)
    const int64_t bulk = (end - i) / block * block;
    if (bulk > 0) hit = avx2 ? any_avx2(bits + i, bulk, t) : any_sse2(bits + i, bulk, t);
    j += bulk;
#endif
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
