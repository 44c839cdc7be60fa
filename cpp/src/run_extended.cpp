// extended: swizzled layouts (clDNN's *_swizzled_by_N). The walk's loops take a dim's digits in
// any order, but its clipping of partial blocks assumes nested digits. A swizzled dim stored as
// whole blocks needs no clipping. A layout with a partial swizzled dim is run through a copy of
// the logical tensor extended to whole blocks along those dims and filled with the pad value:
// the extended layout gives every element the address the original gives it, and its extra
// elements fall exactly on the holes.
// Spec: docs/design.md §3.12 (the plan and the strategy list), §3.6 (ragged and swizzled layouts).
#include <memory>

#include "npupack/checked.hpp"
#include "npupack/pack.hpp"
#include "fill.hpp"
#include "strategies.hpp"
#include "walker.hpp"

namespace npupack {
namespace detail {

bool walk_takes(const BlockedLayout& L) {
  for (size_t d = 0; d < L.dims().size(); ++d) {
    if (L.swizzled(d) && !L.whole_blocks(d)) return false;
  }
  return true;
}

namespace {

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

// The copy between the caller's tensor and the window of the extended one. Its buffer is filled
// with the pad value already, so the copy must not zero gaps between its rows itself.
Plan window_plan(const Extended& e, const std::vector<int64_t>& logical_strides, bool to_packed) {
  Plan p = make_plan(e.window, logical_strides, to_packed);
  p.row_gaps = false;
  return p;
}

}  // namespace

void pack_extended(const BlockedLayout& L, const char* logical, const std::vector<int64_t>& logical_strides,
                   char* packed, int64_t packed_size, const char* pad) {
  const Extended e = extend(L);
  std::unique_ptr<char[]> ext(new char[static_cast<size_t>(e.bytes)]);
  fill_pad(ext.get(), e.bytes, L.elem_bytes(), pad);
  run_walk(window_plan(e, logical_strides, true), logical, nullptr, nullptr, ext.get() + e.base);
  pack_once(e.layout, ext.get(), e.strides, packed, packed_size, pad);
}

void unpack_extended(const BlockedLayout& L, const char* packed, int64_t packed_size, char* logical,
                     const std::vector<int64_t>& logical_strides) {
  const Extended e = extend(L);
  std::unique_ptr<char[]> ext(new char[static_cast<size_t>(e.bytes)]);
  unpack_once(e.layout, packed, packed_size, ext.get(), e.strides);
  run_walk(window_plan(e, logical_strides, false), nullptr, logical, ext.get() + e.base, nullptr);
}

std::string describe_extended(const BlockedLayout& L, bool to_packed, const char* pad) {
  const Extended e = extend(L);
  return make_plan(e.layout, e.strides, to_packed, pad).describe();
}

}  // namespace detail
}  // namespace npupack
