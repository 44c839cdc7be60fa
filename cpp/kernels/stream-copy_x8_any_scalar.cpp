// The copy with plain stores: the whole copy without SSE2, and the tail every streaming kernel
// leaves.
#include <cstring>

#include "kernel.hpp"

namespace npupack {
namespace kernels {

void stream_copy_x8_any_scalar(StreamCopyArgs& a) {
  if (a.n > a.done) std::memcpy(a.dst + a.done, a.src + a.done, static_cast<size_t>(a.n - a.done));
  a.done = a.n;
}

}  // namespace kernels
}  // namespace npupack
