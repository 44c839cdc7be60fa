// Software prefetch of source ranges the caller reads next. Ahead: one range spread over the
// steps of the work before it (DC weights: the next kernel group while this one is packed);
// prefetch_row_lines: the same span of many strided rows (the next tile of a blocked layout). Issued a share at a
// time, the requests overlap with the work instead of queueing behind one another; every 64-byte
// line of the range is asked for once (asking for every second line only loses most of the gain).
#pragma once
#include <cstdint>

namespace npupack {

class Ahead {
 public:
  Ahead() = default;
  // [p, p + bytes) over `steps` (>= 1) calls of step(); p null: nothing.
  Ahead(const char* p, int64_t bytes, int64_t steps)
      : p_(p), end_(p == nullptr ? nullptr : p + bytes), per_((bytes / steps + 64) / 64 * 64) {}
  __attribute__((always_inline)) void step() {
    if (p_ == nullptr) return;
    const char* stop = end_ - p_ < per_ ? end_ : p_ + per_;
    for (; p_ < stop; p_ += 64) __builtin_prefetch(p_);
  }

 private:
  const char* p_ = nullptr;
  const char* end_ = nullptr;
  int64_t per_ = 0;
};

// The lines of n rows `step` bytes apart, [p, p + bytes) of each (bytes > 0), every line asked
// for once, into L2 (prefetcht1: blocked layouts ask for a tile of 128-256 rows at a time, which
// would crowd L1).
inline void prefetch_row_lines(const char* p, int64_t step, int64_t n, int64_t bytes) {
  for (int64_t r = 0; r < n; ++r) {
    const uintptr_t lo = reinterpret_cast<uintptr_t>(p + r * step);
    for (uintptr_t q = lo & ~uintptr_t{63}; q < lo + static_cast<uintptr_t>(bytes); q += 64) {
      __builtin_prefetch(reinterpret_cast<const char*>(q), 0, 2);
    }
  }
}

}  // namespace npupack
