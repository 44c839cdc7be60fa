// Peeling the short last block of a ragged layout (docs/design.md §3.13).
#pragma once

#include <cstdint>
#include <memory>

#include "npupack/layout.hpp"

namespace npupack {
namespace detail {

// A layout whose outermost loop steps over the blocks of a ragged dim (one tile, the last block
// short), as two layouts without that raggedness: the full blocks (head) and the short block
// (tail, its tile the block's size). Each is packed by its own plan, in which the block's loops
// merge with the ones inside them, as they cannot while one block is short.
struct Peel {
  BlockedLayout head;
  BlockedLayout tail;
  int dim;              // the ragged dim
  int64_t tail_start;   // its index where the tail starts (the head's extent)
  int64_t tail_offset;  // packed byte offset of the tail (the head's bytes)
};

// The peel of L, kept per thread; nullptr where L is not such a layout. The head and the tail
// have no peel themselves.
std::shared_ptr<const Peel> cached_peel(const BlockedLayout& L);

}  // namespace detail
}  // namespace npupack
