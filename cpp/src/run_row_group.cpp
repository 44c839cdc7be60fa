// row_group: a transposed pair whose short rows continue in the packed buffer through outer
// loops (plan_passes.cpp, group_transpose_rows) as one tall transpose over the plan's table of
// logical row offsets.
// Spec: docs/design.md §3.12 (the plan and the strategy list), §3.4 (strategies).
#include "npupack/transpose.hpp"
#include "strategies.hpp"
#include "walker.hpp"

namespace npupack {
namespace detail {

void run_row_group(Walker& w, int64_t loff, int64_t poff) {
  const Plan& P = w.P;
  const Loop& x = P.loops[P.loops.size() - 2];
  const int64_t psx = w.pstride(x);
  const int64_t rows = static_cast<int64_t>(P.row_off.size());  // every loop of the rows is exact
  if (P.to_packed) transpose_from_rows(w.lin + loff, P.row_off.data(), w.pout + poff, psx, rows, x.extent, P.eb);
  else transpose_to_cols(w.pin + poff, psx, w.lout + loff, P.row_off.data(), x.extent, rows, P.eb);
}

}  // namespace detail
}  // namespace npupack
