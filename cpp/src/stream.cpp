// stream.hpp's copy: the first stream-copy kernel of the list this CPU runs (docs/design.md §4.9).
#include "npupack/stream.hpp"

#include "../kernels/kernel.hpp"

namespace npupack {

void stream_copy(char* dst, const char* src, int64_t n) {
  kernels::run_stream_copy(kernels::select_stream_copy(), dst, src, n);
}

}  // namespace npupack
