#pragma once
// Non-temporal stores for outputs far larger than the caches: written once and not read back
// soon, their lines need not be fetched before being overwritten (a normal store reads each
// line in first), which saves about half the memory traffic.

#include <cstdint>
#include <cstring>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace npupack {

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
