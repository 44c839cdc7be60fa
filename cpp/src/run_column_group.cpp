// column_group: the innermost loop and the group of loops that continue the logical-contiguous
// run (plan_passes.cpp, group_transpose_columns) as one wide transpose whose packed columns are
// found through the plan's table of offsets.
// Spec: docs/design.md §3.12 (the plan and the strategy list), §3.4 (strategies).
#include "npupack/transpose.hpp"
#include "strategies.hpp"
#include "walker.hpp"

namespace npupack {
namespace detail {

bool run_column_group(Walker& w, size_t li, int64_t loff, int64_t poff) {
  const Plan& P = w.P;
  if (li + 1 + P.group != P.loops.size()) return false;
  const Loop& in = P.loops.back();
  const Walker::Range rin = w.range(in);
  const int64_t rows = rin.n();
  // The group's slowest loop comes first; clipped (group_transpose_columns), its valid digits
  // are a prefix and so are their columns.
  const Loop& slowest = P.loops[li];
  const int64_t per_digit = static_cast<int64_t>(P.col_poff.size()) / slowest.extent;
  const int64_t cols = slowest.exact ? per_digit * slowest.extent : per_digit * w.range(slowest).n();
  loff += rin.lo * in.lstep;
  poff += rin.lo * P.eb;
  if (P.to_packed) {
    transpose_to_cols(w.lin + loff, in.lstep, w.pout + poff, P.col_poff.data(), rows, cols, P.eb, P.stream);
  } else {
    transpose_from_rows(w.pin + poff, P.col_poff.data(), w.lout + loff, in.lstep, cols, rows, P.eb);
  }
  return true;
}

}  // namespace detail
}  // namespace npupack
