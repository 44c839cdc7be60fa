// The pixel shuffle, two 32-byte vpshufb per 64-byte step, then 16-byte steps and the scalar
// loop for the tail (pixels of 1, 2, 4 or 8 bytes; with zeros added, 16-byte steps only).
#include "kernel.hpp"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

namespace npupack {
namespace kernels {

__attribute__((target("avx2"))) void pixel_shuffle_x8_64_avx2(const PixelShuffleArgs& a) {
  // vpshufb works within each 16-byte lane, so the same mask serves both lanes.
  const __m256i mask = _mm256_broadcastsi128_si256(_mm_load_si128(reinterpret_cast<const __m128i*>(a.s->mask)));
  const unsigned char* src = a.src;
  unsigned char* dst = a.dst;
  const int64_t nbytes = a.nbytes;
  int64_t i = 0;
  // Adding zeros, a 16-byte lane reads fewer source bytes than it writes (12 for three
  // components of four), so the two lanes' sources are not one 32-byte load: 16-byte steps only.
  if (a.s->src_pixel == a.s->pixel) {
    for (; i + 64 <= nbytes; i += 64) {
      const __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i));
      const __m256i y = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i + 32));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i), _mm256_shuffle_epi8(x, mask));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i + 32), _mm256_shuffle_epi8(y, mask));
    }
  }
  const int64_t steps = pixel_vector_steps(i, nbytes, *a.s), src_step = 16 / a.s->pixel * a.s->src_pixel;
  const unsigned char* from = src + pixel_source_bytes(i, *a.s);
  for (int64_t k = 0; k < steps; ++k, i += 16) {
    const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(from + k * src_step));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i), _mm_shuffle_epi8(v, _mm256_castsi256_si128(mask)));
  }
  pixel_shuffle_tail(src, dst, i, nbytes, *a.s);
}

}  // namespace kernels
}  // namespace npupack
#endif
