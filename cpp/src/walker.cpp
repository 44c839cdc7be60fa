// The walk over a plan's loops: outer loops step by step (prefetching the next outer slab where
// the plan says so), the strategy's kernels where they apply. Loops over padded or ragged dims
// stop at the logical extent (pack has pre-filled the holes, unpack ignores them).
// Spec: docs/design.md §3.12 (the plan and the strategy list).
#include "walker.hpp"

#include <algorithm>
#include <cstring>

#include "npupack/checked.hpp"
#include "npupack/stream.hpp"
#include "npupack/transpose.hpp"
#include "fill.hpp"

namespace npupack {
namespace detail {

Walker::Walker(const Plan& plan) : P(plan) {
  idx.assign(P.layout->axes().size(), 0);
  base.assign(P.layout->dims().size(), 0);
}

void Walker::run(const char* logical_in, char* logical_out, const char* packed_in, char* packed_out) {
  lin = logical_in; lout = logical_out; pin = packed_in; pout = packed_out;
  rec(0, P.origin, 0);
  if (P.stream || P.bouncing) stream_fence();
}

void Walker::run_outer(int64_t lo, int64_t hi, const char* logical_in, char* logical_out, const char* packed_in,
                       char* packed_out) {
  lin = logical_in; lout = logical_out; pin = packed_in; pout = packed_out;
  const Loop& lp = P.loops[0];
  const Range r = range(lp);
  const int64_t ps = pstride(lp);
  const int64_t saved = base[lp.dim];
  for (int64_t i = std::max(lo, r.lo); i < std::min(hi, r.hi); ++i) {
    enter(lp, i, saved);
    outer_i = i;
    rec(1, P.origin + i * lp.lstep, i * ps);
  }
  if (!lp.exact) {  // as rec leaves it: the next call starts from the same state
    base[lp.dim] = saved;
    idx[lp.axis] = 0;
  }
  if (P.stream || P.bouncing) stream_fence();
}

void run_walk(const Plan& plan, const char* logical_in, char* logical_out, const char* packed_in,
              char* packed_out) {
  Plan bounced;
  const Plan& p = for_output(plan, packed_out, bounced);
  if (!p.split) return Walker(p).run(logical_in, logical_out, packed_in, packed_out);
  for_outer_ranges(p, [&](Walker& w, int64_t lo, int64_t hi) {
    w.run_outer(lo, hi, logical_in, logical_out, packed_in, packed_out);
  });
}

void Walker::rec(size_t li, int64_t loff, int64_t poff) {
  const size_t n = P.loops.size();
  const Strategy& s = *P.strategy;
  if (li + 2 == n) return s.pair(*this, loff, poff);
  if (s.nest != nullptr && s.nest(*this, li, loff, poff)) return;
  const Loop& lp = P.loops[li];
  const Range r = range(lp);
  const int64_t ps = pstride(lp);
  const int64_t saved = base[lp.dim];
  for (int64_t i = r.lo; i < r.hi; ++i) {
    enter(lp, i, saved);
    if (li == 0) outer_i = i;
    if (P.prefetch_slabs && li == 1) next_slab_part(i - r.lo, r.n());
    if (P.bouncing && li == P.bounce) {
      bounce_slab(li, loff + i * lp.lstep, poff + i * ps);
    } else {
      rec(li + 1, loff + i * lp.lstep, poff + i * ps);
    }
    pf_lo = pf_hi = 0;  // a plan whose kernels do not take the range prefetches nothing
  }
  if (!lp.exact) {
    base[lp.dim] = saved;
    idx[lp.axis] = 0;
  }
}

// One step of the bounce loop (Plan::bounce): its slab packed into the line-aligned buffer, the
// inner loops' packed offsets taken from the slab's start, then streamed to its place.
void Walker::bounce_slab(size_t li, int64_t loff, int64_t poff) {
  int64_t bytes = P.eb;
  for (size_t j = li + 1; j < P.loops.size(); ++j) bytes *= P.loops[j].extent;
  if (bounce_buf.size() < static_cast<size_t>(bytes + 64)) bounce_buf.assign(static_cast<size_t>(bytes + 64), 0);
  char* const slab = bounce_buf.data() + (64 - reinterpret_cast<uintptr_t>(bounce_buf.data()) % 64) % 64;
  // Holes (a padded dim's last block) are streamed out with the slab: they start as the pad value.
  if (P.layout->has_holes()) fill_pad(slab, bytes, P.eb, P.has_pad ? P.pad : nullptr);
  char* const out = pout;
  pout = slab;
  rec(li + 1, loff, 0);
  pout = out;
  stream_copy(out + poff, slab, bytes);
}

void Walker::pad_rows(int64_t room, int64_t cols) {
  const int64_t eb = P.eb;
  if (static_cast<int64_t>(pad_row.size()) < cols * eb) {
    const size_t n = static_cast<size_t>(cols * eb), e = static_cast<size_t>(eb);
    pad_row.assign(n, 0);
    if (P.has_pad) {  // the pattern, then doubling copies
      std::memcpy(pad_row.data(), P.pad, e);
      for (size_t done = e; done < n; done *= 2) {
        std::memcpy(pad_row.data() + done, pad_row.data(), std::min(done, n - done));
      }
    }
  }
  row_ptrs.assign(static_cast<size_t>(room), pad_row.data());
}

void Walker::pack_columns(const char* rows, int64_t lstep, int64_t nin, int64_t room, char* dst, int64_t dstride,
                          int64_t nx) {
  if (nin == room) return transpose(rows, lstep, dst, dstride, nin, nx, P.eb);
  for (int64_t r = 0; r < nin; ++r) row_ptrs[static_cast<size_t>(r)] = rows + r * lstep;
  transpose_from_ptrs(row_ptrs.data(), dst, dstride, room, nx, P.eb);
}

// Part `part` of `parts` of the logical range that the next outer iteration reads (DC weights:
// the next kernel group), asked for while this one runs. A group's kernels are rows far apart
// in the source, read a block at a time: more streams than the hardware prefetchers follow,
// so past the caches the reads waited on memory. Spread over the iterations of the loop inside
// the outer one, the requests overlap with this group's packing.
// The slab and the share are worked out at part 0 only: divisions are slow, and two per inner
// iteration would be a noticeable share of a pack.
void Walker::next_slab_part(int64_t part, int64_t parts) {
  if (part == 0) {
    next_slab = P.outer_slab(outer_i + 1);
    pf_chunk = ((next_slab.second - next_slab.first + parts - 1) / parts + 63) / 64 * 64;
  }
  pf_lo = std::min(next_slab.second, next_slab.first + part * pf_chunk);
  pf_hi = std::min(next_slab.second, pf_lo + pf_chunk);
}

}  // namespace detail
}  // namespace npupack
