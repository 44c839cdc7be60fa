// tiled_nest: loops outside a transposed pair whose steps interleave inside the pair's packed
// blocks (plan_tiled_nest, plan_passes.cpp) run whole once per tile of x (kTileBytes of packed
// range, which stays in L2), so that each cache line is touched once instead of once per step.
// Within a tile the pair kernel (run_transpose) runs the tile's columns and prefetches the next
// tile's rows.
// Spec: docs/design.md §3.12 (the plan and the strategy list), §3.4 (strategies), §3.8 (memory traffic).
#include <algorithm>

#include "strategies.hpp"
#include "walker.hpp"

namespace npupack {
namespace detail {

bool run_tiled_nest(Walker& w, size_t li, int64_t loff, int64_t poff) {
  const Plan& P = w.P;
  if (li < P.nest || w.x_tile.hi != 0) return false;
  const Loop& x = P.loops[P.loops.size() - 2];
  const int64_t tile = P.nest_tile();
  if (x.extent <= tile) return false;
  for (int64_t t = 0; t < x.extent; t += tile) {
    w.x_tile = {t, std::min(x.extent, t + tile)};
    w.rec(li, loff, poff);
  }
  w.x_tile = {0, 0};
  return true;
}

}  // namespace detail
}  // namespace npupack
