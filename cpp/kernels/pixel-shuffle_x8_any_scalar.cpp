// The pixel shuffle pixel by pixel: every pixel size, every architecture.
#include "kernel.hpp"

namespace npupack {
namespace kernels {

void pixel_shuffle_x8_any_scalar(const PixelShuffleArgs& a) { pixel_shuffle_tail(a.src, a.dst, 0, a.nbytes, *a.s); }

}  // namespace kernels
}  // namespace npupack
