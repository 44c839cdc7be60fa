#pragma once
// Non-temporal stores for outputs far larger than the caches: written once and not read back
// soon, their lines need not be fetched before being overwritten (a normal store reads each
// line in first), which saves about half the memory traffic.

#include <cstdint>
#include <cstring>

#include "npupack/cpu.hpp"

#if defined(__SSE2__)
#include <immintrin.h>
#endif

namespace npupack {

#if defined(__SSE2__)
namespace detail {
// The AVX form: 32-byte non-temporal stores. The rate at which non-temporal stores issue hardly
// depends on their width, so 32 bytes at a time stream about twice the bytes of 16. They need
// 32-byte alignment; NumPy's large buffers start 16 bytes past one, so the first 16 bytes go
// through a 16-byte store.
__attribute__((target("avx"))) inline int64_t stream_copy_avx(char* dst, const char* src, int64_t i, int64_t n) {
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
}  // namespace detail
#endif

// Copies n bytes; the 16-byte-aligned middle of dst bypasses the caches. Call stream_fence()
// before the data is handed to anything else (non-temporal stores are weakly ordered).
inline void stream_copy(char* dst, const char* src, int64_t n) {
#if defined(__SSE2__)
  const int64_t head = static_cast<int64_t>((16 - (reinterpret_cast<uintptr_t>(dst) & 15)) & 15);
  if (n < head + 16) {
    std::memcpy(dst, src, static_cast<size_t>(n));
    return;
  }
  std::memcpy(dst, src, static_cast<size_t>(head));
  int64_t i = head;
  if (cpu().avx) i = detail::stream_copy_avx(dst, src, i, n);
  for (; i + 16 <= n; i += 16) {
    _mm_stream_si128(reinterpret_cast<__m128i*>(dst + i), _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i)));
  }
  std::memcpy(dst + i, src + i, static_cast<size_t>(n - i));
#else
  std::memcpy(dst, src, static_cast<size_t>(n));
#endif
}

inline void stream_fence() {
#if defined(__SSE2__)
  _mm_sfence();
#endif
}

}  // namespace npupack
