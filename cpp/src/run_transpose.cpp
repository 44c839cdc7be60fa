// transpose: the last two loops as a transposed pair (x contiguous on the logical side, `in` on
// the packed side): one 2-D transpose per step of the loops outside, streaming past
// kStreamTransposeBytes, testing fp16 halves when watched, and a short last block of a padded
// layout written whole from pad rows. Also the pair kernel of tiled_nest and batch_pairs.
// Spec: docs/design.md §3.12 (the plan and the strategy list), §3.3 (transposed pairs).
#include <algorithm>

#include "npupack/prefetch.hpp"
#include "npupack/transpose.hpp"
#include "strategies.hpp"
#include "walker.hpp"

namespace npupack {
namespace detail {

void run_transpose(Walker& w, int64_t loff, int64_t poff) {
  const Plan& P = w.P;
  const int64_t eb = P.eb;
  const Loop& x = P.loops[P.loops.size() - 2];
  const Loop& in = P.loops.back();
  Walker::Range rx = w.range(x);  // starts at 0
  const int64_t psx = w.pstride(x);
  if (w.x_tile.hi > 0) {
    loff += w.x_tile.lo * x.lstep;
    poff += w.x_tile.lo * psx;
    rx = {0, w.x_tile.n()};
  }
  const Walker::Range rin = w.range(in);
  loff += rin.lo * in.lstep;
  poff += rin.lo * eb;
  const int64_t nin = rin.n(), nx = rx.n();
  const int64_t room = in.extent - rin.lo;
  if (P.to_packed && w.x_tile.hi > 0 && w.x_tile.hi < x.extent) {
    // The next tile of the same rows, into L2 by the time tiled_nest comes back to them.
    prefetch_row_lines(w.lin + loff + nx * x.lstep, in.lstep, nin, std::min(nx, x.extent - w.x_tile.hi) * x.lstep);
  }
  if (P.to_packed && nin < room && !P.layout->ragged()) {
    // A short last block of a padded layout (3-channel images, C % atom != 0): its rows
    // after the last valid one are holes (in a ragged layout they would be the next block),
    // so write the whole block, those rows from pad values; the holes then need no
    // separate fill (fills_holes).
    w.pad_rows(room, nx);
    w.pack_columns(w.lin + loff, in.lstep, nin, room, w.pout + poff, psx, nx);
    return;
  }
  // fp16 into the packed side (watch_fp16): the transpose tests what it moves.
  if (w.watch && w.record_watch(transpose_finite16(w.lin + loff, in.lstep, w.pout + poff, psx, nin, nx, P.stream),
                                nin * nx * eb)) {
    return;
  }
  if (P.to_packed && P.stream) transpose_stream(w.lin + loff, in.lstep, w.pout + poff, psx, nin, nx, eb);
  else if (P.to_packed) transpose(w.lin + loff, in.lstep, w.pout + poff, psx, nin, nx, eb);
  else transpose(w.pin + poff, psx, w.lout + loff, in.lstep, nx, nin, eb);
}

}  // namespace detail
}  // namespace npupack
