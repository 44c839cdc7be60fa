// single_run: a plan of one loop (a plain copy, or one strided run of elements) is one copy.
// Spec: docs/design.md §3.12 (the plan and the strategy list).
#include "strategies.hpp"
#include "walker.hpp"

namespace npupack {
namespace detail {

bool run_single_run(Walker& w, size_t, int64_t loff, int64_t poff) {
  const Loop& lp = w.P.loops[0];
  const Walker::Range r = w.range(lp);
  const int64_t ps = w.pstride(lp);
  w.copy(loff + r.lo * lp.lstep, lp.lstep, poff + r.lo * ps, ps, r.n());
  return true;
}

}  // namespace detail
}  // namespace npupack
