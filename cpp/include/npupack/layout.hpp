// BlockedLayout: the one descriptor every dense format is expressed in.
//
// A layout has logical dimensions (extents in elements), each split into an outer count and
// zero or more inner tiles, and a loop nest ("order") over those parts from the slowest to the
// fastest in memory. The parts of one dimension appear in the nest from its outer count to its
// innermost tile, and a later (more inner) tile takes the lower digits of the logical index:
// for dimension d with tiles t1..tm, index = ((o*t1 + a1)*t2 + a2)... .
//
// Two kinds of partial last block exist in the field and both are modelled:
//  * padded (default): the last outer block is stored whole; positions past the extent are
//    holes filled with the pad value (NVDLA feature atoms, clDNN fsv16 blocks);
//  * ragged: the last outer block stores only extent % tile elements and everything after it
//    moves up (NVDLA direct-convolution kernel groups and channel blocks). A ragged dimension has
//    exactly one tile.
// Each loop may carry an explicit byte stride (NVDLA line/surface/batch strides); loops without
// one are packed against the loops inside them. Explicit strides and ragged dims do not mix.
//
// Padding before blocking (clDNN): a dim may have lower padding `pad_lo` and a storage extent
// `storage` >= pad_lo + extent (upper padding and alignment included); logical index i sits at
// padded coordinate p = i + pad_lo, and the outer count is ceil(storage / product(tiles)).
// A tile may carry an explicit digit divisor (clDNN's swizzled formats): its digit is
// (p / divisor) % tile instead of the default divisor, the product of the tiles after it.
//
// offset_of() is the specification; pack/unpack (pack.hpp) must agree with it byte for byte.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace npupack {

struct DimSpec {
  std::string name;
  int64_t extent = 1;             // logical size, elements
  std::vector<int64_t> tiles;     // inner tile sizes, outer to inner
  bool ragged = false;
  int64_t pad_lo = 0;             // elements before the first logical one
  int64_t storage = 0;            // padded extent before tile rounding; 0 = pad_lo + extent
  std::vector<int64_t> divisors;  // explicit digit divisor per tile; empty = default
};

struct AxisSpec {
  int dim = 0;              // index into the dims
  int level = 0;            // 0 = outer count, j = tiles[j-1]
  int64_t byte_stride = 0;  // 0 = derived
};

class BlockedLayout {
 public:
  // One loop of the nest, resolved.
  struct Axis {
    int dim;
    int level;
    int64_t extent;  // loop count of a full block
    int64_t weight;  // padded-coordinate weight of one step (the digit divisor)
    int64_t stride;  // byte stride (for a ragged layout: stride when every block is full)
  };

  BlockedLayout(std::vector<DimSpec> dims, std::vector<AxisSpec> order, int64_t elem_bytes);

  // Byte offset of the element at logical index `index` (one entry per dim, in range).
  int64_t offset_of(const int64_t* index) const;

  // Bytes addressed: from offset 0 to the end of the last element slot.
  int64_t nbytes() const { return nbytes_; }
  // True when some bytes of [0, nbytes) hold no element (padded tiles, stride gaps).
  bool has_holes() const { return holes_; }
  bool ragged() const { return ragged_; }
  // False when some dim's digit divisors are not nested (swizzled).
  bool monotonic() const { return monotonic_; }
  // Dim `d`'s digit divisors are not nested (clDNN's *_swizzled_by_N).
  bool swizzled(size_t d) const { return swizzled_[d]; }
  // Dim `d` is stored as whole blocks: no padding before blocking and an extent that is a
  // multiple of its tiles' product (every block full, no holes along it).
  bool whole_blocks(size_t d) const;
  // Elements of one block of dim `d`: the product of its tiles.
  int64_t tile_product(size_t d) const;
  int64_t elem_bytes() const { return elem_bytes_; }
  int64_t elements() const { return elements_; }
  const std::vector<DimSpec>& dims() const { return dims_; }
  const std::vector<Axis>& axes() const { return axes_; }
  // Unique per constructed layout (copies share it: they are equal): keys the plan cache.
  uint64_t id() const { return id_; }

  // Byte stride of axis `a` given the loop indices of the axes outside it (`outer_idx[b]` for
  // b < a). Constant for non-ragged layouts; for ragged ones the inner extent of a dimension
  // whose outer count lies outside `a` is the actual size of the current block.
  int64_t stride_at(size_t a, const int64_t* outer_idx) const;

 private:
  std::vector<DimSpec> dims_;
  std::vector<Axis> axes_;
  std::vector<std::vector<int>> axis_of_;  // [dim][level] -> position in the nest
  int64_t elem_bytes_;
  int64_t nbytes_ = 0;
  int64_t elements_ = 1;
  bool holes_ = false;
  bool ragged_ = false;
  bool monotonic_ = true;
  std::vector<bool> swizzled_;
  uint64_t id_;
};

}  // namespace npupack
