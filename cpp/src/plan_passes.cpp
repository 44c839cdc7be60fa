// The planning passes that turn a layout's nest into the plan's loops, and the plan-time choices
// that depend on them (whole-block tiles, the tiled nest, who fills the holes). Loop order does
// not change any element's address, only the order of the writes.
// Spec: docs/design.md §3.2 (the passes), §3.4 (strategies), §3.5 (holes).
#include <algorithm>
#include <vector>

#include "npupack/parallel.hpp"
#include "npupack/transpose.hpp"
#include "plan.hpp"

namespace npupack {
namespace detail {

void merge_contiguous(Plan& p) {
  const BlockedLayout& L = *p.layout;
  std::vector<Loop> merged;
  for (const Loop& lp : p.loops) {
    if (!merged.empty()) {
      Loop& outer = merged.back();
      const bool packed_ok = L.ragged() || outer.pstep == lp.extent * lp.pstep;
      // Two digits of one padded dim (os_is_yx_isv16_osv16's i/16 and i%16 with I % 16 != 0) are
      // one loop over the dim's elements, clipped to its extent like each of them (Walker::range);
      // the holes past it are filled apart. The pair then runs one wide transpose, not a batch
      // of 16-column ones.
      const bool digits = !L.ragged() && outer.dim == lp.dim && outer.weight == lp.extent * lp.weight;
      if (((outer.exact && lp.exact) || digits) && outer.lstep == lp.extent * lp.lstep && packed_ok) {
        outer.axis = lp.axis;
        outer.dim = lp.dim;
        outer.extent *= lp.extent;
        outer.weight = lp.weight;
        outer.lstep = lp.lstep;
        outer.pstep = lp.pstep;
        outer.exact = outer.exact && lp.exact;
        continue;
      }
    }
    merged.push_back(lp);
  }
  p.loops.swap(merged);
}

// An innermost loop of 2..8 bytes contiguous on both sides and always run whole (clDNN's 1x1
// weights: i%4 of os_is_yx_osv16_isv4, 4 bytes) is one element of that size: its rows then
// move as single elements (a transpose of 4-byte elements over o%16 and i/4) instead of a
// 4-byte copy per row.
void widen_elements(Plan& p) {
  if (p.loops.size() < 2 || p.layout->ragged()) return;
  const Loop& in = p.loops.back();
  const int64_t bytes = in.extent * p.eb;
  if (!in.exact || in.lstep != p.eb || in.pstep != p.eb || (bytes != 2 && bytes != 4 && bytes != 8)) return;
  p.loops.pop_back();
  p.eb = bytes;
  p.run = run_for(p.eb);
}

// When the logical side is contiguous along a loop other than the innermost one (NCHW input: W;
// KCRS weights: R*S), that loop is moved next to the innermost and the pair runs as a blocked
// 2-D transpose.
bool move_transpose_partner(Plan& p) {
  auto& loops = p.loops;
  const size_t n = loops.size();
  if (n < 2) return false;
  const Loop& inner = loops.back();
  if (inner.lstep == p.eb || p.layout->axes()[inner.axis].stride != p.eb) return false;
  for (size_t m = n - 1; m-- > 0;) {
    // A partner padded only at the end (os_is_yx_isv16_osv16 with I % 16 != 0: i%16 of the
    // last block) transposes its valid columns, range(x) starting at 0; the columns past them
    // are holes, which the fill pass writes (fills_holes needs every loop but `in` exact).
    const auto& d = p.layout->dims()[loops[m].dim];
    if ((loops[m].exact || (!d.ragged && d.pad_lo == 0)) && loops[m].lstep == p.eb) {
      Loop partner = loops[m];
      loops.erase(loops.begin() + static_cast<std::ptrdiff_t>(m));
      loops.insert(loops.end() - 1, partner);
      return true;
    }
  }
  return false;
}

// When loops other than the partner continue the logical-contiguous run (os_is_yx_isv16_osv16 on
// 3x3 kernels: y*x of 9 elements, then i%16 at a step of 9), transposing only the partner gives
// tiny 16x9 blocks. Grouping them makes one wide transpose whose destination columns are found
// through a table of packed offsets.
void group_transpose_columns(Plan& p) {
  auto& loops = p.loops;
  const size_t n = loops.size();
  const Loop& in = loops.back();
  int64_t span = loops[n - 2].extent * p.eb;
  if (p.to_packed && p.eb == 1 && n >= 3 && loops[n - 3].exact && loops[n - 3].lstep == span &&
      batch_reads_rows_once_u8(in.extent, loops[n - 2].extent)) {
    // The loop just outside already continues the run: batch_pairs gives it to a narrow
    // kernel that reads each row once. A byte group of 16 rows would take the SSE2 16x8
    // blocks, which read 8 bytes of each row per block. 16-bit groups run tall_u16, which
    // beats batching them, and stay grouped, as does unpacking (tall_u8 over a row table).
    return;
  }
  size_t group = 1;
  for (bool grew = true; grew;) {
    grew = false;
    for (size_t m = 0; m + 1 + group < n; ++m) {
      const Loop& lp = loops[m];
      // A loop clipped only at its dim's end (os_is_yx_isv16_osv16 with I % 16 != 0: i%16 of
      // the last block) may join as the group's slowest digit: its valid columns are then a
      // prefix of the table (run_column_group), and the group grows no further.
      const auto& d = p.layout->dims()[lp.dim];
      const bool clipped = !lp.exact && !d.ragged && d.pad_lo == 0;
      if ((lp.exact || clipped) && lp.lstep == span && span * lp.extent * in.extent <= kGroupBytes) {
        grew = lp.exact;
        span *= lp.extent;
        Loop moved = lp;
        loops.erase(loops.begin() + static_cast<std::ptrdiff_t>(m));
        loops.insert(loops.end() - 1 - static_cast<std::ptrdiff_t>(group), moved);
        ++group;
        break;
      }
    }
  }
  if (group < 2) return;
  p.group = group;
  // Packed offset of every column (the group's loops read as one mixed-radix column index,
  // ordered by logical step), expanded digit by digit, slowest first (the group's loops tile the
  // columns exactly), instead of a division per digit and column, which is slow.
  std::vector<const Loop*> by_step;
  for (size_t g = n - 1 - group; g < n - 1; ++g) by_step.push_back(&loops[g]);
  std::sort(by_step.begin(), by_step.end(), [](const Loop* a, const Loop* b) { return a->lstep > b->lstep; });
  p.col_poff.assign(1, 0);
  for (const Loop* lp : by_step) {
    std::vector<int64_t> more;
    more.reserve(p.col_poff.size() * static_cast<size_t>(lp->extent));
    for (int64_t base : p.col_poff) {
      for (int64_t j = 0; j < lp->extent; ++j) more.push_back(base + j * lp->pstep);
    }
    p.col_poff.swap(more);
  }
}

// Rows of a transposed pair too short for the SIMD blocks (clDNN's isv4 and isv2 weights:
// i%4 of a 3x3 kernel is 4 rows of 9 taps) may continue in the packed buffer through loops
// further out (o%16 in os_is_yx_osv16_isv4 steps 4 bytes on). Folding those loops into the rows
// makes one transpose of 32 and more rows, whose source rows are found through a table of
// logical offsets, instead of one scalar 4 x taps transpose per step.
void group_transpose_rows(Plan& p) {
  auto& loops = p.loops;
  if (!loops.back().exact || loops.back().extent * p.eb >= kShortRowBytes) return;
  std::vector<int64_t> rows(static_cast<size_t>(loops.back().extent));
  for (size_t r = 0; r < rows.size(); ++r) rows[r] = static_cast<int64_t>(r) * loops.back().lstep;
  int64_t span = loops.back().extent * p.eb;  // packed bytes of the rows so far
  for (bool grew = true; grew && span < kRowGroupBytes;) {
    grew = false;
    for (size_t m = 0; m + 2 < loops.size(); ++m) {
      const Loop lp = loops[m];
      if (!lp.exact || lp.pstep != span) continue;
      std::vector<int64_t> more;
      more.reserve(rows.size() * static_cast<size_t>(lp.extent));
      for (int64_t j = 0; j < lp.extent; ++j) {
        for (int64_t r : rows) more.push_back(j * lp.lstep + r);
      }
      rows.swap(more);
      span *= lp.extent;
      loops.erase(loops.begin() + static_cast<std::ptrdiff_t>(m));
      grew = true;
      break;
    }
  }
  if (static_cast<int64_t>(rows.size()) == loops.back().extent) return;
  loops.back().extent = static_cast<int64_t>(rows.size());
  p.row_off.swap(rows);
}

namespace {

// The loop is the one tile of a dim without padding before blocking: its outer count is then
// ceil(extent / tile), every outer block is visited, and only the last is partial.
bool single_level(const Plan& p, const Loop& lp) {
  const auto& d = p.layout->dims()[lp.dim];
  const int64_t storage = d.storage ? d.storage : d.pad_lo + d.extent;
  return d.tiles.size() == 1 && d.pad_lo == 0 && storage == d.extent && p.layout->axes()[lp.axis].level == 1;
}

// No stride leaves gaps: the packed size is that of the blocked extents.
bool no_gaps(const BlockedLayout& L) {
  int64_t blocked = L.elem_bytes();
  for (const auto& ax : L.axes()) blocked *= ax.extent;
  return blocked == L.nbytes();
}

// tiles and every packed byte lies in a block that tile_blocks writes whole: b's and in's dims
// have no padding before blocking, every other loop is exact or the outer count of those two
// dims, and no stride leaves gaps.
bool tiles_cover_all(const Plan& p) {
  const size_t n = p.loops.size();
  const Loop& b = p.loops[n - 3];
  const Loop& in = p.loops[n - 1];
  if (!single_level(p, b) || !single_level(p, in)) return false;
  for (size_t i = 0; i + 3 < n; ++i) {
    const Loop& lp = p.loops[i];
    if (!lp.exact && lp.dim != b.dim && lp.dim != in.dim) return false;
  }
  return no_gaps(*p.layout);
}

// Two loops left after merging, both exact, the inner one contiguous on both sides and the
// outer one striding further than a row: the holes are exactly the gaps between rows (and a
// zero pad value fills them).
bool row_gaps_possible(const Plan& p) {
  if (p.loops.size() != 2 || p.transpose || p.layout->ragged() || !p.zero_pad()) return false;
  const Loop& x = p.loops[0];
  const Loop& in = p.loops[1];
  // Only the copy loop for two different dims zeroes the gaps (two levels of one dim take the
  // general path, which does not).
  return x.dim != in.dim && x.exact && in.exact && in.lstep == p.eb && in.pstep == p.eb &&
         x.pstep > in.extent * p.eb;
}

}  // namespace

// Whole-block tiles (run_tile_blocks.cpp) are taken where
//  - at most 1/8 of `in` is valid;
//  - the output is kStreamBytes or more and at most a quarter of each block valid
//    ((8,3,224,224) in os_is_yx_isv16_osv16: 3 x 8 of 16 x 16);
//  - the output is kDenseTileBytes or more and x spans a whole tile and 64 columns or more
//    (activations), whatever the holes. Past the caches, tiled_nest reads b x `in` rows (256
//    for isv16_osv16) in passes too short for the hardware prefetchers and writes each line in b
//    passes. Smaller outputs stay in L3, where tiled_nest's plain stores beat streaming. The x
//    of weights is a kernel's taps (9, 25, 49): tiles of 8 columns leave a 1-column tile whose
//    transpose is the slowest shape, and batch_pairs' whole-x transposes are faster
//    (docs/performance.md §6).
// Decided once per plan, as fills_holes relies on it.
TileRule tile_blocks_rule(const Plan& p) {
  const BlockedLayout& L = *p.layout;
  const size_t n = p.loops.size();
  if (!p.to_packed || !p.plain_pair() || L.ragged() || n < 3) return kNoTiles;
  const Loop& b = p.loops[n - 3];
  const Loop& x = p.loops[n - 2];
  const Loop& in = p.loops[n - 1];
  if (b.dim == in.dim || b.pstep != in.extent * p.eb || b.extent * b.pstep != x.pstep) return kNoTiles;
  // The valid part of a block as far as the dims' extents tell (a dim shorter than its tile).
  const auto valid = [&](const Loop& lp) { return std::min(L.dims()[lp.dim].extent, lp.extent); };
  if (L.nbytes() >= kStreamBytes && 4 * valid(b) * valid(in) <= b.extent * in.extent) return kSparseLarge;
  if (L.nbytes() >= kDenseTileBytes && x.extent * x.pstep >= kRowTileBytes && x.extent >= 64) return kDenseWide;
  return b.exact && single_level(p, in) && 8 * valid(in) <= in.extent ? kScattered : kNoTiles;
}

// Loops outside a transposed pair can interleave with it in the packed buffer: each step of
// such a loop writes a few bytes of every block of x (os_is_yx_isv16_osv16 on activations:
// each of the 16 isv steps writes 16 of every 256 bytes of y*x). Run whole, each step would
// stream over the pair's entire packed range; cutting x into tiles whose packed range stays in
// L2 and running the whole nest of such loops per tile touches each line once. The first loop
// from which on every loop interleaves so, or loops.size() for none.
size_t plan_tiled_nest(const Plan& p) {
  const size_t n = p.loops.size();
  if (!p.plain_pair() || p.layout->ragged() || p.tiles || n < 3) return n;
  const Loop& x = p.loops[n - 2];
  size_t first = n - 2;
  while (first > 0 && p.loops[first - 1].pstep * p.loops[first - 1].extent <= x.pstep) --first;
  return first == n - 2 ? n : first;
}

// A large plan of one pair and nothing outside it but loops of one step (Kneron's channel blocks
// of 16 or fewer channels over H*W; a single surface) has no outer loop for the threads to share:
// its x loop, run whole, becomes an outer count of equal chunks, first, and the chunk, where its
// extent divides into 2 to 4 chunks per thread (a loop of one step runs the same anywhere). Where
// the pair zeroes the gaps after its rows (Horizon's aligned C), each chunk zeroes the gap after
// its last row (run_copy_rows). Not where a table or tile plan runs x whole.
void split_pair_for_threads(Plan& p) {
  const BlockedLayout& L = *p.layout;
  const int64_t threads = num_threads();
  const size_t n = p.loops.size();
  if (n < 2 || !p.loops[n - 2].exact || threads < 2 || L.nbytes() < kParallelBytes || p.tiles || p.nest != n ||
      p.group >= 2 || !p.row_off.empty()) {
    return;
  }
  for (size_t i = 0; i + 2 < n; ++i) {
    if (p.loops[i].extent != 1) return;
  }
  Loop& x = p.loops[n - 2];
  for (int64_t steps = 2 * threads; steps <= 4 * threads; ++steps) {
    if (x.extent % steps != 0) continue;
    const int64_t chunk = x.extent / steps;
    Loop outer = x;
    outer.extent = steps;
    outer.weight = x.weight * chunk;
    outer.lstep = x.lstep * chunk;
    outer.pstep = x.pstep * chunk;
    x.extent = chunk;
    p.loops.insert(p.loops.begin(), outer);
    p.nest = p.loops.size();
    return;
  }
}

// True when packing writes every hole itself: the gaps between rows (row_gaps), whole-block
// tiles covering the buffer, or a transposed pair whose only holes are the tails of the
// innermost loop's blocks (every other dim exact, no padding, no stride gaps), which it writes
// whole from pad rows. pack() then skips the separate fill pass.
bool plan_fills_holes(Plan& p) {
  const BlockedLayout& L = *p.layout;
  if (p.to_packed && row_gaps_possible(p)) return p.row_gaps = true;
  if (p.tiles && tiles_cover_all(p)) return true;
  if (!p.to_packed || !p.plain_pair() || L.ragged()) return false;
  const auto& dims = L.dims();
  const Loop& in = p.loops.back();
  int64_t elements = 1;
  for (size_t i = 0; i < dims.size(); ++i) {
    if (static_cast<int>(i) == in.dim) {
      // Split into its outer count and this one tile only: then its holes are exactly the
      // tail of the last block along `in`. (With more tiles, whole blocks at other levels are
      // holes that the walk never visits.)
      if (dims[i].pad_lo != 0 || dims[i].storage != dims[i].extent || dims[i].tiles.size() != 1) return false;
    }
    elements *= dims[i].extent;
  }
  for (const Loop& lp : p.loops) {
    if (!lp.exact && lp.dim != in.dim) return false;
  }
  return no_gaps(L) && elements > 0;
}

}  // namespace detail
}  // namespace npupack
