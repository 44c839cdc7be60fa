// The YUV 4:4:4 split of 16-bit components pixel by pixel: every width, every architecture.
#include "kernel.hpp"
#include "yuv_split.hpp"

namespace npupack {
namespace kernels {

void yuv_split_x16_any_scalar(const YuvSplitArgs& a) { NPUPACK_YUV_SPLIT_CALL(uint16_t, yuv_split_row, a); }

}  // namespace kernels
}  // namespace npupack
