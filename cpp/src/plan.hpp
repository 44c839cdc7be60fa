// The plan of one pack or unpack over a BlockedLayout: the loop nest left after the planning
// passes, the strategy chosen from the ordered list (strategies.hpp) and its options. Built by
// make_plan (and kept per thread by cached_plan), read-only while it runs (walker.hpp holds the
// running state), and printable (describe) so that what runs can be tested and explained.
// Spec: docs/design.md §3.12 (the plan and the strategy list), §3.2 (the passes).
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "npupack/layout.hpp"

namespace npupack {
namespace detail {

struct Strategy;

// Copies n elements from src (step sstep bytes) to dst (step dstep bytes).
using RunFn = void (*)(const char*, int64_t, char*, int64_t, int64_t);
RunFn run_for(int64_t eb);

// Tuning constants (docs/performance.md §6 gives the measurements behind each).
inline constexpr int64_t kGroupBytes = 64 * 1024;            // column group: largest group of columns x rows
inline constexpr int64_t kShortRowBytes = 16;                // row group: rows shorter than a SIMD block
inline constexpr int64_t kRowGroupBytes = 64;                // row group: the rows it aims for
inline constexpr int64_t kRowsAhead = 256;                   // row copies: prefetch distance in a strided row
inline constexpr int64_t kTileBytes = 256 * 1024;            // tiled_nest: packed bytes of one x tile
// batch_pairs: the next outer slab is prefetched, spread over the packing of this one, only up to
// this size (measured, docs/performance.md §6): of a larger one, the lines asked for first are
// evicted again before they are read, and the slab is read twice.
inline constexpr int64_t kPrefetchSlabBytes = 1536 * 1024;
// tile_blocks (both ways of building a tile) and the row-gap chunks of copy_rows: a tile that
// stays in L1 while it is built and copied out.
inline constexpr int64_t kRowTileBytes = 16 * 1024;
inline constexpr int64_t kStreamBytes = 4 << 20;             // tile_blocks: outputs streamed past the caches
// Transposes and row copies that write whole lines (Streaming::kWholeLines) stream from here: where
// the copy of the same bytes no longer stays in L3 (docs/performance.md §6). Those that stream
// matrix by matrix, from kStreamTransposeBytes.
inline constexpr int64_t kStreamLinesBytes = 8 << 20;
inline constexpr int64_t kDenseTileBytes = 8 << 20;          // tile_blocks: outputs that take it whatever the holes
inline constexpr int64_t kStreamTransposeBytes = 16 << 20;   // transposes: outputs written with streaming stores
// A streamed plan whose output does not start on a 64-byte line (NumPy's large buffers start 16
// bytes past one) packs slab by slab into a line-aligned buffer of at most this size, which stays
// in L1, and streams each slab out (Plan::bounce; docs/performance.md §8). Larger slabs did not
// pay; slabs of fewer bytes would leave most of their lines partial at the two ends.
inline constexpr int64_t kBounceBytes = 32 * 1024;
inline constexpr int64_t kMinBounceBytes = 2048;

struct Loop {
  int axis;        // innermost layout axis of this loop (stride and count are taken from it)
  int dim;
  int64_t extent;  // full loop count
  int64_t weight;  // logical-index weight of one step
  int64_t lstep;   // logical byte step
  int64_t pstep;   // packed byte step (non-ragged layouts)
  bool exact;      // always runs its full extent and influences no other loop's count or stride
  int first_axis;  // outermost layout axis merged into this loop (describe names them all)
};

struct Plan {
  const BlockedLayout* layout = nullptr;
  bool to_packed = true;
  int64_t eb = 0;                    // element bytes as moved (widened, see widen_elements)
  RunFn run = nullptr;               // strided copy of eb-byte elements
  bool has_pad = false;              // a pad value was given (else zero)
  char pad[8] = {};                  // the pad value, repeated to eb bytes
  std::vector<Loop> loops;           // outer to inner, after the passes
  int64_t origin = 0;                // logical byte offset of padded coordinate 0
  bool takes = true;                 // the nest walk takes the layout (else: extended copy)
  bool transpose = false;            // the last two loops are a transposed pair
  size_t group = 0;                  // loops transposed together before the innermost (0: none)
  std::vector<int64_t> col_poff;     // column group: packed offset of each column
  std::vector<int64_t> row_off;      // row group: logical offset of each row (empty: none)
  bool tiles = false;                // tile_blocks runs the loop outside the pair
  size_t nest = 0;                   // tiled_nest: first loop of the nest it tiles (loops.size(): none)
  bool prefetch_slabs = false;       // the next outer slab is prefetched while one is packed
  bool stream = false;               // transposes use streaming stores
  bool stream_lines = false;         // ... in whole lines (Streaming::kWholeLines)
  bool row_gaps = false;             // pack zeroes the gaps between rows itself
  size_t bounce = 0;                 // stream: loop whose steps are whole packed slabs to bounce (0: none)
  bool bouncing = false;             // this copy runs bounced (for_output): no streaming below bounce
  bool bounce_lines = false;         // bounce a line-aligned output too (bounce_lines())
  bool fills_holes = false;          // packing writes every hole: the fill pass is skipped
  bool split = false;                // the outer loop's steps are split across threads
  int64_t grain = 0;                 // split: steps per range at least
  int64_t threads = 1;               // split: threads it runs on (num_threads at build time)
  const Strategy* strategy = nullptr;

