// Splitting large kernels across threads, on a pool of persistent workers: worker p always runs
// part p of a job, so the same part of a buffer is touched by the same core from one call to the
// next (threads started per call lose more than they gain on copies that live in cache). Kernels
// split only jobs big enough that the cost of handing out work is small against it.
#pragma once
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <exception>
#include <functional>
#include <vector>

namespace npupack {

// Threads the kernels may use: set_num_threads(n) with n >= 1, or n <= 0 for the default (the
// machine's hardware threads).
int num_threads();
void set_num_threads(int n);

// True on a thread that already runs a part of a parallel_for: nested calls stay serial, so a
// batch split across layers does not multiply threads inside each layer.
bool in_parallel_region();

// Bytes of work below which a kernel stays on the calling thread.
constexpr int64_t kParallelBytes = int64_t{1} << 20;

// Runs part(p) for p in [0, parts): part 0 on the caller, the others on pool workers. Returns
// false without running anything when the pool is busy with another caller's job (the caller
// then runs serially: concurrent callers never oversubscribe the cores). Exceptions from any
// part are rethrown on the caller after every part has finished.
bool run_on_pool(int64_t parts, const std::function<void(int64_t)>& part);

// Calls f(begin, end) on disjoint ranges covering [0, n), on at most num_threads() threads at
// once, using only as many threads as there are `grain`-long pieces (so small n runs on the
// caller alone). The range is cut into up to 4 chunks per thread: thread p first takes chunk p
// (the same slice as in the previous call, still in its core's cache), then whichever chunks are
// left. A thread slowed by a busy core (a shared VM) then does less, instead of everyone waiting
// for its fixed half.
template <class F>
void parallel_for(int64_t n, int64_t grain, F&& f) {
  if (n <= 0) return;
  if (grain < 1) grain = 1;
  int64_t parts = n / grain;
  const int64_t threads = num_threads();
  if (parts > threads) parts = threads;
  if (parts > 1 && !in_parallel_region()) {
    // Chunks may be shorter than `grain` (which only decides whether threads pay off): with
    // few, a 3:2 split would cap two threads at 1.67x.
    const int64_t chunks = std::min(4 * parts, n);
    std::atomic<int64_t> next{parts};
    auto part = [&](int64_t p) {
      for (int64_t c = p; c < chunks; c = next.fetch_add(1, std::memory_order_relaxed)) {
        f(n * c / chunks, n * (c + 1) / chunks);
      }
    };
    if (run_on_pool(parts, part)) return;
  }
  f(int64_t{0}, n);
}

}  // namespace npupack
