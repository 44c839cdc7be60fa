// Element conversion: IEEE binary16 rounding with NVDLA's options, and NVIDIA's weight quantiser.
// Spec: nvdla.md section 2.2 (to_fp16) and 2.3 (quantize_weights).
#pragma once
#include <cstdint>

namespace npupack {

enum class Fp16Rounding { NearestEven, NearestAway };

uint16_t fp16_from_float(float x, Fp16Rounding rounding, bool saturate);
uint16_t fp16_from_double(double x, Fp16Rounding rounding, bool saturate);

void to_fp16(const float* in, uint16_t* out, int64_t n, Fp16Rounding rounding, bool saturate);
void to_fp16(const double* in, uint16_t* out, int64_t n, Fp16Rounding rounding, bool saturate);

// Scans of binary16 bit patterns (NumPy's float16 isinf/isnan are emulated and slow).
bool fp16_any_inf(const uint16_t* bits, int64_t n);
int64_t fp16_first_nan(const uint16_t* bits, int64_t n);  // -1 when there is none

// Quantise `blocks` contiguous blocks of `block_len` float32 values each (one block per output
// kernel, or one block for the whole tensor) with nvdla/sw's float32 formula; writes q (int8 or
// int16 by `qmax`) and one scale per block. Inputs must be finite (checked by the caller).
void quantize_int8(const float* w, int64_t blocks, int64_t block_len, int8_t* q, float* scales);
void quantize_int16(const float* w, int64_t blocks, int64_t block_len, int16_t* q, float* scales);

}  // namespace npupack
