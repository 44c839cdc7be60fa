#include "npupack/spread.hpp"

#include <algorithm>

#include "npupack/cpu.hpp"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define NPUPACK_X86 1
#endif

namespace npupack {

namespace {
constexpr int64_t kMaxBlock = 2048;  // 64 chunks: the table stays in L1 next to the values
}

SpreadPlan::SpreadPlan(int64_t eb, int64_t rows, int64_t row_bytes, int64_t col) {
  value_bytes_ = rows * eb;
  block_bytes_ = rows * row_bytes;
  const int64_t at = col * eb;
  if (!cpu().avx2 || eb < 1 || rows < 1 || at < 0 || at + eb > row_bytes || value_bytes_ < 16 ||
      block_bytes_ % 32 != 0 || block_bytes_ > kMaxBlock) {
    return;
  }
  std::vector<Chunk> chunks(static_cast<size_t>(block_bytes_ / 32));
  for (size_t c = 0; c < chunks.size(); ++c) {
    for (int half = 0; half < 2; ++half) {
      // Which value byte each output byte of this half holds (-1: a zero).
      int64_t src[16], lo = value_bytes_, hi = -1;
      for (int k = 0; k < 16; ++k) {
        const int64_t o = static_cast<int64_t>(c) * 32 + half * 16 + k, cb = o % row_bytes;
        src[k] = cb >= at && cb < at + eb ? (o / row_bytes) * eb + (cb - at) : -1;
        if (src[k] >= 0) lo = std::min(lo, src[k]), hi = std::max(hi, src[k]);
      }
      // The window: 16 bytes inside the values that hold all of them (an empty half takes 0).
      const int64_t w = hi < 0 ? 0 : std::min(lo, value_bytes_ - 16);
      if (hi >= w + 16) return;  // the values lie too far apart for one shuffle
      chunks[c].window[half] = static_cast<int32_t>(w);
      chunks[c].offset = static_cast<int32_t>(32 * c);
      for (int k = 0; k < 16; ++k) {
        chunks[c].ctrl[half * 16 + k] = src[k] < 0 ? 0x80 : static_cast<uint8_t>(src[k] - w);
      }
    }
  }
  // Chunks that read the same windows run back to back and share one load (all of them for
  // 16 bytes of values); the order of the stores within a block does not matter.
  std::stable_sort(chunks.begin(), chunks.end(), [](const Chunk& a, const Chunk& b) {
    return a.window[0] != b.window[0] ? a.window[0] < b.window[0] : a.window[1] < b.window[1];
  });
  chunks_ = std::move(chunks);
}

#ifdef NPUPACK_X86
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
#endif

void SpreadPlan::run(const char* values, char* dst, int64_t blocks, bool stream) const {
#ifdef NPUPACK_X86
  const auto n = static_cast<int64_t>(chunks_.size());
  const auto align = reinterpret_cast<uintptr_t>(dst) & 31;
  if (stream && align == 0) spread_avx2<32>(values, value_bytes_, dst, block_bytes_, blocks, chunks_.data(), n);
  else if (stream && align == 16) spread_avx2<16>(values, value_bytes_, dst, block_bytes_, blocks, chunks_.data(), n);
  else spread_avx2<0>(values, value_bytes_, dst, block_bytes_, blocks, chunks_.data(), n);
#else
  (void)values, (void)dst, (void)blocks, (void)stream;
#endif
}

}  // namespace npupack
