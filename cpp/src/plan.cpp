// make_plan: a layout and the logical tensor's strides as loops, simplified by the planning
// passes (plan_passes.cpp), with the strategy taken from the ordered list (strategies.cpp).
// Spec: docs/design.md §3.12 (the plan and the strategy list), §3.2 (from a descriptor to a loop nest).
#include "plan.hpp"

#include <algorithm>
#include <cstring>

#include "npupack/checked.hpp"
#include "npupack/parallel.hpp"
#include "npupack/transpose.hpp"
#include "strategies.hpp"

namespace npupack {
namespace detail {

namespace {

template <int EB>
struct Elem;
template <> struct Elem<1> { using T = uint8_t; };
template <> struct Elem<2> { using T = uint16_t; };
template <> struct Elem<4> { using T = uint32_t; };
template <> struct Elem<8> { using T = uint64_t; };

template <int EB>
void copy_run(const char* src, int64_t sstep, char* dst, int64_t dstep, int64_t n) {
  using T = typename Elem<EB>::T;
  if (sstep == EB && dstep == EB) {
    std::memcpy(dst, src, static_cast<size_t>(n) * EB);
    return;
  }
  // memcpy of one element compiles to a plain load/store and avoids alignment assumptions.
  for (int64_t i = 0; i < n; ++i) {
    T v;
    std::memcpy(&v, src + i * sstep, EB);
    std::memcpy(dst + i * dstep, &v, EB);
  }
}

bool c_contiguous(const BlockedLayout& L, const std::vector<int64_t>& strides) {
  int64_t bytes = L.elem_bytes();
  for (size_t i = strides.size(); i-- > 0;) {
    if (strides[i] != bytes) return false;
    bytes *= L.dims()[i].extent;
  }
  return true;
}

}  // namespace

RunFn run_for(int64_t eb) {
  switch (eb) {
    case 1: return copy_run<1>;
    case 2: return copy_run<2>;
    case 4: return copy_run<4>;
    default: return copy_run<8>;
  }
}

bool Plan::zero_pad() const {
  if (!has_pad) return true;
  for (int64_t i = 0; i < eb; ++i) {
    if (pad[i] != 0) return false;
  }
  return true;
}

int64_t Plan::logical_bytes() const {
  int64_t bytes = layout->elem_bytes();
  for (const auto& d : layout->dims()) bytes *= d.extent;
  return bytes;
}

int64_t Plan::outer_steps() const {
  const size_t n = loops.size();
  if (!takes || n < 3 || (group > 1 && 1 + group >= n) || (tiles && n == 3)) return 0;  // tile_blocks runs loops[0]
  return loops[0].extent;
}

// The loop is the outer count of its slowest dim (DC weights: one kernel group per step), or of
// a dim that only dims of extent 1 precede or that the slower dims were merged into (feature
// data: one surface of C-blocks per step), unless `slowest` asks for the first case.
bool Plan::outer_slabs(bool slowest) const {
  if (outer_steps() == 0) return false;
  const Loop& lp = loops[0];
  if (layout->axes()[lp.axis].level != 0 || layout->dims()[lp.dim].pad_lo != 0) return false;
  if (lp.dim == 0) return true;
  if (slowest) return false;
  bool ones = true;
  for (int d = 0; d < lp.dim; ++d) ones = ones && layout->dims()[d].extent == 1;
  return ones || (lp.exact && lp.extent * lp.lstep == logical_bytes());
}

// Empty for an iteration that holds only padding.
std::pair<int64_t, int64_t> Plan::outer_slab(int64_t i) const {
  const Loop& lp = loops[0];
  const int64_t end = logical_bytes();
  return {std::min(i * lp.lstep, end), std::min((i + 1) * lp.lstep, end)};
}

int64_t Plan::nest_tile() const {
  const Loop& x = loops[loops.size() - 2];
  return std::max<int64_t>(16, kTileBytes / x.pstep);
}

Plan make_plan(const BlockedLayout& L, const std::vector<int64_t>& logical_strides, bool to_packed, const char* pad) {
  Plan p;
  p.layout = &L;
  p.to_packed = to_packed;
  p.eb = L.elem_bytes();
  p.run = run_for(p.eb);
  p.has_pad = pad != nullptr;
  p.takes = walk_takes(L);
  const auto& axes = L.axes();
  const auto& dims = L.dims();
  std::vector<int64_t> padded(dims.size(), 1);
  for (const auto& ax : axes) padded[ax.dim] *= ax.extent;
  for (size_t a = 0; a < axes.size(); ++a) {
    const auto& ax = axes[a];
    const auto& d = dims[ax.dim];
    const bool exact = !d.ragged && d.pad_lo == 0 && padded[ax.dim] == d.extent;
    // A loop of extent 1 always sits at index 0: it moves nothing and would only hide the
    // loops around it from merging and pairing (a single component read as a strided view).
    if (ax.extent == 1 && exact) continue;
    p.loops.push_back(Loop{static_cast<int>(a), ax.dim, ax.extent, ax.weight, ax.weight * logical_strides[ax.dim],
                           ax.stride, exact, static_cast<int>(a)});
  }
  if (p.loops.empty()) {
    const auto& ax = axes.back();
    const int a = static_cast<int>(axes.size() - 1);
    p.loops.push_back(Loop{a, ax.dim, 1, ax.weight, ax.weight * logical_strides[ax.dim], ax.stride, true, a});
  }
  // Offsets are kept relative to padded coordinates; element (p - pad_lo) is logical index 0.
  for (size_t i = 0; i < dims.size(); ++i) p.origin -= dims[i].pad_lo * logical_strides[i];
  if (p.takes) {
    merge_contiguous(p);
    widen_elements(p);
    // The pad value, repeated to the (widened) element size.
    if (p.has_pad) {
      for (int64_t i = 0; i < p.eb; ++i) p.pad[i] = pad[i % L.elem_bytes()];
    }
    p.transpose = move_transpose_partner(p);
    // The column grouping, the row tables and the tiled plans run x over its whole extent.
    const bool whole_x = p.transpose && p.loops[p.loops.size() - 2].exact;
    if (whole_x && !L.ragged()) group_transpose_columns(p);
    if (whole_x && !L.ragged() && p.group < 2) group_transpose_rows(p);
    p.tiles = whole_x && tile_blocks_rule(p) != kNoTiles;
    p.nest = whole_x ? plan_tiled_nest(p) : p.loops.size();
    p.prefetch_slabs = to_packed && p.outer_slabs(true) && c_contiguous(L, logical_strides);
    // Outputs this large do not stay in the caches for a reader anyway; streamed where the pair's
    // kernel pays for it (transpose_streaming): in whole lines from kStreamLinesBytes, matrix by
    // matrix from kStreamTransposeBytes (docs/performance.md §6).
    if (to_packed && L.nbytes() >= kStreamLinesBytes) {
      Streaming how = Streaming::kPerMatrix;
      if (p.plain_pair()) {
        const Loop& x = p.loops[p.loops.size() - 2];
        const Loop& in = p.loops.back();
        how = transpose_streaming(in.lstep, x.pstep, in.extent, x.extent, p.eb);
      } else if (p.group >= 2 && p.eb == 4 && p.loops.back().extent == 16 &&
                 std::all_of(p.col_poff.begin(), p.col_poff.end(), [](int64_t o) { return o % 64 == 0; })) {
        how = Streaming::kWholeLines;  // 64-byte columns from the table (transpose_to_cols' stream)
      } else if (!p.transpose && p.loops.size() >= 2 && (p.loops.back().extent * p.eb) % 64 == 0 &&
                 p.loops.back().extent * p.eb <= 128 && p.loops[p.loops.size() - 2].pstep % 64 == 0) {
        how = Streaming::kWholeLines;  // rows of whole lines (run_copy_rows)
      }
      p.stream_lines = how == Streaming::kWholeLines;
      p.stream = p.stream_lines || (how == Streaming::kPerMatrix && L.nbytes() >= kStreamTransposeBytes);
    }
    p.fills_holes = to_packed && plan_fills_holes(p);
    split_pair_for_threads(p);
    // Large layouts with an independent outermost loop are split across threads, in ranges of
    // about half of kParallelBytes of output (parallel_for then uses as many threads as there are
    // such ranges, up to num_threads).
    const int64_t steps = p.outer_steps();
    p.split = steps >= 2 && L.nbytes() >= kParallelBytes && num_threads() >= 2;
    if (p.split) {
      p.grain = std::max<int64_t>(1, steps * (kParallelBytes / 2) / L.nbytes());
      p.threads = std::min<int64_t>(num_threads(), steps / p.grain);
    }
  } else if (p.has_pad) {
    for (int64_t i = 0; i < p.eb; ++i) p.pad[i] = pad[i];
  }
  p.strategy = &choose_strategy(p);
  // Whole rows stream only where the row copies run them (run_copy_rows), between plain gaps never.
  if (p.stream_lines && !p.transpose && (std::strcmp(p.strategy->name, "copy_rows") != 0 || p.row_gaps)) {
    p.stream = p.stream_lines = false;
  }
  if (p.stream) p.bounce = plan_bounce(p);
  p.bounce_lines = bounce_lines(p);
  // Without the slab prefetch, the rotation kernels of a batched transpose prefetch each
  // matrix's successor (the same kernel's next channel block) instead.
  if (p.prefetch_slabs && std::strcmp(p.strategy->name, "batch_pairs") == 0 &&
      p.loops[0].lstep > kPrefetchSlabBytes) {
    p.prefetch_slabs = false;
  }
  return p;
}

std::vector<int64_t> c_strides(const BlockedLayout& L) {
  std::vector<int64_t> strides(L.dims().size());
  int64_t bytes = L.elem_bytes();
  for (size_t i = strides.size(); i-- > 0;) {
    strides[i] = bytes;
    bytes *= L.dims()[i].extent;
  }
  return strides;
}

// A compiler or a runtime packs the same layer shapes again and again, and for a small tensor
// planning is a large share of the call.
const Plan& cached_plan(const BlockedLayout& L, const std::vector<int64_t>& logical_strides, bool to_packed,
                        const char* pad) {
  struct Entry {
    uint64_t id = 0;  // 0: empty
    bool to_packed = false;
    bool has_pad = false;
    char pad[8] = {};
    int64_t threads = 0;
    std::vector<int64_t> strides;
    Plan plan;
  };
  constexpr size_t kEntries = 8;
  thread_local Entry cache[kEntries];
  thread_local size_t next = 0;
  const int64_t eb = L.elem_bytes();
  const int64_t threads = num_threads();
  for (Entry& e : cache) {
    if (e.id == L.id() && e.to_packed == to_packed && e.has_pad == (pad != nullptr) && e.threads == threads &&
        e.strides == logical_strides && (pad == nullptr || std::memcmp(e.pad, pad, eb) == 0)) {
      e.plan.layout = &L;  // a copy of the layout it was made for
      return e.plan;
    }
  }
  Entry& e = cache[next];
  next = (next + 1) % kEntries;
  e.id = 0;  // empty while the plan is made (make_plan may throw)
  e.plan = make_plan(L, logical_strides, to_packed, pad);
  e.to_packed = to_packed;
  e.has_pad = pad != nullptr;
  if (pad != nullptr) std::memcpy(e.pad, pad, eb);
  e.threads = threads;
  e.strides = logical_strides;
  e.id = L.id();
  return e.plan;
}

}  // namespace detail
}  // namespace npupack
