// Generic pack / unpack over any BlockedLayout.
//
// `logical` is the dense tensor in the layout's dim order, addressed through byte strides (any
// sign, so non-contiguous NumPy views work without a copy). `packed` is the byte buffer of the
// layout. The fast path walks the nest in memory order with a tight innermost loop (a layout
// with a swizzled dim that has a partial block goes through a copy extended to whole blocks);
// the reference path computes offset_of for every element and exists to check the fast path.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "npupack/layout.hpp"

namespace npupack {

// Writes every element and, when the layout has holes, fills them with `pad` (elem_bytes
// bytes, little-endian element value). `packed_size` must be >= layout.nbytes().
void pack(const BlockedLayout& layout, const char* logical, const std::vector<int64_t>& logical_strides,
          char* packed, int64_t packed_size, const char* pad);
void pack_reference(const BlockedLayout& layout, const char* logical,
                    const std::vector<int64_t>& logical_strides, char* packed, int64_t packed_size,
                    const char* pad);

// Tells whether a slab of the logical tensor (`bytes` bytes, contiguous) may be packed.
using SlabCheck = bool (*)(const char* slab, int64_t bytes);

// pack() of a C-contiguous logical tensor that also passes the tensor to `check` (fp16 weights:
// no INF or NaN) and returns false, with `packed` partly written, when the check fails. Where
// the layout's outer loop reads one contiguous slab per step (DC weights: a kernel group), each
// slab is checked just before it is packed, while it is in the caches (prefetched during the
// previous slab), instead of a separate pass over the whole tensor in memory; otherwise the
// whole tensor is checked first. `fp16_finite` says that `check` is the binary16 INF/NaN test
// (no element with an all-ones exponent): the executor may then apply it to the bytes it moves,
// instead of a separate pass over the slab.
bool pack_checked(const BlockedLayout& layout, const char* logical, const std::vector<int64_t>& logical_strides,
                  char* packed, int64_t packed_size, const char* pad, SlabCheck check, bool fp16_finite = false);

// One layer of a batch: pack(*layout, logical, strides, packed, packed_size, nullptr).
struct PackJob {
  const BlockedLayout* layout;
  const char* logical;
  std::vector<int64_t> logical_strides;
  char* packed;
  int64_t packed_size;
};

// Packs every job with zero padding and zero-fills each packed buffer past layout.nbytes() up
// to packed_size (the surface tail). Large batches are split across threads by layer; every job
// is validated before anything is written.
void pack_many(const std::vector<PackJob>& jobs);

// Reads every element back; bytes that hold no element are ignored.
void unpack(const BlockedLayout& layout, const char* packed, int64_t packed_size, char* logical,
            const std::vector<int64_t>& logical_strides);
void unpack_reference(const BlockedLayout& layout, const char* packed, int64_t packed_size,
                      char* logical, const std::vector<int64_t>& logical_strides);

// The plan that pack (to_packed) or unpack of a C-contiguous logical tensor runs on this
// layout, as text: its loops, the strategy taken from the ordered list and why, and its options
// (docs/design.md §3.12). `pad` as for pack. Nothing is read, written or allocated per element.
std::string describe_plan(const BlockedLayout& layout, bool to_packed, const char* pad);
// The name of that plan's strategy.
std::string plan_strategy(const BlockedLayout& layout, bool to_packed, const char* pad);
// The names of the ordered strategy list, in the order tried.
std::vector<std::string> plan_strategies();

}  // namespace npupack
