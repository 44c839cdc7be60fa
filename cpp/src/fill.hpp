// Argument checks and the pad-value fill shared by the fast path, the extended copy and the
// reference path.
// Spec: docs/design.md §3.5 (holes and the pad value).
#pragma once
#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "npupack/errors.hpp"
#include "npupack/layout.hpp"

namespace npupack {
namespace detail {

inline void check_args(const BlockedLayout& L, const std::vector<int64_t>& logical_strides, int64_t packed_size) {
  if (logical_strides.size() != L.dims().size()) {
    throw LayoutError("logical tensor has " + std::to_string(logical_strides.size()) +
                      " dimensions, the layout has " + std::to_string(L.dims().size()));
  }
  if (packed_size < L.nbytes()) {
    throw LayoutError("packed buffer holds " + std::to_string(packed_size) + " bytes, the layout needs " +
                      std::to_string(L.nbytes()));
  }
}

// `bytes` bytes of the element pattern `pad` (eb bytes; nullptr: zero).
inline void fill_pad(char* p, int64_t bytes, int64_t eb, const char* pad) {
  const bool zero = pad == nullptr || std::all_of(pad, pad + eb, [](char c) { return c == 0; });
  if (zero) {
    std::memset(p, 0, static_cast<size_t>(bytes));
    return;
  }
  for (int64_t off = 0; off < bytes; off += eb) std::memcpy(p + off, pad, static_cast<size_t>(eb));
}

inline void fill_holes(const BlockedLayout& L, char* packed, const char* pad) {
  if (L.has_holes()) fill_pad(packed, L.nbytes(), L.elem_bytes(), pad);
}

// fill_holes before a walk, which writes every element: where the holes can be bounded (a dense
// nest, holes only past the extent of padded dims), only the steps of each such dim's outer loop
// that can hold them, instead of the whole buffer (fill.cpp).
void fill_hole_blocks(const BlockedLayout& L, char* packed, const char* pad);

}  // namespace detail
}  // namespace npupack
