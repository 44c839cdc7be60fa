// Plan::describe: the plan as text, for `npupack explain --plan` and the tests.
// Spec: docs/design.md §3.12 (the plan and the strategy list).
#include <sstream>

#include "npupack/pack.hpp"

#include "npupack/parallel.hpp"
#include "peel.hpp"
#include "plan.hpp"
#include "strategies.hpp"

namespace npupack {
namespace detail {

namespace {

std::string axis_name(const BlockedLayout& L, int a) {
  const auto& ax = L.axes()[static_cast<size_t>(a)];
  const auto& d = L.dims()[static_cast<size_t>(ax.dim)];
  const std::string name = d.name.empty() ? "dim" + std::to_string(ax.dim) : d.name;
  if (ax.level == 0) return d.tiles.empty() ? name : name + "/outer";
  return name + "%" + std::to_string(d.tiles[static_cast<size_t>(ax.level - 1)]);
}

// The layout axes a loop runs, merged ones joined by '*' (extent-1 axes left out).
std::string loop_name(const Plan& p, const Loop& lp) {
  std::string name;
  for (int a = lp.first_axis; a <= lp.axis; ++a) {
    if (a != lp.axis && p.layout->axes()[static_cast<size_t>(a)].extent == 1) continue;
    name += (name.empty() ? "" : "*") + axis_name(*p.layout, a);
  }
  return name;
}

// The part a loop plays in the strategy's kernel.
std::string role(const Plan& p, size_t i) {
  const size_t n = p.loops.size();
  if (p.group > 1 && i + 1 + p.group >= n) return i + 1 == n ? "rows" : "column group";
  if (p.transpose && i + 2 == n) return "pair x (logical-contiguous)";
  if (p.transpose && i + 1 == n) return p.row_off.empty() ? "pair rows (packed-contiguous)" : "row group";
  if (p.tiles && i + 3 == n) return "block rows (tile_blocks)";
  if (p.nest < n && i >= p.nest && i + 2 < n) return "tiled nest";
  return "";
}

}  // namespace

std::string Plan::describe() const {
  const BlockedLayout& L = *layout;
  std::ostringstream o;
  o << (to_packed ? "pack" : "unpack") << " plan: " << L.elements() << " elements of " << L.elem_bytes()
    << " bytes into " << L.nbytes() << " packed bytes";
  if (eb != L.elem_bytes()) o << " (moved as " << eb << "-byte elements)";
  o << "\n";
  const auto& list = strategies();
  size_t pos = 0;
  while (pos < list.size() && &list[pos] != strategy) ++pos;
  o << "strategy: " << strategy->name << " (entry " << pos + 1 << " of " << list.size() << ": ";
  for (size_t i = 0; i < list.size(); ++i) o << (i ? ", " : "") << list[i].name;
  o << ")\n  " << strategy->what << "\n";
  const std::string why = strategy->why(*this);
  if (!why.empty()) o << "  why: " << why << "\n";
  if (!takes) {
    o << "extended layout's plan:\n";
    std::istringstream inner(describe_extended(L, to_packed, has_pad ? pad : nullptr));
    for (std::string line; std::getline(inner, line);) o << "  " << line << "\n";
    return o.str();
  }
  o << "loops (outer to inner): extent, logical step and packed step in bytes\n";
  for (size_t i = 0; i < loops.size(); ++i) {
    const Loop& lp = loops[i];
    o << "  " << i << ": " << loop_name(*this, lp) << "  extent " << lp.extent << "  logical " << lp.lstep
      << "  packed " << lp.pstep << (L.ragged() ? " (full blocks)" : "");
    if (!lp.exact) o << "  (clipped to the logical extent)";
    const std::string r = role(*this, i);
    if (!r.empty()) o << "  [" << r << "]";
    o << "\n";
  }
  o << "options:\n";
  if (to_packed) {
    o << "  holes: " << (!L.has_holes() ? "none" : fills_holes ? "written by the plan" : "filled before the walk")
      << ", pad " << (zero_pad() ? "zero" : "non-zero") << "\n";
  }
  // tile_blocks streams its tiles out from kStreamBytes on; the transposes as the plan chose (stream).
  const bool streams = stream || (tiles && L.nbytes() >= kStreamBytes);
  o << "  streaming stores: "
    << (!streams         ? "no"
        : stream_lines ? "yes, in whole 64-byte lines where the output is line-aligned"
                       : "yes")
    << "\n";
  if (bounce != 0) {
    int64_t slab = eb;
    for (size_t j = bounce + 1; j < loops.size(); ++j) slab *= loops[j].extent;
    o << "  " << (bounce_lines ? "any output" : "output not on a 64-byte line") << ": each step of loop " << bounce
      << " (" << slab << " bytes) packed in a line-aligned buffer, then streamed out\n";
  }
  // Only the row copies and the batched transposes take the range the walk hands them.
  const std::string name = strategy->name;
  const bool taken = prefetch_slabs && (name == "copy_rows" || name == "batch_pairs");
  o << "  prefetch of the next outer slab: " << (taken ? "yes" : "no") << "\n";
  if (nest < loops.size() && loops.size() >= 2) o << "  x tile: " << nest_tile() << " columns\n";
  const int64_t steps = outer_steps();
  if (split) {
    o << "  threads: " << threads << " (outer loop of " << steps << " steps in ranges of " << grain
      << " or more: output >= " << (kParallelBytes >> 20) << " MiB)\n";
  } else {
    o << "  threads: 1" << (steps >= 2 ? " (output below the threading size or one thread allowed)" : "") << "\n";
  }
  if (to_packed) {
    o << "  fp16 INF/NaN check (pack_checked): "
      << (outer_slabs() ? (eb == 2 ? "per outer slab, fused into the moves where they test"
                                   : "per outer slab, before it is packed")
                        : "one pass over the whole tensor first")
      << "\n";
  }
  return o.str();
}

}  // namespace detail

std::string describe_plan(const BlockedLayout& L, bool to_packed, const char* pad) {
  if (to_packed == false) pad = nullptr;
  std::string text = detail::make_plan(L, detail::c_strides(L), to_packed, pad).describe();
  if (const auto peel = detail::cached_peel(L)) {
    const auto& d = L.dims()[static_cast<size_t>(peel->dim)];
    const std::string name = d.name.empty() ? "dim" + std::to_string(peel->dim) : d.name;
    text += "peeled (docs/design.md §3.13): runs instead as " + name + "'s full blocks [0, " +
            std::to_string(peel->tail_start) + ") and its short block [" + std::to_string(peel->tail_start) + ", " +
            std::to_string(d.extent) + "), two layouts with plans of their own: strategies " +
            detail::make_plan(peel->head, detail::c_strides(peel->head), to_packed, pad).strategy->name + " and " +
            detail::make_plan(peel->tail, detail::c_strides(peel->tail), to_packed, pad).strategy->name + "\n";
  }
  return text;
}

std::string plan_strategy(const BlockedLayout& L, bool to_packed, const char* pad) {
  return detail::make_plan(L, detail::c_strides(L), to_packed, to_packed ? pad : nullptr).strategy->name;
}

std::vector<std::string> plan_strategies() {
  std::vector<std::string> names;
  for (const auto& s : detail::strategies()) names.emplace_back(s.name);
  return names;
}

}  // namespace npupack
