// spread_blocks: tile_blocks with one valid column `col` of `in` and zero padding (batch 1 of
// osv16): per tile of x, the column's b x tile matrix is transposed into scratch and each block
// is written whole from its b values by byte shuffles (SpreadPlan), straight to the output: no
// buffer to fill, scatter into and copy out. False, with nothing written, where the kernel does
// not apply (tile_blocks then builds the tile itself).
// Spec: docs/design.md §3.12 (the plan and the strategy list), §3.4 (strategies).
#include <algorithm>
#include <memory>

#include "npupack/spread.hpp"
#include "npupack/stream.hpp"
#include "npupack/transpose.hpp"
#include "walker.hpp"

namespace npupack {
namespace detail {

bool spread_blocks(Walker& w, const Loop& b, const Loop& x, const Loop& in, int64_t col, int64_t loff, int64_t poff) {
  const int64_t eb = w.P.eb;
  if (!w.spread || w.spread_col != col) {
    w.spread = std::make_shared<const SpreadPlan>(eb, b.extent, b.pstep, col);
    w.spread_col = col;
  }
  if (!w.spread->ok()) return false;
  char* const out = w.pout + poff;
  const bool stream = w.P.layout->nbytes() >= kStreamBytes;
  const int64_t tile = std::min(x.extent, std::max<int64_t>(8, kRowTileBytes / (b.extent * eb)));
  w.scratch.resize(static_cast<size_t>(tile * b.extent * eb));
  for (int64_t t = 0; t < x.extent; t += tile) {
    const int64_t nx = std::min(tile, x.extent - t);
    transpose(w.lin + loff + t * x.lstep + col * in.lstep, b.lstep, w.scratch.data(), b.extent * eb, b.extent, nx, eb);
    w.spread->run(w.scratch.data(), out + t * x.pstep, nx, stream);
  }
  if (stream) stream_fence();
  return true;
}

}  // namespace detail
}  // namespace npupack
