#include "npupack/layout.hpp"

#include <algorithm>
#include <atomic>
#include <string>

#include "npupack/checked.hpp"
#include "npupack/errors.hpp"

namespace npupack {

namespace {

uint64_t next_layout_id() {
  static std::atomic<uint64_t> next{1};
  return next.fetch_add(1, std::memory_order_relaxed);
}

std::string dim_label(const DimSpec& d, size_t i) {
  return d.name.empty() ? "dim " + std::to_string(i) : "dim '" + d.name + "'";
}

// Explicit divisors must tile [0, product(tiles)) exactly: sorted by divisor, each divisor is the
// product of the tiles with smaller divisors (the first is 1).
void check_divisors(const DimSpec& d, size_t i) {
  if (d.divisors.size() != d.tiles.size()) {
    throw LayoutError(dim_label(d, i) + ": one digit divisor per tile is needed");
  }
  std::vector<size_t> by_div(d.tiles.size());
  for (size_t j = 0; j < by_div.size(); ++j) by_div[j] = j;
  // Ties only come from size-1 tiles (they add no digit); ordering them first keeps the check exact.
  std::sort(by_div.begin(), by_div.end(), [&](size_t a, size_t b) {
    return d.divisors[a] != d.divisors[b] ? d.divisors[a] < d.divisors[b] : d.tiles[a] < d.tiles[b];
  });
  int64_t expect = 1;
  for (size_t j : by_div) {
    if (d.divisors[j] != expect) {
      throw LayoutError(dim_label(d, i) + ": digit divisors do not tile the block (expected a divisor " +
                        std::to_string(expect) + ", got " + std::to_string(d.divisors[j]) + ")");
    }
    expect = checked_mul(expect, d.tiles[j], "tile product");
  }
}

}  // namespace

BlockedLayout::BlockedLayout(std::vector<DimSpec> dims, std::vector<AxisSpec> order, int64_t elem_bytes)
    : dims_(std::move(dims)), elem_bytes_(elem_bytes), id_(next_layout_id()) {
  if (elem_bytes_ != 1 && elem_bytes_ != 2 && elem_bytes_ != 4 && elem_bytes_ != 8) {
    throw LayoutError("elem_bytes must be 1, 2, 4 or 8, got " + std::to_string(elem_bytes_));
  }
  if (dims_.empty()) throw LayoutError("a layout needs at least one dimension");

  axis_of_.resize(dims_.size());
  std::vector<int64_t> tile_product(dims_.size(), 1);
  for (size_t i = 0; i < dims_.size(); ++i) {
    const DimSpec& d = dims_[i];
    if (d.extent < 1) {
      throw LayoutError(dim_label(d, i) + ": extent must be >= 1, got " + std::to_string(d.extent));
    }
    for (int64_t t : d.tiles) {
      if (t < 1) throw LayoutError(dim_label(d, i) + ": tile sizes must be >= 1, got " + std::to_string(t));
      tile_product[i] = checked_mul(tile_product[i], t, "tile product");
    }
    if (d.ragged && d.tiles.size() != 1) {
      throw LayoutError(dim_label(d, i) + ": a ragged dimension needs exactly one tile");
    }
    if (d.pad_lo < 0 || d.storage < 0) throw LayoutError(dim_label(d, i) + ": padding must be >= 0");
    if (d.storage == 0) dims_[i].storage = checked_add(d.pad_lo, d.extent, "padded extent");
    if (d.storage < d.pad_lo + d.extent) {
      throw LayoutError(dim_label(d, i) + ": storage extent " + std::to_string(d.storage) +
                        " is smaller than pad_lo + extent = " + std::to_string(d.pad_lo + d.extent));
    }
    if (d.ragged && (d.pad_lo != 0 || dims_[i].storage != d.extent)) {
      throw LayoutError(dim_label(d, i) + ": a ragged dimension cannot be padded");
    }
    if (!d.divisors.empty()) check_divisors(dims_[i], i);
    ragged_ = ragged_ || d.ragged;
    axis_of_[i].assign(d.tiles.size() + 1, -1);
    elements_ = checked_mul(elements_, d.extent, "element count");
  }

  // Resolve the nest: every (dim, level) exactly once, levels of a dim outer to inner.
  std::vector<int> last_level(dims_.size(), -1);
  for (size_t a = 0; a < order.size(); ++a) {
    const AxisSpec& s = order[a];
    if (s.dim < 0 || static_cast<size_t>(s.dim) >= dims_.size()) {
      throw LayoutError("order entry " + std::to_string(a) + " names dim " + std::to_string(s.dim) +
                        ", which does not exist");
    }
    const DimSpec& d = dims_[s.dim];
    if (s.level < 0 || static_cast<size_t>(s.level) > d.tiles.size()) {
      throw LayoutError(dim_label(d, s.dim) + ": level " + std::to_string(s.level) + " does not exist");
    }
    if (s.level != last_level[s.dim] + 1) {
      throw LayoutError(dim_label(d, s.dim) + ": its parts must appear once each, outer count first, "
                        "then its tiles in order");
    }
    if (s.byte_stride < 0) throw LayoutError("byte strides must be >= 0");
    if (s.byte_stride != 0 && d.ragged) {
      // Checked again below for the layout as a whole.
    }
    last_level[s.dim] = s.level;
    axis_of_[s.dim][s.level] = static_cast<int>(a);
    int64_t extent, weight = 1;
    if (s.level == 0) {
      weight = tile_product[s.dim];
    } else if (!d.divisors.empty()) {
      weight = d.divisors[s.level - 1];
    } else {
      for (size_t j = s.level; j < d.tiles.size(); ++j) weight *= d.tiles[j];
    }
    extent = s.level == 0 ? ceil_div(d.storage, tile_product[s.dim]) : d.tiles[s.level - 1];
    axes_.push_back(Axis{s.dim, s.level, extent, weight, s.byte_stride});
  }
  for (size_t i = 0; i < dims_.size(); ++i) {
    if (static_cast<size_t>(last_level[i] + 1) != dims_[i].tiles.size() + 1) {
      throw LayoutError(dim_label(dims_[i], i) + ": every part (outer count and each tile) must be in the order");
    }
  }

  swizzled_.assign(dims_.size(), false);
  for (size_t i = 0; i < dims_.size(); ++i) {
    // Nested iff every tile's divisor is the default (the product of the tiles after it).
    const DimSpec& d = dims_[i];
    int64_t w = 1;
    for (size_t j = d.tiles.size(); j-- > 0;) {
      if (!d.divisors.empty() && d.divisors[j] != w) swizzled_[i] = true;
      w *= d.tiles[j];
    }
    if (swizzled_[i]) monotonic_ = false;
  }

  bool explicit_strides = std::any_of(order.begin(), order.end(), [](const AxisSpec& s) { return s.byte_stride != 0; });
  if (ragged_ && explicit_strides) {
    throw LayoutError("explicit byte strides cannot be combined with ragged (unpadded) blocks");
  }
  // A ragged dim whose extent is a multiple of its tile has no short block, and one that is a
  // single short block is a plain block of `extent` elements: both are stored exactly like a
  // plain dim, so treat them as plain, which gives the executor constant strides (and lets it
  // merge the block with its neighbours, e.g. the 3 channels of a first-layer DC kernel).
  ragged_ = false;
  for (size_t i = 0; i < dims_.size(); ++i) {
    DimSpec& d = dims_[i];
    if (d.ragged && d.extent < d.tiles[0]) {
      d.tiles[0] = d.extent;
      axes_[axis_of_[i][0]].weight = d.extent;
      axes_[axis_of_[i][1]].extent = d.extent;
    }
    if (d.ragged && d.extent % d.tiles[0] == 0) d.ragged = false;
    ragged_ = ragged_ || d.ragged;
  }

  // Strides, inner to outer. `span` = bytes addressed by the sub-nest inside the current axis.
  int64_t span = elem_bytes_;
  for (size_t k = axes_.size(); k-- > 0;) {
    Axis& ax = axes_[k];
    int64_t derived = k + 1 < axes_.size()
                          ? checked_mul(axes_[k + 1].stride, axes_[k + 1].extent, "stride")
                          : elem_bytes_;
    if (ax.stride == 0) {
      ax.stride = derived;
    } else {
      const std::string where = dim_label(dims_[ax.dim], ax.dim) + " level " + std::to_string(ax.level);
      if (ax.stride % elem_bytes_ != 0) {
        throw LayoutError(where + ": byte stride " + std::to_string(ax.stride) +
                          " is not a multiple of the element size " + std::to_string(elem_bytes_));
      }
      if (ax.stride < span) {
        throw LayoutError(where + ": byte stride " + std::to_string(ax.stride) +
                          " is smaller than the " + std::to_string(span) +
                          " bytes spanned by the loops inside it");
      }
    }
    span = checked_add(span, checked_mul(ax.extent - 1, ax.stride, "layout size"), "layout size");
  }

  if (ragged_) {
    nbytes_ = elem_bytes_;
    for (size_t i = 0; i < dims_.size(); ++i) {
      int64_t n = dims_[i].ragged ? dims_[i].extent : 1;
      if (!dims_[i].ragged) {
        for (int p : axis_of_[i]) n = checked_mul(n, axes_[p].extent, "layout size");
      }
      nbytes_ = checked_mul(nbytes_, n, "layout size");
    }
  } else {
    nbytes_ = span;
  }
  holes_ = nbytes_ != checked_mul(elements_, elem_bytes_, "layout size");
}

int64_t BlockedLayout::tile_product(size_t d) const {
  int64_t block = 1;
  for (int64_t t : dims_[d].tiles) block *= t;  // checked in the constructor
  return block;
}

bool BlockedLayout::whole_blocks(size_t d) const {
  const DimSpec& s = dims_[d];
  return !s.ragged && s.pad_lo == 0 && s.storage == s.extent && s.extent % tile_product(d) == 0;
}

int64_t BlockedLayout::stride_at(size_t a, const int64_t* outer_idx) const {
  if (!ragged_) return axes_[a].stride;
  int64_t s = elem_bytes_;
  for (size_t i = 0; i < dims_.size(); ++i) {
    const DimSpec& d = dims_[i];
    if (d.ragged) {
      const size_t p0 = axis_of_[i][0], p1 = axis_of_[i][1];
      const int64_t t = d.tiles[0];
      if (p0 > a) {
        s *= d.extent;  // the whole dimension, ragged last block included, lies inside
      } else if (p0 == a) {
        s *= t;  // one step of the outer count skips one full block
      } else if (p1 > a) {
        s *= std::min(t, d.extent - outer_idx[p0] * t);  // inside the current (maybe short) block
      }
    } else {
      for (int p : axis_of_[i]) {
        if (static_cast<size_t>(p) > a) s *= axes_[p].extent;
      }
    }
  }
  return s;
}

int64_t BlockedLayout::offset_of(const int64_t* index) const {
  std::vector<int64_t> idx(axes_.size());
  for (size_t i = 0; i < dims_.size(); ++i) {
    int64_t v = index[i];
    if (v < 0 || v >= dims_[i].extent) {
      throw LayoutError(dim_label(dims_[i], i) + ": index " + std::to_string(v) + " out of range [0, " +
                        std::to_string(dims_[i].extent) + ")");
    }
    const DimSpec& d = dims_[i];
    const int64_t p = v + d.pad_lo;
    int64_t t = 1;
    for (size_t j = d.tiles.size(); j > 0; --j) {
      const int64_t div = d.divisors.empty() ? t : d.divisors[j - 1];
      idx[axis_of_[i][j]] = (p / div) % d.tiles[j - 1];
      t *= d.tiles[j - 1];
    }
    idx[axis_of_[i][0]] = p / t;
  }
  int64_t off = 0;
  for (size_t a = 0; a < axes_.size(); ++a) off += idx[a] * stride_at(a, idx.data());
  return off;
}

}  // namespace npupack
