// Size arithmetic that refuses to overflow: every byte count the core computes goes through
// these, so an absurd shape becomes a LayoutError instead of a wrapped size and a wild write.
#pragma once
#include <cstdint>
#include <string>

#include "npupack/errors.hpp"

namespace npupack {

inline int64_t checked_mul(int64_t a, int64_t b, const char* what) {
  int64_t r;
  if (__builtin_mul_overflow(a, b, &r)) {
    throw LayoutError(std::string(what) + ": size arithmetic overflows 64 bits");
  }
  return r;
}

inline int64_t checked_add(int64_t a, int64_t b, const char* what) {
  int64_t r;
  if (__builtin_add_overflow(a, b, &r)) {
    throw LayoutError(std::string(what) + ": size arithmetic overflows 64 bits");
  }
  return r;
}

inline int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

}  // namespace npupack
