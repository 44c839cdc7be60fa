// The non-temporal copy, 32 bytes per store (AVX). The rate at which non-temporal stores issue
// hardly depends on their width, so 32 bytes at a time stream about twice the bytes of 16. They
// need 32-byte alignment; NumPy's large buffers start 16 bytes past one, so the first 16 bytes
// go through a 16-byte store, and so do the last 16..31.
#include "kernel.hpp"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

namespace npupack {
namespace kernels {

namespace {
__attribute__((target("avx"))) int64_t stream_avx(char* dst, const char* src, int64_t i, int64_t n) {
  if ((reinterpret_cast<uintptr_t>(dst + i) & 31) && i + 16 <= n) {
    _mm_stream_si128(reinterpret_cast<__m128i*>(dst + i), _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i)));
    i += 16;
  }
  for (; i + 32 <= n; i += 32) {
    _mm256_stream_si256(reinterpret_cast<__m256i*>(dst + i),
                        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i)));
  }
  return i;
}
}  // namespace

void stream_copy_x8_32_avx(StreamCopyArgs& a) {
  a.done = stream_avx(a.dst, a.src, a.done, a.n);
  stream_copy_x8_16_sse2(a);
}

}  // namespace kernels
}  // namespace npupack
#endif
