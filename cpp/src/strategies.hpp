// The ordered strategy list: each entry a name, an applies(plan) predicate and its runners; the
// first entry that applies to a plan is the plan's strategy. The list ends in the reference
// (per-element offset_of), which always applies.
// Spec: docs/design.md §3.12 (the plan and the strategy list).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "plan.hpp"

namespace npupack {
namespace detail {

class Walker;

// Tried by the walk at each level li above the last two loops: true when it ran the rest of the
// nest from li, false when the walk is to loop over loops[li] itself.
using NestKernel = bool (*)(Walker& w, size_t li, int64_t loff, int64_t poff);
// The last two loops (or the only one) at these offsets.
using PairKernel = void (*)(Walker& w, int64_t loff, int64_t poff);

struct Strategy {
  enum class Runs { kWalk, kExtended, kReference };
  const char* name;
  bool (*applies)(const Plan&);
  Runs runs;
  NestKernel nest;   // kWalk: tried above the pair; nullptr: none
  PairKernel pair;   // kWalk: the last two loops
  const char* what;  // one line: what it does
  // Why it was chosen, where that is a decision on measured sizes ("" otherwise).
  std::string (*why)(const Plan&);
};

// The list, in the order tried.
const std::vector<Strategy>& strategies();
// The first entry of strategies() that applies to `p`.
const Strategy& choose_strategy(const Plan& p);

// The runners (run_<name>.cpp).
bool run_single_run(Walker& w, size_t li, int64_t loff, int64_t poff);
bool run_column_group(Walker& w, size_t li, int64_t loff, int64_t poff);
void run_row_group(Walker& w, int64_t loff, int64_t poff);
bool run_tile_blocks(Walker& w, size_t li, int64_t loff, int64_t poff);
bool run_tiled_nest(Walker& w, size_t li, int64_t loff, int64_t poff);
bool run_batch_pairs(Walker& w, size_t li, int64_t loff, int64_t poff);
void run_transpose(Walker& w, int64_t loff, int64_t poff);
void run_copy_rows(Walker& w, int64_t loff, int64_t poff);
void run_copy_runs(Walker& w, int64_t loff, int64_t poff);

// pack / unpack of a layout built for this call only (pack.cpp), planned without the per-thread
// caches.
void pack_once(const BlockedLayout& L, const char* logical, const std::vector<int64_t>& logical_strides,
               char* packed, int64_t packed_size, const char* pad);
void unpack_once(const BlockedLayout& L, const char* packed, int64_t packed_size, char* logical,
                 const std::vector<int64_t>& logical_strides);

// The whole-layout runners: through a copy extended to whole blocks (run_extended.cpp), and the
// per-element reference (run_reference.cpp, after the hole fill; pack.hpp's pack_reference).
void pack_extended(const BlockedLayout& L, const char* logical, const std::vector<int64_t>& logical_strides,
                   char* packed, int64_t packed_size, const char* pad);
void unpack_extended(const BlockedLayout& L, const char* packed, int64_t packed_size, char* logical,
                     const std::vector<int64_t>& logical_strides);
// The plan of the extended layout that the extended runner packs through.
std::string describe_extended(const BlockedLayout& L, bool to_packed, const char* pad);
void run_reference_pack(const BlockedLayout& L, const char* logical, const std::vector<int64_t>& logical_strides,
                        char* packed);
void run_reference_unpack(const BlockedLayout& L, const char* packed, char* logical,
                          const std::vector<int64_t>& logical_strides);

// The plan-time predicates the runners rely on (next to their runners).
bool batch_pairs_applies(const Plan& p);
bool copy_rows_applies(const Plan& p);

}  // namespace detail
}  // namespace npupack
