// The fp16 INF / NaN scan half by half: every length, every architecture.
#include "fp16_test.hpp"
#include "kernel.hpp"

namespace npupack {
namespace kernels {

bool fp16_scan_x16_any_scalar(const Fp16ScanArgs& a) {
  const detail::Fp16Test t{a.mask, a.value, a.greater};
  for (int64_t i = 0; i < a.n; ++i) {
    if (t(a.bits[i])) return true;
  }
  return false;
}

}  // namespace kernels
}  // namespace npupack
