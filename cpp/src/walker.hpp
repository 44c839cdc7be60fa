// The running state of one plan: the walk over its loops (outer loops one step at a time, the
// strategy's kernels below), the loop indices of padded and ragged dims, the prefetch range
// handed to the kernels, the fp16 watch and the kernels' scratch buffers. One walker per thread;
// copies share the plan, which is read-only.
// Spec: docs/design.md §3.12 (the plan and the strategy list).
#pragma once
#include <algorithm>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "npupack/checked.hpp"
#include "npupack/parallel.hpp"
#include "npupack/prefetch.hpp"
#include "npupack/spread.hpp"
#include "plan.hpp"
#include "strategies.hpp"

namespace npupack {
namespace detail {

class Walker {
 public:
  explicit Walker(const Plan& plan);

  void run(const char* logical_in, char* logical_out, const char* packed_in, char* packed_out);
  // run() restricted to outer iterations [lo, hi).
  void run_outer(int64_t lo, int64_t hi, const char* logical_in, char* logical_out, const char* packed_in,
                 char* packed_out);

  // fp16 INF/NaN test fused into packing (pack_checked): the row copies of rows contiguous on
  // both sides (1x1 DC weights: one 64-byte channel block per kernel), the 16-row transposes
  // (NVDLA fp16 feature data: 16 channels x H*W per surface) and the tap rotation kernels (3x3
  // and 5x5 DC weights) test the halves they move, and count the bytes they tested, so that the
  // caller knows whether a slab was covered whole.
  void watch_fp16(bool on) { watch = on && P.to_packed && P.eb == 2; }
  void clear_watch() { watched = 0; nonfinite = false; }
  int64_t watched_bytes() const { return watched; }
  bool saw_nonfinite() const { return nonfinite; }

  // --- for the runners ---

  // The loop's digits whose blocks hold valid elements: [lo, hi). Blocks before pad_lo or past
  // the logical end hold only padding (pre-filled by pack, ignored by unpack).
  struct Range {
    int64_t lo, hi;
    int64_t n() const { return hi - lo; }
  };
  Range range(const Loop& lp) const {
    if (lp.exact) return {0, lp.extent};
    const auto& d = P.layout->dims()[lp.dim];
    const int64_t start = d.pad_lo - base[lp.dim], end = d.pad_lo + d.extent - base[lp.dim];
    const int64_t lo = start > 0 ? start / lp.weight : 0;
    return {lo, std::min(lp.extent, ceil_div(end, lp.weight))};
  }
  int64_t pstride(const Loop& lp) const {
    return P.layout->ragged() ? P.layout->stride_at(lp.axis, idx.data()) : lp.pstep;
  }
  void enter(const Loop& lp, int64_t i, int64_t saved) {
    if (lp.exact) return;
    idx[lp.axis] = i;
    base[lp.dim] = saved + i * lp.weight;
  }
  // n elements of a run between the two sides.
  void copy(int64_t loff, int64_t lstep, int64_t poff, int64_t pstep, int64_t n) {
    if (P.to_packed) P.run(lin + loff, lstep, pout + poff, pstep, n);
    else P.run(pin + poff, pstep, lout + loff, lstep, n);
  }
  // The nest from loop li on.
  void rec(size_t li, int64_t loff, int64_t poff);
  // row_ptrs = `room` rows all pointing at a row of pad values (the caller sets the valid ones).
  void pad_rows(int64_t room, int64_t cols);
  // nin logical rows (`lstep` apart) of nx elements to nx packed columns of `room` elements
  // (`dstride` apart). Rows nin..room-1 read the row of pad values set up by pad_rows(room, >= nx):
  // writing the block whole lets the SIMD blocks apply even to 3 rows.
  void pack_columns(const char* rows, int64_t lstep, int64_t nin, int64_t room, char* dst, int64_t dstride,
                    int64_t nx);
  // A watched move's verdict: `finite` 1 (all halves finite) or 0 (INF or NaN seen) over `bytes`
  // tested; -1 (nothing moved) records nothing and returns false.
  bool record_watch(int finite, int64_t bytes) {
    if (finite < 0) return false;
    nonfinite |= finite == 0;
    watched += bytes;
    return true;
  }
  // The pending prefetch range (next_slab_part), handed to a kernel that takes it over `steps`.
  Ahead take_ahead(int64_t steps) {
    const Ahead ahead(pf_hi > pf_lo ? lin + pf_lo : nullptr, pf_hi - pf_lo, steps);
    pf_lo = pf_hi = 0;
    return ahead;
  }

  const Plan& P;
  const char* lin = nullptr;
  char* lout = nullptr;
  const char* pin = nullptr;
  char* pout = nullptr;
  std::vector<int64_t> idx, base;      // loop indices of the layout's axes, padded coordinate bases
  bool watch = false;                  // watch_fp16: row copies and transposes test fp16 halves
  bool nonfinite = false;              // watch_fp16: a tested half was INF or NaN
  int64_t watched = 0;                 // watch_fp16: bytes tested since clear_watch
  int64_t outer_i = 0;                 // the outer iteration running
  int64_t pf_lo = 0, pf_hi = 0;        // logical bytes the inner kernels are to prefetch
  std::pair<int64_t, int64_t> next_slab{0, 0};  // next_slab_part: the next outer slab
  int64_t pf_chunk = 0;                // next_slab_part: its share per part
  Range x_tile{0, 0};                  // tiled_nest: the x columns the pair runs (hi 0: all)
  std::vector<char> pad_row;           // a row of pad values for short blocks
  std::vector<const char*> row_ptrs;
  std::vector<char> scratch;           // tile_blocks: one transposed b x tile matrix
  std::vector<char> tile_buf;          // tile_blocks: one tile of packed blocks
  std::vector<char> bounce_buf;        // bounce_slab: one slab of packed bytes (and room to align it)
  std::shared_ptr<const SpreadPlan> spread;  // spread_blocks: the kernel of its column; copies share it
  int64_t spread_col = -1;

 private:
  void next_slab_part(int64_t part, int64_t parts);
  void bounce_slab(size_t li, int64_t loff, int64_t poff);
};

// Runs f(walker, lo, hi) over ranges of the outermost loop's iterations: all on this thread
// unless the plan splits them, else each range on its own thread and its own walker (walkers
// share nothing they write; the element slots of different iterations are disjoint).
template <class F>
void for_outer_ranges(const Plan& p, F f) {
  const int64_t steps = p.outer_steps();
  if (!p.split) {
    Walker w(p);
    return f(w, 0, steps);
  }
  parallel_for(steps, p.grain, [&](int64_t lo, int64_t hi) {
    Walker w(p);
    f(w, lo, hi);
  });
}

// The whole layout, its outer loop split across threads where the plan says so.
void run_walk(const Plan& p, const char* logical_in, char* logical_out, const char* packed_in, char* packed_out);

// tile_blocks with one valid column `col` of `in` and zero padding (run_spread_blocks.cpp).
bool spread_blocks(Walker& w, const Loop& b, const Loop& x, const Loop& in, int64_t col, int64_t loff, int64_t poff);

}  // namespace detail
}  // namespace npupack
