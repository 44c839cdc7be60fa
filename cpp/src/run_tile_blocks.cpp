// tile_blocks: whole-block tiles. The loop just outside a transposed pair (b) makes up, with the
// pair's packed-inner loop, the whole packed block of each x column (os_is_yx_isv16_osv16 on
// activations: [isv][osv] is 256 contiguous bytes per y*x). Packing one strided pass per b step
// would touch every cache line of the output b times. Instead, per tile of x, the blocks are
// built in a buffer whose holes are filled once (every tile writes the same slots) and copied
// out; from kStreamBytes on with non-temporal stores, which need not read the lines in first. A
// tile is built by scatter when at most 1/8 of `in` is valid (batch 1 or 2 of osv16: transpose
// each valid `in` row's b x tile matrix, scatter it to its slots; with one valid row and zero
// padding, spread_blocks shuffles whole blocks straight to the output instead), else by one
// pack_columns per valid b step. When it is taken: tile_blocks_rule (plan_passes.cpp).
// Spec: docs/design.md §3.12 (the plan and the strategy list), §3.4 (strategies), §3.8 (memory traffic).
#include <algorithm>
#include <cstring>

#include "npupack/stream.hpp"
#include "npupack/transpose.hpp"
#include "scatter.hpp"
#include "strategies.hpp"
#include "walker.hpp"

namespace npupack {
namespace detail {

bool run_tile_blocks(Walker& w, size_t li, int64_t loff, int64_t poff) {
  const Plan& P = w.P;
  if (li + 3 != P.loops.size()) return false;
  const int64_t eb = P.eb;
  const Loop& b = P.loops[li];
  const Loop& x = P.loops[li + 1];
  const Loop& in = P.loops.back();
  const Walker::Range rin = w.range(in), rb = w.range(b);
  const int64_t nin = rin.n(), room = in.extent - rin.lo;
  const bool scattered = b.exact && 8 * nin <= in.extent;
  const bool zero = P.zero_pad();
  if (scattered && nin == 1 && zero && spread_blocks(w, b, x, in, rin.lo, loff, poff)) return true;
  const int64_t tile = std::min(x.extent, std::max<int64_t>(8, kRowTileBytes / x.pstep));
  w.pad_rows(room, tile * x.pstep / eb);  // pad_row also serves the fill
  if (scattered) w.scratch.resize(static_cast<size_t>(tile * b.extent * eb));
  auto fill = [&](char* p, int64_t bytes) {
    if (zero) std::memset(p, 0, static_cast<size_t>(bytes));
    else std::memcpy(p, w.pad_row.data(), static_cast<size_t>(bytes));
  };
  const bool stream = P.layout->nbytes() >= kStreamBytes;
  w.tile_buf.resize(static_cast<size_t>(tile * x.pstep));
  fill(w.tile_buf.data(), tile * x.pstep);
  char* const buf = w.tile_buf.data();
  for (int64_t t = 0; t < x.extent; t += tile) {
    const int64_t nx = std::min(tile, x.extent - t);
    const char* const src = w.lin + loff + t * x.lstep;
    if (scattered) {
      for (int64_t j = rin.lo; j < rin.hi; ++j) {
        transpose(src + j * in.lstep, b.lstep, w.scratch.data(), b.extent * eb, b.extent, nx, eb);
        // The slots of all columns form one sequence at a step of b.pstep (x.pstep = b.extent * b.pstep).
        scatter(w.scratch.data(), buf + j * eb, b.pstep, b.extent * nx, eb);
      }
    } else {
      for (int64_t i = rb.lo; i < rb.hi; ++i) {
        const char* rows = src + i * b.lstep + rin.lo * in.lstep;
        w.pack_columns(rows, in.lstep, nin, room, buf + i * b.pstep + rin.lo * eb, x.pstep, nx);
      }
    }
    char* const dst = w.pout + poff + t * x.pstep;
    if (stream) stream_copy(dst, buf, nx * x.pstep);
    else std::memcpy(dst, buf, static_cast<size_t>(nx * x.pstep));
  }
  if (stream) stream_fence();
  return true;
}

}  // namespace detail
}  // namespace npupack
