// n elements from a contiguous source to a destination at a constant byte step (the slots of
// one valid row across a tile of packed blocks).
// Spec: docs/design.md §3.12 (the plan and the strategy list).
#pragma once
#include <cstdint>
#include <cstring>

namespace npupack {
namespace detail {

template <size_t EB>
void scatter_n(const char* src, char* dst, int64_t step, int64_t n) {
  int64_t i = 0;
  if constexpr (EB == 1) {  // bytes: one load per 8 (a load and a store per byte was the cost)
    for (; i + 8 <= n; i += 8) {
      uint64_t v;
      std::memcpy(&v, src + i, 8);
      char* d = dst + i * step;
      for (int k = 0; k < 8; ++k) d[k * step] = static_cast<char>(v >> (8 * k));
    }
  }
  for (; i < n; ++i) std::memcpy(dst + i * step, src + i * EB, EB);
}

inline void scatter(const char* src, char* dst, int64_t step, int64_t n, int64_t eb) {
  switch (eb) {
    case 1: return scatter_n<1>(src, dst, step, n);
    case 2: return scatter_n<2>(src, dst, step, n);
    case 4: return scatter_n<4>(src, dst, step, n);
    case 8: return scatter_n<8>(src, dst, step, n);
    default:
      for (int64_t i = 0; i < n; ++i) std::memcpy(dst + i * step, src + i * eb, static_cast<size_t>(eb));
  }
}

}  // namespace detail
}  // namespace npupack
