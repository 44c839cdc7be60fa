// The fp16 INF / NaN scan, 64 halves per step with AVX2: fp16 weight packing checks each kernel
// group just before packing it, from L2, where the wider compares run faster than SSE2's.
#include "kernel.hpp"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

namespace npupack {
namespace kernels {

#pragma GCC push_options
#pragma GCC target("avx2")
namespace {
inline __m256i lanes_avx2(const __m256i* p, __m256i mask, __m256i value, bool greater) {
  const __m256i m = _mm256_and_si256(_mm256_loadu_si256(p), mask);
  return greater ? _mm256_cmpgt_epi16(m, value) : _mm256_cmpeq_epi16(m, value);
}
}  // namespace

// 16 halves per compare, two accumulators.
bool fp16_scan_x16_64_avx2(const Fp16ScanArgs& a) {
  const __m256i mask = _mm256_set1_epi16(static_cast<int16_t>(a.mask));
  const __m256i value = _mm256_set1_epi16(static_cast<int16_t>(a.value));
  __m256i a0 = _mm256_setzero_si256(), a1 = a0;
  for (int64_t j = 0; j < a.n; j += 64) {
    const auto* p = reinterpret_cast<const __m256i*>(a.bits + j);
    a0 = _mm256_or_si256(a0, _mm256_or_si256(lanes_avx2(p, mask, value, a.greater),
                                             lanes_avx2(p + 1, mask, value, a.greater)));
    a1 = _mm256_or_si256(a1, _mm256_or_si256(lanes_avx2(p + 2, mask, value, a.greater),
                                             lanes_avx2(p + 3, mask, value, a.greater)));
  }
  return _mm256_movemask_epi8(_mm256_or_si256(a0, a1)) != 0;
}
#pragma GCC pop_options

}  // namespace kernels
}  // namespace npupack
#endif
