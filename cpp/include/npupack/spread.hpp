// Whole zero-padded blocks from one column of values: the packed blocks of a weight format
// applied to a tensor with a single valid output channel (os_is_yx_isv16_osv16 of batch-1
// activations: each 256-byte block holds 16 values, one per 16-byte row, the rest zero).
#pragma once
#include <cstdint>
#include <vector>

namespace npupack {

// Block x (x < blocks) is `rows` rows of `row_bytes` bytes; row r holds value r (eb bytes) at
// byte col * eb and zeros elsewhere. The rows * eb bytes of values of block x are contiguous at
// values + x * rows * eb. Each 32-byte chunk of a block is one byte shuffle of one or two
// 16-byte windows of its values: no scatter of single elements, no buffer, no second pass.
class SpreadPlan {
 public:
  // The plan for this geometry; ok() is false where the AVX2 kernel does not apply (no AVX2,
  // blocks not a whole number of 32-byte chunks or larger than 2 KiB, fewer than 16 bytes of
  // values, a chunk half needing values more than 16 bytes apart).
  SpreadPlan(int64_t eb, int64_t rows, int64_t row_bytes, int64_t col);
  bool ok() const { return !chunks_.empty(); }

  // Writes `blocks` blocks to dst (block_bytes = rows * row_bytes apart). With `stream`, the
  // stores bypass the caches where dst is 16-byte aligned (the caller fences).
  void run(const char* values, char* dst, int64_t blocks, bool stream) const;

  // One 32-byte chunk of a block: the shuffle control, where each half's 16-byte window of
  // values starts in the block's values, and the chunk's byte offset in the block.
  struct Chunk {
    alignas(32) uint8_t ctrl[32];
    int32_t window[2];
    int32_t offset;
  };
  // The chunks of one block, for the kernel tester.
  const std::vector<Chunk>& chunks() const { return chunks_; }

 private:
  std::vector<Chunk> chunks_;
  int64_t value_bytes_ = 0, block_bytes_ = 0;
};

}  // namespace npupack
