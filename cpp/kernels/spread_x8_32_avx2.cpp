// Zero-padded blocks from one column of values (spread.hpp), 32 bytes per chunk with AVX2: each
// chunk one byte shuffle of one or two 16-byte windows of its block's values.
#include "kernel.hpp"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

namespace npupack {
namespace kernels {

namespace {
// kStream: 0 plain stores, 16 non-temporal 16-byte stores (dst 16-byte aligned), 32 non-temporal
// 32-byte stores (dst 32-byte aligned). NumPy's large arrays start 16 bytes into a page.
template <int kStream>
__attribute__((target("avx2"))) void spread_avx2(const char* values, int64_t value_bytes, char* dst,
                                                 int64_t block_bytes, int64_t blocks, const SpreadPlan::Chunk* chunks,
                                                 int64_t nchunks) {
  for (int64_t x = 0; x < blocks; ++x) {
    const char* v = values + x * value_bytes;
    char* d = dst + x * block_bytes;
    __m256i src = _mm256_setzero_si256();
    int32_t w0 = -1, w1 = -1;
    for (int64_t c = 0; c < nchunks; ++c) {
      const SpreadPlan::Chunk& k = chunks[c];
      if (k.window[0] != w0 || k.window[1] != w1) {
        w0 = k.window[0], w1 = k.window[1];
        src = _mm256_inserti128_si256(
            _mm256_castsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(v + w0))),
            _mm_loadu_si128(reinterpret_cast<const __m128i*>(v + w1)), 1);
      }
      const __m256i out = _mm256_shuffle_epi8(src, _mm256_load_si256(reinterpret_cast<const __m256i*>(k.ctrl)));
      char* const at = d + k.offset;
      if constexpr (kStream == 32) {
        _mm256_stream_si256(reinterpret_cast<__m256i*>(at), out);
      } else if constexpr (kStream == 16) {
        _mm_stream_si128(reinterpret_cast<__m128i*>(at), _mm256_castsi256_si128(out));
        _mm_stream_si128(reinterpret_cast<__m128i*>(at + 16), _mm256_extracti128_si256(out, 1));
      } else {
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(at), out);
      }
    }
  }
}
}  // namespace

void spread_x8_32_avx2(const SpreadArgs& a) {
  const auto align = reinterpret_cast<uintptr_t>(a.dst) & 31;
  if (a.stream && align == 0) {
    spread_avx2<32>(a.values, a.value_bytes, a.dst, a.block_bytes, a.blocks, a.chunks, a.nchunks);
  } else if (a.stream && align == 16) {
    spread_avx2<16>(a.values, a.value_bytes, a.dst, a.block_bytes, a.blocks, a.chunks, a.nchunks);
  } else {
    spread_avx2<0>(a.values, a.value_bytes, a.dst, a.block_bytes, a.blocks, a.chunks, a.nchunks);
  }
}

}  // namespace kernels
}  // namespace npupack
#endif
