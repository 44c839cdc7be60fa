// reference: one offset_of per element, the specification run as code. The last entry of the
// strategy list (it applies to every plan) and pack.hpp's pack_reference / unpack_reference,
// which the tests hold the other strategies to.
// Spec: docs/design.md §3.12 (the plan and the strategy list), §3.1 (reference path and fast path).
#include <cstring>
#include <vector>

#include "npupack/pack.hpp"
#include "fill.hpp"
#include "strategies.hpp"

namespace npupack {
namespace detail {

namespace {

// Calls f(logical byte offset, index) for every logical index, last dim fastest.
template <class F>
void for_each_index(const BlockedLayout& L, const std::vector<int64_t>& logical_strides, F f) {
  const auto& dims = L.dims();
  std::vector<int64_t> idx(dims.size(), 0);
  for (int64_t e = 0; e < L.elements(); ++e) {
    int64_t loff = 0;
    for (size_t i = 0; i < dims.size(); ++i) loff += idx[i] * logical_strides[i];
    f(loff, idx.data());
    for (size_t i = dims.size(); i-- > 0;) {
      if (++idx[i] < dims[i].extent) break;
      idx[i] = 0;
    }
  }
}

}  // namespace

void run_reference_pack(const BlockedLayout& L, const char* logical, const std::vector<int64_t>& logical_strides,
                        char* packed) {
  const size_t eb = static_cast<size_t>(L.elem_bytes());
  for_each_index(L, logical_strides, [&](int64_t loff, const int64_t* idx) {
    std::memcpy(packed + L.offset_of(idx), logical + loff, eb);
  });
}

void run_reference_unpack(const BlockedLayout& L, const char* packed, char* logical,
                          const std::vector<int64_t>& logical_strides) {
  const size_t eb = static_cast<size_t>(L.elem_bytes());
  for_each_index(L, logical_strides, [&](int64_t loff, const int64_t* idx) {
    std::memcpy(logical + loff, packed + L.offset_of(idx), eb);
  });
}

}  // namespace detail

void pack_reference(const BlockedLayout& L, const char* logical, const std::vector<int64_t>& logical_strides,
                    char* packed, int64_t packed_size, const char* pad) {
  detail::check_args(L, logical_strides, packed_size);
  detail::fill_holes(L, packed, pad);
  detail::run_reference_pack(L, logical, logical_strides, packed);
}

void unpack_reference(const BlockedLayout& L, const char* packed, int64_t packed_size, char* logical,
                      const std::vector<int64_t>& logical_strides) {
  detail::check_args(L, logical_strides, packed_size);
  detail::run_reference_unpack(L, packed, logical, logical_strides);
}

}  // namespace npupack
