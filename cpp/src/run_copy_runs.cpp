// copy_runs: the general case, runs of elements strided on either side, one copy per step of
// the loop outside the innermost (per step of both where they are levels of one dim, whose
// ranges depend on each other). Any plan the walk takes can run so.
// Spec: docs/design.md §3.12 (the plan and the strategy list).
#include "strategies.hpp"
#include "walker.hpp"

namespace npupack {
namespace detail {

void run_copy_runs(Walker& w, int64_t loff, int64_t poff) {
  const Plan& P = w.P;
  const Loop& x = P.loops[P.loops.size() - 2];
  const Loop& in = P.loops.back();
  const Walker::Range rx = w.range(x);
  const int64_t psx = w.pstride(x);
  if (x.dim != in.dim) {
    // The inner loop's range depends only on its own dim, and its stride only on outer
    // counts of ragged dims other than x's: compute them once for all of x.
    const Walker::Range rin = w.range(in);
    const int64_t psin = w.pstride(in), nin = rin.n();
    loff += rin.lo * in.lstep + rx.lo * x.lstep;
    poff += rin.lo * psin + rx.lo * psx;
    for (int64_t i = 0; i < rx.n(); ++i) w.copy(loff + i * x.lstep, in.lstep, poff + i * psx, psin, nin);
    return;
  }
  const int64_t saved = w.base[x.dim];
  for (int64_t i = rx.lo; i < rx.hi; ++i) {
    w.enter(x, i, saved);
    const Walker::Range rin = w.range(in);
    const int64_t psin = w.pstride(in);
    w.copy(loff + i * x.lstep + rin.lo * in.lstep, in.lstep, poff + i * psx + rin.lo * psin, psin, rin.n());
  }
  if (!x.exact) w.base[x.dim] = saved;
}

}  // namespace detail
}  // namespace npupack
