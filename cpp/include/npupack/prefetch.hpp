// Software prefetch of a source range the caller reads next, spread over the steps of the work
// before it (DC weights: the next kernel group while this one is packed). Issued a share at a
// time, the requests overlap with the work instead of queueing behind one another; every 64-byte
// line of the range is asked for once (every second line was measured to lose most of the gain).
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

}  // namespace npupack
