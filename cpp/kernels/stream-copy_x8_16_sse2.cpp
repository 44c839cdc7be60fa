// The non-temporal copy, 16 bytes per store (SSE2): the copy where AVX is missing, and the last
// 16..31 bytes of the AVX kernel.
#include "kernel.hpp"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

namespace npupack {
namespace kernels {

__attribute__((target("sse2"))) void stream_copy_x8_16_sse2(StreamCopyArgs& a) {
  int64_t i = a.done;
  for (; i + 16 <= a.n; i += 16) {
    _mm_stream_si128(reinterpret_cast<__m128i*>(a.dst + i), _mm_loadu_si128(reinterpret_cast<const __m128i*>(a.src + i)));
  }
  a.done = i;
}

}  // namespace kernels
}  // namespace npupack
#endif
