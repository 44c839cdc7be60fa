#include "npupack/pack.hpp"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <memory>
#include <string>

#include "npupack/checked.hpp"
#include "npupack/parallel.hpp"
#include "fill.hpp"
#include "peel.hpp"
#include "plan.hpp"
#include "strategies.hpp"
#include "walker.hpp"

// The fast path: the plan (plan.hpp: make_plan, kept per thread by cached_plan) and its strategy,
// the first of the ordered list (strategies.hpp) that applies; this file runs it. A ragged
// layout may run as two (peel.hpp). Spec: docs/design.md §3.12, §3.13.

namespace npupack {

using detail::check_args;
using detail::fill_holes;
using detail::cached_plan;
using detail::make_plan;
using detail::Plan;
using detail::Strategy;
using detail::Walker;

namespace {

// A layout built for one call (run_extended's extended layout) is planned without the per-thread
// caches: its new id would only push out the entries of layouts that are called again.
enum class Keep { kCached, kOnce };

void pack_as(Keep keep, const BlockedLayout& L, const char* logical, const std::vector<int64_t>& logical_strides,
             char* packed, int64_t packed_size, const char* pad) {
  check_args(L, logical_strides, packed_size);
  if (const auto peel = keep == Keep::kCached ? detail::cached_peel(L) : nullptr) {
    pack(peel->head, logical, logical_strides, packed, peel->tail_offset, pad);
    pack(peel->tail, logical + peel->tail_start * logical_strides[peel->dim], logical_strides,
         packed + peel->tail_offset, packed_size - peel->tail_offset, pad);
    return;
  }
  Plan once;
  const Plan& plan = keep == Keep::kCached ? cached_plan(L, logical_strides, true, pad)
                                           : (once = make_plan(L, logical_strides, true, pad));
  switch (plan.strategy->runs) {
    case Strategy::Runs::kExtended:
      return detail::pack_extended(L, logical, logical_strides, packed, packed_size, pad);
    case Strategy::Runs::kReference:
      fill_holes(L, packed, pad);
      return detail::run_reference_pack(L, logical, logical_strides, packed);
    case Strategy::Runs::kWalk:
      if (!plan.fills_holes) detail::fill_hole_blocks(L, packed, pad);
      return detail::run_walk(plan, logical, nullptr, nullptr, packed);
  }
}

void unpack_as(Keep keep, const BlockedLayout& L, const char* packed, int64_t packed_size, char* logical,
               const std::vector<int64_t>& logical_strides) {
  check_args(L, logical_strides, packed_size);
  if (const auto peel = keep == Keep::kCached ? detail::cached_peel(L) : nullptr) {
    unpack(peel->head, packed, peel->tail_offset, logical, logical_strides);
    unpack(peel->tail, packed + peel->tail_offset, packed_size - peel->tail_offset,
           logical + peel->tail_start * logical_strides[peel->dim], logical_strides);
    return;
  }
  Plan once;
  const Plan& plan =
      keep == Keep::kCached ? cached_plan(L, logical_strides, false) : (once = make_plan(L, logical_strides, false));
  switch (plan.strategy->runs) {
    case Strategy::Runs::kExtended:
      return detail::unpack_extended(L, packed, packed_size, logical, logical_strides);
    case Strategy::Runs::kReference:
      return detail::run_reference_unpack(L, packed, logical, logical_strides);
    case Strategy::Runs::kWalk:
      return detail::run_walk(plan, nullptr, logical, packed, nullptr);
  }
}

}  // namespace

void pack(const BlockedLayout& L, const char* logical, const std::vector<int64_t>& logical_strides,
          char* packed, int64_t packed_size, const char* pad) {
  pack_as(Keep::kCached, L, logical, logical_strides, packed, packed_size, pad);
}

namespace detail {

void pack_once(const BlockedLayout& L, const char* logical, const std::vector<int64_t>& logical_strides,
               char* packed, int64_t packed_size, const char* pad) {
  pack_as(Keep::kOnce, L, logical, logical_strides, packed, packed_size, pad);
}

void unpack_once(const BlockedLayout& L, const char* packed, int64_t packed_size, char* logical,
                 const std::vector<int64_t>& logical_strides) {
  unpack_as(Keep::kOnce, L, packed, packed_size, logical, logical_strides);
}

}  // namespace detail

constexpr int64_t kWatchSlabBytes = 32 * 1024;  // pack_checked: see there

bool pack_checked(const BlockedLayout& L, const char* logical, const std::vector<int64_t>& given_strides,
                  char* packed, int64_t packed_size, const char* pad, SlabCheck check, bool fp16_finite) {
  check_args(L, given_strides, packed_size);
  // C-contiguous strides, checked: the slabs rely on them. A dimension of extent 1 may have any
  // stride (NumPy's np.newaxis gives 0, and still calls the array C-contiguous); it never moves,
  // so it gets its C-contiguous stride here.
  std::vector<int64_t> logical_strides = given_strides;
  int64_t bytes = L.elem_bytes();
  for (size_t i = logical_strides.size(); i-- > 0;) {
    if (L.dims()[i].extent == 1) logical_strides[i] = bytes;
    if (logical_strides[i] != bytes) throw LayoutError("pack_checked: the logical tensor must be C-contiguous");
    bytes *= L.dims()[i].extent;
  }
  // The head and the tail of a peel along the slowest dim are C-contiguous themselves.
  if (const auto peel = detail::cached_peel(L); peel && peel->dim == 0) {
    const char* tail = logical + peel->tail_start * logical_strides[0];
    return pack_checked(peel->head, logical, logical_strides, packed, peel->tail_offset, pad, check, fp16_finite) &&
           pack_checked(peel->tail, tail, logical_strides, packed + peel->tail_offset, packed_size - peel->tail_offset,
                        pad, check, fp16_finite);
  }
  Plan bounced;
  const Plan& plan = detail::for_output(cached_plan(L, logical_strides, true, pad), packed, bounced);
  if (plan.strategy->runs == Strategy::Runs::kWalk) {
    if (plan.outer_slabs()) {
      if (!plan.fills_holes) detail::fill_hole_blocks(L, packed, pad);
      std::atomic<bool> ok{true}, covers{false};
      // The first slab is both checked and watched (below), so a tensor of one small slab is
      // only checked: watching it too would add work and save none. With two slabs or more,
      // watching pays even for slabs that fit in L1, where a separate check might seem cheaper
      // (docs/performance.md).
      const auto first = plan.outer_slab(0);
      const bool watch =
          fp16_finite && (plan.outer_steps() >= 2 || first.second - first.first >= kWatchSlabBytes);
      detail::for_outer_ranges(plan, [&](Walker& e, int64_t lo, int64_t hi) {
        // With fp16_finite the walker's row copies and transposes may test the slab as they
        // move it. The first slab is both checked and watched; if they covered it whole, the
        // later slabs (the same plan) are only watched, and any one they do not cover whole is
        // checked after it is packed. A range on another thread that starts once one slab was
        // found covered starts watching.
        enum { kProbe, kWatch, kCheck } mode = !watch ? kCheck : covers.load() ? kWatch : kProbe;
        e.watch_fp16(mode != kCheck);
        for (int64_t i = lo; i < hi && ok.load(std::memory_order_relaxed); ++i) {
          // Checked just before it is packed: the slab was prefetched while the previous one
          // was packed, so the check and the pack both read it from the caches. Checked after
          // packing, it would have partly left L2 for the next slab's prefetch (large slabs such
          // as 3x3 DC weights' kernel groups: the slab in, its output and the next slab share L2).
          const auto slab = plan.outer_slab(i);
          const int64_t size = slab.second - slab.first;
          if (mode != kWatch && !check(logical + slab.first, size)) {
            ok = false;
            return;
          }
          e.clear_watch();
          e.run_outer(i, i + 1, logical, nullptr, nullptr, packed);
          const bool covered = e.watched_bytes() == size;
          if (mode == kProbe) {
            mode = covered ? kWatch : kCheck;
            if (covered) covers = true;
            e.watch_fp16(mode == kWatch);
          } else if (mode == kWatch && (covered ? e.saw_nonfinite() : !check(logical + slab.first, size))) {
            ok = false;
            return;
          }
        }
      });
      return ok;
    }
  }
  if (!check(logical, bytes)) return false;
  pack(L, logical, logical_strides, packed, packed_size, pad);
  return true;
}

void unpack(const BlockedLayout& L, const char* packed, int64_t packed_size, char* logical,
            const std::vector<int64_t>& logical_strides) {
  unpack_as(Keep::kCached, L, packed, packed_size, logical, logical_strides);
}

void pack_many(const std::vector<PackJob>& jobs) {
  int64_t total = 0;
  for (const auto& j : jobs) {
    check_args(*j.layout, j.logical_strides, j.packed_size);
    total = checked_add(total, j.layout->nbytes(), "pack_many");
  }
  const int64_t n = static_cast<int64_t>(jobs.size());
  auto one = [&](int64_t i) {
    const auto& j = jobs[static_cast<size_t>(i)];
    pack(*j.layout, j.logical, j.logical_strides, j.packed, j.packed_size, nullptr);
    const int64_t used = j.layout->nbytes();
    if (j.packed_size > used) std::memset(j.packed + used, 0, static_cast<size_t>(j.packed_size - used));
  };
  const int64_t threads = num_threads();
  // Many layers: each thread takes the next unpacked layer (sizes differ by orders of
  // magnitude, so a fixed split would leave threads idle). Few layers: one after the other,
  // each big one splitting itself inside pack().
  if (total < kParallelBytes || threads < 2 || n < 2 * threads) {
    for (int64_t i = 0; i < n; ++i) one(i);
    return;
  }
  std::atomic<int64_t> next{0};
  parallel_for(threads, 1, [&](int64_t, int64_t) {
    for (int64_t i = next++; i < n; i = next++) one(i);
  });
}

}  // namespace npupack
