// NVDLA Winograd weights: channel padding, channel extension for strided kernels, the GWG^T
// transform in float64, rounding to the target precision and the 4x4x4 cube mapping, in one pass
// that writes each cube where the Winograd descriptor of (K, C_ext, 4, 4) places it (the
// descriptor is the rule; the kernels check its cube order). Spec: docs/nvdla.md §9.
#pragma once
#include <cstdint>

#include "npupack/convert.hpp"
#include "npupack/cpu.hpp"
#include "npupack/layout.hpp"

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
  KernelPath path = KernelPath::kAuto;  // for tests: the widest instruction set the kernels may use
};

// Throws LayoutError for an inconsistent spec, a descriptor `full` that is not (K, C_ext, 4, 4)
// with C_ext = c_pad * sy * sx in the target's element size or whose cube rows are not runs of
// kpg 4x4x4 cubes, or an output smaller than full.nbytes().
void check_winograd(const WinogradSpec& spec, const BlockedLayout& full, int64_t dst_size);

// Writes full.nbytes() bytes to dst (checked first, as check_winograd).
void winograd_pack(const char* src, WgSource type, const WinogradSpec& spec, const BlockedLayout& full, char* dst,
                   int64_t dst_size);

}  // namespace npupack
