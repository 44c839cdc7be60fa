// Element conversion: IEEE binary16 rounding with NVDLA's options, and NVIDIA's weight quantiser.
// Spec: docs/nvdla.md §2.2 (to_fp16) and 2.3 (quantize_weights).
#pragma once
#include <cstdint>
#include <cstring>

#include "npupack/cpu.hpp"

namespace npupack {

enum class Fp16Rounding { NearestEven, NearestAway };

uint16_t fp16_from_float(float x, Fp16Rounding rounding, bool saturate);

namespace detail {

inline constexpr uint16_t kMaxHalf = 0x7BFF;  // 65504
inline constexpr uint16_t kInfHalf = 0x7C00;

// Rounds a finite, non-zero binary value with unbiased exponent E and significand `sig`
// (implicit bit included, `mant_bits` fraction bits) to binary16, per docs/nvdla.md §2.2.2.
inline uint16_t round_to_half(uint16_t sign, int E, uint64_t sig, int mant_bits, Fp16Rounding rounding,
                              bool saturate) {
  const uint16_t overflow = sign | (saturate ? kMaxHalf : kInfHalf);
  if (E < -25) return sign;
  if (E >= 16) return overflow;
  const int shift = (mant_bits - 10) + (E < -14 ? -14 - E : 0);
  uint64_t n = sig >> shift;
  const uint64_t rem = sig & ((uint64_t{1} << shift) - 1);
  const uint64_t half = uint64_t{1} << (shift - 1);
  // Branch-free: the round-up decision is data dependent and would mispredict half the time.
  const bool away = rounding == Fp16Rounding::NearestAway;
  n += static_cast<uint64_t>((rem > half) | ((rem == half) & (away | static_cast<bool>(n & 1))));
  const uint64_t h = E >= -14 ? (static_cast<uint64_t>(E + 14) << 10) + n : n;
  if (h >= kInfHalf) return overflow;
  return static_cast<uint16_t>(sign | h);
}

}  // namespace detail

// Inline: the Winograd kernel converts every transformed value with it.
inline uint16_t fp16_from_double(double x, Fp16Rounding rounding, bool saturate) {
  uint64_t b;
  std::memcpy(&b, &x, sizeof b);
  const uint16_t sign = static_cast<uint16_t>((b >> 48) & 0x8000);
  const uint64_t e11 = (b >> 52) & 0x7FF;
  const uint64_t m = b & ((uint64_t{1} << 52) - 1);
  if (e11 == 0x7FF) {
    if (m != 0) return static_cast<uint16_t>(sign | 0x7E00 | (m >> 42));
    return sign | (saturate ? detail::kMaxHalf : detail::kInfHalf);
  }
  if (e11 == 0) return sign;
  return detail::round_to_half(sign, static_cast<int>(e11) - 1023, m | (uint64_t{1} << 52), 52, rounding, saturate);
}

void to_fp16(const float* in, uint16_t* out, int64_t n, Fp16Rounding rounding, bool saturate);
void to_fp16(const double* in, uint16_t* out, int64_t n, Fp16Rounding rounding, bool saturate);

// Scans of binary16 bit patterns (NumPy's float16 isinf/isnan are emulated and slow); `path`
// forces an instruction set (tests), kSsse3 standing for SSE2.
bool fp16_any_inf(const uint16_t* bits, int64_t n, KernelPath path = KernelPath::kAuto);
int64_t fp16_first_nan(const uint16_t* bits, int64_t n, KernelPath path = KernelPath::kAuto);  // -1: none
// First INF or NaN (exponent all ones), -1 when every value is finite: one pass for the common
// clean tensor before the separate NaN / INF rules apply.
int64_t fp16_first_nonfinite(const uint16_t* bits, int64_t n, KernelPath path = KernelPath::kAuto);

// Quantise `blocks` contiguous blocks of `block_len` float32 values each (one block per output
// kernel, or one block for the whole tensor) with nvdla/sw's float32 formula; writes q (int8 or
// int16 by `qmax`) and one scale per block. Inputs must be finite (checked by the caller).
void quantize_int8(const float* w, int64_t blocks, int64_t block_len, int8_t* q, float* scales);
void quantize_int16(const float* w, int64_t blocks, int64_t block_len, int16_t* q, float* scales);

}  // namespace npupack
