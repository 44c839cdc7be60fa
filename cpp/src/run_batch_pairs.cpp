// batch_pairs: the loop just outside a transposed pair (DC weights: the kernels of a group, each
// a channel block x taps matrix) as one batched transpose: the kernel is chosen once per batch,
// not once per small matrix. Steps it cannot batch (a short block of a padded layout, b's own
// digit moving the pair's ranges) run pair by pair. In a ragged layout the strides and ranges
// inside the batch depend only on the outer counts of ragged dims, so they hold for every step
// of b unless b is one of those.
// Spec: docs/design.md §3.12 (the plan and the strategy list), §3.4 (strategies).
#include <algorithm>

#include "npupack/transpose.hpp"
#include "strategies.hpp"
#include "walker.hpp"

namespace npupack {
namespace detail {

namespace {

// b the outer count of x's dim, padded at the end only (os_is_yx_isv16_osv16 with I % 16 != 0):
// every step of b but the last holds whole x blocks; those are batched, the last is run alone.
bool x_tail(const Plan& p, const Loop& b, const Loop& x, const Loop& in) {
  const BlockedLayout& L = *p.layout;
  return !x.exact && b.dim == x.dim && b.dim != in.dim && !L.ragged() && L.dims()[x.dim].pad_lo == 0 &&
         b.lstep == x.extent * x.lstep;
}

}  // namespace

// Plan time: the conditions that do not change from one step of the walk to the next.
bool batch_pairs_applies(const Plan& p) {
  const size_t n = p.loops.size();
  if (!p.plain_pair() || n < 3) return false;
  // A split plan's outermost loop is run in ranges by the threads (run_outer), step by step: a
  // batch over it would never run.
  if (p.split && n == 3) return false;
  const Loop& b = p.loops[n - 3];
  const Loop& x = p.loops[n - 2];
  const Loop& in = p.loops[n - 1];
  // Otherwise b's own digit must not move the ranges of x and in (two levels of one padded dim).
  if (!x_tail(p, b, x, in) && !b.exact && (b.dim == x.dim || b.dim == in.dim)) return false;
  return !(p.layout->ragged() && !b.exact && p.layout->axes()[b.axis].level == 0);
}

bool run_batch_pairs(Walker& w, size_t li, int64_t loff, int64_t poff) {
  const Plan& P = w.P;
  const BlockedLayout& L = *P.layout;
  const int64_t eb = P.eb;
  if (li + 3 != P.loops.size() || w.x_tile.hi != 0) return false;
  const Loop& b = P.loops[li];
  const Loop& x = P.loops[li + 1];
  const Loop& in = P.loops.back();
  const bool tail = x_tail(P, b, x, in);
  const Walker::Range rin = w.range(in), rb = w.range(b);
  const Walker::Range rx = tail ? Walker::Range{0, x.extent} : w.range(x);
  // b's steps that hold whole blocks of x: all of them unless x_tail.
  const int64_t nb =
      tail ? std::max<int64_t>(0, std::min(rb.hi, (L.dims()[x.dim].extent - w.base[x.dim]) / b.weight) - rb.lo)
           : rb.n();
  if (nb < 2 || (P.to_packed && !L.ragged() && rin.n() < in.extent - rin.lo)) return false;
  const int64_t psb = w.pstride(b), psx = w.pstride(x);
  if (nb < rb.n()) {  // the short last blocks of x, as the walk would run them, after the batch
    const int64_t saved = w.base[b.dim];
    for (int64_t i = rb.lo + nb; i < rb.hi; ++i) {
      w.enter(b, i, saved);
      P.strategy->pair(w, loff + i * b.lstep, poff + i * psb);
    }
    w.base[b.dim] = saved;
    w.idx[b.axis] = 0;
  }
  loff += rin.lo * in.lstep + rb.lo * b.lstep;
  poff += rin.lo * eb + rb.lo * psb;
  const char* const lin = w.lin;
  char* const pout = w.pout;
  if (P.to_packed && P.stream && !P.stream_lines) {
    transpose_stream_batch(lin + loff, in.lstep, b.lstep, pout + poff, psx, psb, rin.n(), rx.n(), nb, eb);
  } else if (P.to_packed) {
    const char* ahead = w.pf_hi > w.pf_lo ? lin + w.pf_lo : nullptr;
    // fp16 into the packed side (watch_fp16): the tap rotation kernels test what they move. stream_lines:
    // streamed in the batch call where this output's columns are whole lines.
    if (w.watch && w.record_watch(transpose_batch_finite16(lin + loff, in.lstep, b.lstep, pout + poff, psx, psb,
                                                           rin.n(), rx.n(), nb, ahead, w.pf_hi - w.pf_lo,
                                                           KernelPath::kAuto, P.stream_lines),
                                  nb * rin.n() * rx.n() * eb)) {
      w.pf_lo = w.pf_hi = 0;
    } else if (transpose_batch(lin + loff, in.lstep, b.lstep, pout + poff, psx, psb, rin.n(), rx.n(), nb, eb,
                               ahead, w.pf_hi - w.pf_lo, KernelPath::kAuto, P.stream_lines)) {
      w.pf_lo = w.pf_hi = 0;
    }
  } else {
    transpose_batch(w.pin + poff, psx, psb, w.lout + loff, in.lstep, b.lstep, rx.n(), rin.n(), nb, eb);
  }
  return true;
}

}  // namespace detail
}  // namespace npupack