  // A transposed pair whose rows are `in`'s steps and whose columns are x's: neither a column
  // group nor a row table.
  bool plain_pair() const { return transpose && group < 2 && row_off.empty(); }
  bool zero_pad() const;
  // Bytes of the (C-contiguous) logical tensor.
  int64_t logical_bytes() const;
  // Iterations of the outermost loop that may run on separate threads (each thread on its own
  // walker, over a sub-range): 0 when the plan has no independent outer loop.
  int64_t outer_steps() const;
  // The outer loop's iterations each read one contiguous range of a C-contiguous logical tensor
  // (see plan.cpp); `slowest`: only where that loop is the outer count of the slowest dim.
  bool outer_slabs(bool slowest = false) const;
  // Logical byte range [lo, hi) that outer iteration i reads (outer_slabs() holds).
  std::pair<int64_t, int64_t> outer_slab(int64_t i) const;
  // The transpose's x tile of tiled_nest, in columns.
  int64_t nest_tile() const;
  // Multi-line text: loops (extent, logical and packed step), strategy, options, and why.
  std::string describe() const;
};

// The plan for packing (to_packed) or unpacking `L` against a logical tensor of these byte
// strides; `pad` is one element (nullptr: zero). `L` must outlive every use of the plan (a plan
// cached_plan keeps holds its layout's address only until that layout's next call sets it again).
Plan make_plan(const BlockedLayout& L, const std::vector<int64_t>& logical_strides, bool to_packed,
               const char* pad = nullptr);

// The byte strides of a C-contiguous logical tensor of L's dims (describe plans against them).
std::vector<int64_t> c_strides(const BlockedLayout& L);

// make_plan's result, kept per thread for the next call with the same layout, strides,
// direction, pad value and thread count. Valid until this thread's next cached_plan call.
const Plan& cached_plan(const BlockedLayout& L, const std::vector<int64_t>& logical_strides, bool to_packed,
                        const char* pad = nullptr);

// The planning passes (plan_passes.cpp), in the order make_plan runs them.
void merge_contiguous(Plan& p);
void widen_elements(Plan& p);
bool move_transpose_partner(Plan& p);
void group_transpose_columns(Plan& p);
void group_transpose_rows(Plan& p);
// Why tile_blocks is taken (plan_passes.cpp), 0 where it is not; describe prints the same rule.
enum TileRule { kNoTiles = 0, kSparseLarge, kDenseWide, kScattered };
TileRule tile_blocks_rule(const Plan& p);
size_t plan_tiled_nest(const Plan& p);
void split_pair_for_threads(Plan& p);
bool plan_fills_holes(Plan& p);

// The loop (>= 1) whose every step writes one contiguous packed slab of at most kBounceBytes
// (its holes, if any, take the pad value the slab starts with), where a streamed plan may
// bounce; 0 where none does (bounce.cpp).
size_t plan_bounce(const Plan& p);
// Whether a bouncing plan bounces a line-aligned output too (its own stores leave partial lines).
bool bounce_lines(const Plan& p);
// `p` itself, or where `p` streams and may bounce and `packed` does not start on a 64-byte line
// (or bounce_lines), a copy in `storage` that bounces its slabs (Walker::rec) instead of
// streaming below them.
const Plan& for_output(const Plan& p, const char* packed, Plan& storage);

// The walk takes layouts whose swizzled dims are stored as whole blocks (run_extended.cpp).
bool walk_takes(const BlockedLayout& L);

}  // namespace detail
}  // namespace npupack
