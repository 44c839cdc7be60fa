// The pixel shuffle, one pshufb per 16 bytes (pixels of 1, 2, 4 or 8 bytes); the scalar loop
// moves the tail.
#include "kernel.hpp"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

namespace npupack {
namespace kernels {

__attribute__((target("ssse3"))) void pixel_shuffle_x8_16_ssse3(const PixelShuffleArgs& a) {
  const __m128i mask = _mm_load_si128(reinterpret_cast<const __m128i*>(a.s->mask));
  int64_t i = 0;
  for (; i + 16 <= a.nbytes; i += 16) {
    const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(a.src + i));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(a.dst + i), _mm_shuffle_epi8(v, mask));
  }
  pixel_shuffle_tail(a.src, a.dst, i, a.nbytes, *a.s);
}

}  // namespace kernels
}  // namespace npupack
#endif
