// NVDLA Winograd weights: channel padding, channel extension for strided kernels, the GWG^T
// transform in float64, rounding to the target precision and the 4x4x4 cube mapping, in one pass.
// Spec: docs/nvdla.md §9.
#pragma once
#include <cstdint>

#include "npupack/convert.hpp"

namespace npupack {

enum class WgSource { I8, U8, I16, U16, F16, F32, F64 };
enum class WgTarget { I8, I16, F16 };
enum class IntRounding { NearestEven, NearestAway, Truncate };

struct WinogradSpec {
  int64_t k, c, r, s;           // logical weights (K, C, R, S), elements
  int64_t stride[4];            // byte strides of the source along K, C, R, S (any sign)
  int64_t sy, sx;               // convolution strides: channel extension by stride phase
  int64_t c_pad;                // C rounded up to the atom (elements)
  int64_t kpg;                  // kernels per group
  WgTarget target;
  IntRounding int_rounding;     // int8/int16 targets
  Fp16Rounding fp16_rounding;   // fp16 target
  bool saturate;                // fp16 target (integers always saturate)
  double scale;                 // int8/int16 targets: multiplies t before rounding
};

// Meaningful bytes of the mapped surface: K * C_ext * 16 * es, C_ext = c_pad * sy * sx.
// Throws LayoutError for an inconsistent spec or a size that overflows.
int64_t winograd_bytes(const WinogradSpec& spec);

// Writes winograd_bytes(spec) bytes to dst (dst_size must be at least that; checked first).
void winograd_pack(const char* src, WgSource type, const WinogradSpec& spec, char* dst, int64_t dst_size);

}  // namespace npupack
