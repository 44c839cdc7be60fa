// The pixel shuffle, two 32-byte vpshufb per 64-byte step, then 16-byte steps and the scalar
// loop for the tail (pixels of 1, 2, 4 or 8 bytes).
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
  for (; i + 64 <= nbytes; i += 64) {
    const __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i));
    const __m256i y = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i + 32));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i), _mm256_shuffle_epi8(x, mask));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i + 32), _mm256_shuffle_epi8(y, mask));
  }
  for (; i + 16 <= nbytes; i += 16) {
    const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i), _mm_shuffle_epi8(v, _mm256_castsi256_si128(mask)));
  }
  pixel_shuffle_tail(src, dst, i, nbytes, *a.s);
}

}  // namespace kernels
}  // namespace npupack
#endif
