// The ordered strategy list (as oneDNN's list of reorder implementations): the first entry whose
// predicate holds runs the plan. Above a walk strategy's kernel the walk loops over the outer
// loops itself; the entries before `copy_runs` are faster special cases of it, and `reference`
// (one offset_of per element) closes the list.
// Spec: docs/design.md §3.12 (the plan and the strategy list).
#include "strategies.hpp"

#include <algorithm>
#include <string>

namespace npupack {
namespace detail {

namespace {

std::string kib(int64_t bytes) { return std::to_string(bytes >> 10) + " KiB"; }
std::string mib(int64_t bytes) { return std::to_string(bytes >> 20) + " MiB"; }
std::string none(const Plan&) { return ""; }

size_t n_of(const Plan& p) { return p.loops.size(); }

bool tiled_nest_applies(const Plan& p) {
  return p.takes && p.nest < n_of(p) && p.loops[n_of(p) - 2].extent > p.nest_tile();
}

std::string why_column_group(const Plan& p) {
  const int64_t rows = p.loops.back().extent, cols = static_cast<int64_t>(p.col_poff.size());
  return std::to_string(p.group) + " loops continue the logical-contiguous run: " + std::to_string(rows) + " rows x " +
         std::to_string(cols) + " columns in one transpose (groups up to " + kib(kGroupBytes) + ")";
}

std::string why_row_group(const Plan& p) {
  return "rows shorter than " + std::to_string(kShortRowBytes) + " bytes continue in the packed buffer: " +
         std::to_string(p.row_off.size()) + " rows in one transpose (aiming for " + std::to_string(kRowGroupBytes) +
         "-byte rows)";
}

std::string why_tile_blocks(const Plan& p) {
  const BlockedLayout& L = *p.layout;
  const size_t n = n_of(p);
  const Loop& b = p.loops[n - 3];
  const Loop& x = p.loops[n - 2];
  const Loop& in = p.loops[n - 1];
  const auto valid = [&](const Loop& lp) { return std::min(L.dims()[lp.dim].extent, lp.extent); };
  std::string why;
  const TileRule rule = tile_blocks_rule(p);
  if (rule == kSparseLarge) {
    why = "output " + mib(L.nbytes()) + " >= " + mib(kStreamBytes) + " and at most a quarter of each block valid";
  } else if (rule == kDenseWide) {
    why = "output " + mib(L.nbytes()) + " >= " + mib(kDenseTileBytes) + " and x spans a whole " +
          kib(kRowTileBytes) + " tile and 64 columns or more";
  } else {
    why = "at most 1/8 of the inner block valid (" + std::to_string(valid(in)) + " of " +
          std::to_string(in.extent) + ")";
  }
  why += "; blocks of " + std::to_string(x.pstep) + " bytes built per tile";
  if (L.nbytes() >= kStreamBytes) why += ", streamed out (output >= " + mib(kStreamBytes) + ")";
  if (b.exact && 8 * valid(in) <= in.extent) {
    why += "; rows scattered into the blocks";
    if (p.zero_pad()) why += " (spread_blocks where a block has one valid row)";
  }
  return why;
}

std::string why_tiled_nest(const Plan& p) {
  const Loop& x = p.loops[n_of(p) - 2];
  return std::to_string(n_of(p) - 2 - p.nest) + " loops outside the pair write inside its " + std::to_string(x.pstep) +
         "-byte blocks: the nest runs per tile of " + std::to_string(p.nest_tile()) + " columns (" + kib(kTileBytes) +
         " of packed range)";
}

std::string why_stream(const Plan& p) {
  if (!p.stream) return "";
  if (p.stream_lines) {
    return "output " + mib(p.layout->nbytes()) + " >= " + mib(kStreamLinesBytes) + ": streaming stores of whole lines";
  }
  return "output " + mib(p.layout->nbytes()) + " >= " + mib(kStreamTransposeBytes) + ": streaming stores";
}

std::string why_copy_rows(const Plan& p) {
  const Loop& in = p.loops.back();
  std::string why = "rows of " + std::to_string(in.extent * p.eb) + " bytes";
  if (p.row_gaps) why += ", the gap after each row zeroed (the only holes)";
  return why;
}

const std::vector<Strategy> kList = {
    {"extended", [](const Plan& p) { return !p.takes; }, Strategy::Runs::kExtended, nullptr, nullptr,
     "a swizzled dim with a partial block: packed through a copy extended to whole blocks", none},
    {"single_run", [](const Plan& p) { return p.takes && n_of(p) == 1; }, Strategy::Runs::kWalk, run_single_run,
     run_copy_runs, "one loop left: one copy of a run of elements", none},
    {"column_group", [](const Plan& p) { return p.takes && p.group > 1; }, Strategy::Runs::kWalk, run_column_group,
     run_copy_runs, "one wide transpose per step, its packed columns from a table of offsets", why_column_group},
    {"row_group", [](const Plan& p) { return p.takes && !p.row_off.empty(); }, Strategy::Runs::kWalk, nullptr,
     run_row_group, "one tall transpose per step, its logical rows from a table of offsets", why_row_group},
    {"tile_blocks", [](const Plan& p) { return p.takes && p.tiles; }, Strategy::Runs::kWalk, run_tile_blocks,
     run_transpose, "whole packed blocks built per tile of x in a buffer, holes filled once, then copied out",
     why_tile_blocks},
    {"tiled_nest", tiled_nest_applies, Strategy::Runs::kWalk, run_tiled_nest, run_transpose,
     "the loops outside the pair run once per tile of x, each a transpose", why_tiled_nest},
    {"batch_pairs", batch_pairs_applies, Strategy::Runs::kWalk, run_batch_pairs, run_transpose,
     "the loop outside the pair as one batched transpose (kernel chosen once per batch)", why_stream},
    {"transpose", [](const Plan& p) { return p.takes && p.transpose; }, Strategy::Runs::kWalk, nullptr, run_transpose,
     "one 2-D transpose per step of the outer loops", why_stream},
    {"copy_rows", [](const Plan& p) { return p.takes && copy_rows_applies(p); }, Strategy::Runs::kWalk, nullptr,
     run_copy_rows, "rows contiguous on both sides, one constant-size copy per row", why_copy_rows},
    {"copy_runs", [](const Plan& p) { return p.takes; }, Strategy::Runs::kWalk, nullptr, run_copy_runs,
     "runs of elements strided on either side, one copy per step", none},
    {"reference", [](const Plan&) { return true; }, Strategy::Runs::kReference, nullptr, nullptr,
     "one offset_of per element", none},
};

}  // namespace

const std::vector<Strategy>& strategies() { return kList; }

const Strategy& choose_strategy(const Plan& p) {
  for (const Strategy& s : kList) {
    if (s.applies(p)) return s;
  }
  return kList.back();
}

}  // namespace detail
}  // namespace npupack
