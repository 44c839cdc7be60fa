#include "npupack/pack.hpp"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <memory>
#include <string>

#include "npupack/checked.hpp"
#include "npupack/errors.hpp"
#include "executor.hpp"
#include "npupack/parallel.hpp"

namespace npupack {

namespace {

using detail::Executor;

void check_args(const BlockedLayout& L, const std::vector<int64_t>& logical_strides, int64_t packed_size) {
  if (logical_strides.size() != L.dims().size()) {
    throw LayoutError("logical tensor has " + std::to_string(logical_strides.size()) +
                      " dimensions, the layout has " + std::to_string(L.dims().size()));
  }
  if (packed_size < L.nbytes()) {
    throw LayoutError("packed buffer holds " + std::to_string(packed_size) + " bytes, the layout needs " +
                      std::to_string(L.nbytes()));
  }
}

// `bytes` bytes of the element pattern `pad` (eb bytes; nullptr: zero).
void fill_pad(char* p, int64_t bytes, int64_t eb, const char* pad) {
  const bool zero = pad == nullptr || std::all_of(pad, pad + eb, [](char c) { return c == 0; });
  if (zero) {
    std::memset(p, 0, static_cast<size_t>(bytes));
    return;
  }
  for (int64_t off = 0; off < bytes; off += eb) std::memcpy(p + off, pad, static_cast<size_t>(eb));
}

void fill_holes(const BlockedLayout& L, char* packed, const char* pad) {
  if (L.has_holes()) fill_pad(packed, L.nbytes(), L.elem_bytes(), pad);
}

// Calls f(logical byte offset, index) for every logical index, last dim fastest.
template <class F>
void for_each_index(const BlockedLayout& L, const std::vector<int64_t>& logical_strides, F f) {
  const auto& dims = L.dims();
  std::vector<int64_t> idx(dims.size(), 0);
  for (int64_t e = 0; e < L.elements(); ++e) {
    int64_t loff = 0;
    for (size_t i = 0; i < dims.size(); ++i) loff += idx[i] * logical_strides[i];
    f(loff, idx.data());
    for (size_t i = dims.size(); i-- > 0;) {
      if (++idx[i] < dims[i].extent) break;
      idx[i] = 0;
    }
  }
}

// Large layouts with an independent outermost loop are split across threads.
bool split_outer(const BlockedLayout& L, const Executor& ex) {
  return ex.outer_steps() >= 2 && L.nbytes() >= kParallelBytes && num_threads() >= 2;
}

// Runs f(executor, lo, hi) over ranges of the outermost loop's iterations: all on this thread
// unless split_outer, else each range on its own thread and its own copy of the executor (the
// copies share nothing they write; the element slots of different iterations are disjoint).
template <class F>
void for_outer_ranges(const BlockedLayout& L, Executor& ex, F f) {
  const int64_t steps = ex.outer_steps();
  if (!split_outer(L, ex)) return f(ex, 0, steps);
  const int64_t grain = std::max<int64_t>(1, steps * (kParallelBytes / 2) / L.nbytes());
  parallel_for(steps, grain, [&](int64_t lo, int64_t hi) {
    Executor e(ex);
    f(e, lo, hi);
  });
}

// The whole layout, its outer loop split across threads when it is large and that loop is
// independent.
void run_parallel(const BlockedLayout& L, Executor& ex, const char* lin, char* lout, const char* pin, char* pout) {
  if (!split_outer(L, ex)) return ex.run(lin, lout, pin, pout);
  for_outer_ranges(L, ex, [&](Executor& e, int64_t lo, int64_t hi) { e.run_outer(lo, hi, lin, lout, pin, pout); });
}

// Swizzled layouts (clDNN's *_swizzled_by_N). The executor's loops take a dim's digits in any
// order, but its clipping of partial blocks assumes nested digits. A swizzled dim stored as
// whole blocks needs no clipping. A layout with a partial swizzled dim is run through a copy of
// the logical tensor extended to whole blocks along those dims and filled with the pad value:
// the extended layout gives every element the address the original gives it, and its extra
// elements fall exactly on the holes.
bool executor_takes(const BlockedLayout& L) {
  for (size_t d = 0; d < L.dims().size(); ++d) {
    if (L.swizzled(d) && !L.whole_blocks(d)) return false;
  }
  return true;
}

struct Extended {
  BlockedLayout layout;          // the extended layout
  BlockedLayout window;          // the original extents inside the extended tensor (its strides)
  std::vector<int64_t> strides;  // C-contiguous byte strides of the extended tensor
  int64_t base;                  // byte offset of the original index 0 in it
  int64_t bytes;                 // its size
};

Extended extend(const BlockedLayout& L) {
  const int64_t eb = L.elem_bytes();
  const size_t n = L.dims().size();
  std::vector<DimSpec> dims = L.dims(), window(n);
  std::vector<int64_t> strides(n);
  int64_t bytes = eb, base = 0;
  for (size_t d = n; d-- > 0;) {
    DimSpec& s = dims[d];
    window[d].name = s.name;
    window[d].extent = s.extent;
    strides[d] = bytes;
    if (L.swizzled(d) && !L.whole_blocks(d)) {
      const int64_t block = L.tile_product(d);
      base = checked_add(base, checked_mul(s.pad_lo, bytes, "extended size"), "extended size");
      s.extent = checked_mul(ceil_div(s.storage, block), block, "extended size");
      s.pad_lo = 0;
      s.storage = 0;
    }
    bytes = checked_mul(bytes, s.extent, "extended size");
  }
  // The same nest and strides (explicit ones do not mix with ragged dims; derived ones come out
  // the same, as every outer count is unchanged).
  std::vector<AxisSpec> order, window_order;
  for (const auto& ax : L.axes()) order.push_back(AxisSpec{ax.dim, ax.level, L.ragged() ? 0 : ax.stride});
  for (size_t d = 0; d < n; ++d) window_order.push_back(AxisSpec{static_cast<int>(d), 0, strides[d]});
  return Extended{BlockedLayout(dims, order, eb), BlockedLayout(window, window_order, eb), strides, base, bytes};
}

void pack_extended(const BlockedLayout& L, const char* logical, const std::vector<int64_t>& logical_strides,
                   char* packed, int64_t packed_size, const char* pad) {
  const Extended e = extend(L);
  std::unique_ptr<char[]> ext(new char[static_cast<size_t>(e.bytes)]);
  fill_pad(ext.get(), e.bytes, L.elem_bytes(), pad);
  Executor copy(e.window, logical_strides, true);
  run_parallel(e.window, copy, logical, nullptr, nullptr, ext.get() + e.base);
  pack(e.layout, ext.get(), e.strides, packed, packed_size, pad);
}

void unpack_extended(const BlockedLayout& L, const char* packed, int64_t packed_size, char* logical,
                     const std::vector<int64_t>& logical_strides) {
  const Extended e = extend(L);
  std::unique_ptr<char[]> ext(new char[static_cast<size_t>(e.bytes)]);
  unpack(e.layout, packed, packed_size, ext.get(), e.strides);
  Executor copy(e.window, logical_strides, false);
  run_parallel(e.window, copy, nullptr, logical, ext.get() + e.base, nullptr);
}

}  // namespace

void pack(const BlockedLayout& L, const char* logical, const std::vector<int64_t>& logical_strides,
          char* packed, int64_t packed_size, const char* pad) {
  check_args(L, logical_strides, packed_size);
  if (!executor_takes(L)) return pack_extended(L, logical, logical_strides, packed, packed_size, pad);
  Executor ex(L, logical_strides, true, pad);
  if (!ex.fills_holes()) fill_holes(L, packed, pad);
  run_parallel(L, ex, logical, nullptr, nullptr, packed);
}

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
  if (executor_takes(L)) {
    Executor ex(L, logical_strides, true, pad);
    if (ex.outer_slabs()) {
      if (!ex.fills_holes()) fill_holes(L, packed, pad);
      std::atomic<bool> ok{true}, covers{false};
      // The first slab is both checked and watched (below), so a tensor of one small slab is
      // only checked: watching it too would add work and save none. With two slabs or more,
      // watching pays even for slabs that fit in L1, where a separate check might seem cheaper
      // (docs/performance.md).
      const auto first = ex.outer_slab(0);
      const bool watch =
          fp16_finite && (ex.outer_steps() >= 2 || first.second - first.first >= kWatchSlabBytes);
      for_outer_ranges(L, ex, [&](Executor& e, int64_t lo, int64_t hi) {
        // With fp16_finite the executor's row copies and transposes may test the slab as they
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
          const auto slab = e.outer_slab(i);
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
  check_args(L, logical_strides, packed_size);
  if (!executor_takes(L)) return unpack_extended(L, packed, packed_size, logical, logical_strides);
  Executor ex(L, logical_strides, false);
  run_parallel(L, ex, nullptr, logical, packed, nullptr);
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

void pack_reference(const BlockedLayout& L, const char* logical, const std::vector<int64_t>& logical_strides,
                    char* packed, int64_t packed_size, const char* pad) {
  check_args(L, logical_strides, packed_size);
  fill_holes(L, packed, pad);
  const size_t eb = static_cast<size_t>(L.elem_bytes());
  for_each_index(L, logical_strides, [&](int64_t loff, const int64_t* idx) {
    std::memcpy(packed + L.offset_of(idx), logical + loff, eb);
  });
}

void unpack_reference(const BlockedLayout& L, const char* packed, int64_t packed_size, char* logical,
                      const std::vector<int64_t>& logical_strides) {
  check_args(L, logical_strides, packed_size);
  const size_t eb = static_cast<size_t>(L.elem_bytes());
  for_each_index(L, logical_strides, [&](int64_t loff, const int64_t* idx) {
    std::memcpy(logical + loff, packed + L.offset_of(idx), eb);
  });
}

}  // namespace npupack
