// The fp16 INF / NaN scan, 32 halves per step with SSE2 (x86-64's baseline).
#include "fp16_test.hpp"
#include "kernel.hpp"

#if (defined(__x86_64__) || defined(__i386__)) && defined(__SSE2__)
namespace npupack {
namespace kernels {

// 8 halves per compare, the lane masks OR-ed together and tested once at the end.
bool fp16_scan_x16_32_sse2(const Fp16ScanArgs& a) {
  const detail::Fp16Test t{a.mask, a.value, a.greater};
  __m128i acc = _mm_setzero_si128();
  for (int64_t j = 0; j < a.n; j += 32) {
    const auto* p = reinterpret_cast<const __m128i*>(a.bits + j);
    const __m128i m0 = _mm_or_si128(detail::fp16_lanes_sse2(_mm_loadu_si128(p), t),
                                    detail::fp16_lanes_sse2(_mm_loadu_si128(p + 1), t));
    const __m128i m1 = _mm_or_si128(detail::fp16_lanes_sse2(_mm_loadu_si128(p + 2), t),
                                    detail::fp16_lanes_sse2(_mm_loadu_si128(p + 3), t));
    acc = _mm_or_si128(acc, _mm_or_si128(m0, m1));
  }
  return _mm_movemask_epi8(acc) != 0;
}

}  // namespace kernels
}  // namespace npupack
#endif
