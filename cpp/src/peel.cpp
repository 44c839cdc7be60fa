// Spec: docs/design.md §3.13 (peeling the short block).
#include "peel.hpp"

#include <exception>
#include <utility>
#include <vector>

#include "plan.hpp"

namespace npupack {
namespace detail {

namespace {

// The one check every pack and unpack makes: cheap, so only layouts that may peel reach the cache
// (where the rebuild is refused, the cache keeps that answer).
bool may_peel(const BlockedLayout& L) {
  if (!L.ragged() || L.axes().empty() || L.axes()[0].level != 0) return false;
  const DimSpec& d = L.dims()[L.axes()[0].dim];
  return d.ragged && d.tiles.size() == 1 && d.divisors.empty() && d.pad_lo == 0 && d.storage == d.extent &&
         d.extent > d.tiles[0] && d.extent % d.tiles[0] != 0;
}

std::shared_ptr<const Peel> make_peel(const BlockedLayout& L) {
  const auto& axes = L.axes();
  const int dim = axes[0].dim;
  const int64_t tile = L.dims()[dim].tiles[0];
  const int64_t start = L.dims()[dim].extent / tile * tile;
  std::vector<AxisSpec> order;
  for (const auto& a : axes) order.push_back(AxisSpec{a.dim, a.level, 0});
  std::vector<DimSpec> head_dims = L.dims(), tail_dims = L.dims();
  head_dims[dim].extent = head_dims[dim].storage = start;
  head_dims[dim].ragged = false;
  tail_dims[dim].extent = tail_dims[dim].storage = L.dims()[dim].extent - start;
  tail_dims[dim].tiles = {tail_dims[dim].extent};
  tail_dims[dim].ragged = false;
  try {
    auto peel = std::make_shared<Peel>(Peel{BlockedLayout(std::move(head_dims), order, L.elem_bytes()),
                                            BlockedLayout(std::move(tail_dims), order, L.elem_bytes()), dim, start, 0});
    peel->tail_offset = peel->head.nbytes();
    // Derived strides rebuild the layout only where it had them; the two layouts must address
    // what the layout does (its corners are compared) and add up to its bytes. Otherwise it is
    // packed whole.
    for (size_t a = 0; a < axes.size(); ++a) {
      if (peel->head.axes()[a].stride != axes[a].stride) return nullptr;
    }
    std::vector<int64_t> last, head_last, tail_first(L.dims().size(), 0), tail_last;
    for (const auto& d : L.dims()) last.push_back(d.extent - 1);
    head_last = tail_last = last;
    head_last[dim] = start - 1;
    tail_first[dim] = start;
    tail_last[dim] -= start;
    if (peel->tail_offset + peel->tail.nbytes() != L.nbytes() ||
        L.offset_of(head_last.data()) != peel->head.offset_of(head_last.data()) ||
        L.offset_of(tail_first.data()) != peel->tail_offset ||
        L.offset_of(last.data()) != peel->tail_offset + peel->tail.offset_of(tail_last.data())) {
      return nullptr;
    }
    // Taken only where the block's loops then merge (the head's plan has fewer loops): elsewhere
    // the second layout would only add a call.
    const size_t head_loops = make_plan(peel->head, c_strides(peel->head), true).loops.size();
    if (head_loops >= make_plan(L, c_strides(L), true).loops.size()) {
      return nullptr;
    }
    return peel;
  } catch (const std::exception&) {  // a layout the rebuild refuses: packed whole
    return nullptr;
  }
}

}  // namespace

std::shared_ptr<const Peel> cached_peel(const BlockedLayout& L) {
  if (!may_peel(L)) return nullptr;
  constexpr size_t kEntries = 8;
  thread_local std::pair<uint64_t, std::shared_ptr<const Peel>> cache[kEntries];
  thread_local size_t next = 0;
  for (const auto& e : cache) {
    if (e.first == L.id()) return e.second;
  }
  auto& e = cache[next];
  next = (next + 1) % kEntries;
  e = {L.id(), make_peel(L)};
  return e.second;
}

}  // namespace detail
}  // namespace npupack
