// The pad-value fill before a walk that leaves holes to it: only the blocks of packed memory that
// can hold holes, where those can be bounded (docs/design.md §3.5).
#include <cstdint>
#include <vector>

#include "fill.hpp"

namespace npupack {
namespace detail {

namespace {

// A byte range [first, last) of the packed buffer.
struct Span {
  int64_t first, last;
};

// Where the holes of a padded dim can lie: with no lower padding and nested digits, a padded
// coordinate o * T + r (T the tiles' product) is past the extent only for outer indices o from
// extent / T on, so the holes lie in those steps of the dim's outer loop. Appends one span per
// index combination of the loops outside it; false when there are more than `limit` spans.
bool dim_spans(const BlockedLayout& L, size_t d, size_t limit, std::vector<Span>& spans) {
  const DimSpec& s = L.dims()[d];
  const auto& axes = L.axes();
  size_t pos = 0;
  while (!(axes[pos].dim == static_cast<int>(d) && axes[pos].level == 0)) ++pos;
  const int64_t first = s.extent / L.tile_product(d);
  const int64_t stride = axes[pos].stride;
  std::vector<int64_t> idx(pos, 0);
  for (;;) {
    int64_t base = 0;
    for (size_t a = 0; a < pos; ++a) base += idx[a] * axes[a].stride;
    if (spans.size() == limit) return false;
    spans.push_back({base + first * stride, base + axes[pos].extent * stride});
    size_t a = pos;
    while (a > 0 && ++idx[a - 1] == axes[a - 1].extent) idx[--a] = 0;
    if (a == 0) return true;
  }
}

}  // namespace

void fill_hole_blocks(const BlockedLayout& L, char* packed, const char* pad) {
  if (!L.has_holes()) return;
  // Bounded only for dense nests (each loop's step spans the loops inside it: no explicit strides
  // or gaps), not ragged, digits nested, holes only past each dim's extent; else the whole buffer.
  const auto& axes = L.axes();
  bool bounded = !L.ragged() && L.monotonic();
  int64_t dense = L.elem_bytes();
  for (size_t a = axes.size(); bounded && a-- > 0;) {
    bounded = axes[a].stride == dense;
    dense *= axes[a].extent;
  }
  bounded = bounded && dense == L.nbytes();
  constexpr size_t kMaxSpans = 4096;  // beyond this, one memset of everything is cheaper
  std::vector<Span> spans;
  for (size_t d = 0; bounded && d < L.dims().size(); ++d) {
    const DimSpec& s = L.dims()[d];
    if (L.whole_blocks(d)) continue;
    bounded = s.pad_lo == 0 && s.divisors.empty() && dim_spans(L, d, kMaxSpans, spans);
  }
  int64_t bytes = 0;
  for (const Span& sp : spans) bytes += sp.last - sp.first;
  if (!bounded || 2 * bytes > L.nbytes()) {
    fill_pad(packed, L.nbytes(), L.elem_bytes(), pad);
    return;
  }
  for (const Span& sp : spans) fill_pad(packed + sp.first, sp.last - sp.first, L.elem_bytes(), pad);
}

}  // namespace detail
}  // namespace npupack
