// The pixel shuffle, one pshufb per 16 bytes (pixels of 1, 2, 4 or 8 bytes; with zeros added,
// fewer source bytes a step: 12 for three components of four); the scalar loop moves the tail.
#include "kernel.hpp"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

namespace npupack {
namespace kernels {

__attribute__((target("ssse3"))) void pixel_shuffle_x8_16_ssse3(const PixelShuffleArgs& a) {
  const __m128i mask = _mm_load_si128(reinterpret_cast<const __m128i*>(a.s->mask));
  const int64_t steps = pixel_vector_steps(0, a.nbytes, *a.s), src_step = 16 / a.s->pixel * a.s->src_pixel;
  for (int64_t k = 0; k < steps; ++k) {
    const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(a.src + k * src_step));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(a.dst + 16 * k), _mm_shuffle_epi8(v, mask));
  }
  pixel_shuffle_tail(a.src, a.dst, 16 * steps, a.nbytes, *a.s);
}

}  // namespace kernels
}  // namespace npupack
#endif
