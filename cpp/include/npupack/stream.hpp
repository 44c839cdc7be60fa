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

// Copies n bytes; the 16-byte-aligned middle of dst bypasses the caches. Call stream_fence()
// before the data is handed to anything else (non-temporal stores are weakly ordered). The
// stores are the stream-copy kernels of cpp/kernels (docs/design.md §4.9).
void stream_copy(char* dst, const char* src, int64_t n);

inline void stream_fence() {
#if defined(__SSE2__)
  _mm_sfence();
#endif
}

}  // namespace npupack
