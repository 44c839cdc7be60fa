// Streamed plans over an output that does not start on a 64-byte line, and column groups whose
// own streaming stores would leave lines half written. Their kernels stream only whole lines of a
// line-aligned output; elsewhere each store would read its line in first, an extra read of
// memory per line written. Such a plan packs one slab at a time into a line-aligned buffer that
// stays in L1 and streams the slab out with the stream-copy kernels, which align the destination
// themselves (Walker::rec).
// Spec: docs/design.md §3.8 (streaming stores), §3.12 (the plan and its options).
#include <cstdint>

#include "plan.hpp"
#include "strategies.hpp"

namespace npupack {
namespace detail {

size_t plan_bounce(const Plan& p) {
  const BlockedLayout& L = *p.layout;
  const size_t n = p.loops.size();
  // Every packed byte an element, fixed packed steps, and loops the walk itself runs down to the
  // pair or to the loops a nest takes over: the batched transposes take only the loop just
  // outside the pair, a column group its own loops.
  const bool batch = p.strategy->nest == run_batch_pairs, group = p.strategy->nest == run_column_group;
  if (!p.to_packed || L.ragged() || (p.strategy->nest != nullptr && !batch && !group)) return 0;
  // Loops below the bounce loop at least: the pair, the batch and the pair, or the group and its rows.
  const size_t inner = batch ? 3 : group ? static_cast<size_t>(p.group) + 1 : 2;
  // The outermost loop but the first (whose steps the threads share) whose step writes one
  // contiguous slab: its inner loops' slots are distinct, so they fill [0, span) exactly when
  // there are span / eb of them. Holes among them hold the pad value the slab starts with
  // (Walker::bounce_slab).
  for (size_t li = 1; li + inner < n; ++li) {
    int64_t count = 1, last = 0;
    for (size_t j = li + 1; j < n; ++j) {
      count *= p.loops[j].extent;
      last += (p.loops[j].extent - 1) * p.loops[j].pstep;
    }
    const int64_t bytes = count * p.eb;
    if (bytes < kMinBounceBytes) return 0;
    if (bytes <= kBounceBytes && last + p.eb == bytes) return li;
  }
  return 0;
}

// A column group whose columns are shorter than a line (16 halves: os_is_yx_isv16_osv16 fp16)
// streams each line in two or more parts, from columns written far apart: more partial lines are
// open at once than the write-combining buffers hold, and each is written out twice. Its slabs
// bounce even into a line-aligned output, which then receives whole lines only.
bool bounce_lines(const Plan& p) {
  return p.bounce != 0 && p.strategy->nest == run_column_group && p.loops.back().extent * p.eb < 64;
}

const Plan& for_output(const Plan& p, const char* packed, Plan& storage) {
  if (p.bounce == 0 || (reinterpret_cast<uintptr_t>(packed) % 64 == 0 && !p.bounce_lines)) return p;
  storage = p;
  storage.stream = storage.stream_lines = false;
  storage.bouncing = true;
  return storage;
}

}  // namespace detail
}  // namespace npupack
