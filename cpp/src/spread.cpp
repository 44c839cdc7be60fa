#include "npupack/spread.hpp"

#include <algorithm>

#include "../kernels/kernel.hpp"

namespace npupack {

namespace {
constexpr int64_t kMaxBlock = 2048;  // 64 chunks: the table stays in L1 next to the values
}

SpreadPlan::SpreadPlan(int64_t eb, int64_t rows, int64_t row_bytes, int64_t col) {
  value_bytes_ = rows * eb;
  block_bytes_ = rows * row_bytes;
  const int64_t at = col * eb;
  // The plan is the program of the list's spread kernel (docs/design.md §4.9): none, no plan.
  if (!kernels::select_spread() || eb < 1 || rows < 1 || at < 0 || at + eb > row_bytes || value_bytes_ < 16 ||
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

void SpreadPlan::run(const char* values, char* dst, int64_t blocks, bool stream) const {
  const kernels::SpreadKernelInfo* k = kernels::select_spread();
  if (!k) return;  // ok() is false: nothing to run
  kernels::SpreadArgs a;
  a.values = values;
  a.value_bytes = value_bytes_;
  a.dst = dst;
  a.block_bytes = block_bytes_;
  a.blocks = blocks;
  a.chunks = chunks_.data();
  a.nchunks = static_cast<int64_t>(chunks_.size());
  a.stream = stream;
  k->run(a);
}

}  // namespace npupack
