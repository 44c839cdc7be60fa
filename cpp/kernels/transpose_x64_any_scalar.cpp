// 64-bit elements one by one: every shape and side, every architecture (the reference the
// SIMD kernels are tested against besides NumPy, and the only kernel off x86).
#include "common.hpp"

namespace npupack {
namespace kernels {

bool transpose_x64_any_scalar_takes(const TransposeArgs& a) { return sides_of(a) != kStreamed; }

bool transpose_x64_any_scalar(const TransposeArgs& a) {
  each_matrix<kAnySides & ~kStreamed>(a, [&a](auto row, auto col) { scalar<8>(row, col, 0, a.rows, 0, a.cols); });
  return false;
}

}  // namespace kernels
}  // namespace npupack
