// The YUV 4:4:4 split of 16-bit components, 8 pixels (16 bytes of Y, 32 of UV) per step with
// pshufb; a row not a multiple of 8 pixels ends with an overlapping step, a shorter one is scalar.
#include "kernel.hpp"
#include "yuv_split.hpp"

#if defined(__x86_64__) || defined(__i386__)
namespace npupack {
namespace kernels {

void yuv_split_x16_8_ssse3(const YuvSplitArgs& a) { NPUPACK_YUV_SPLIT_CALL(uint16_t, yuv_split_pshufb, a); }

}  // namespace kernels
}  // namespace npupack
#endif
