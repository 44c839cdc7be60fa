// Splitting large kernels across threads. Each call starts its own short-lived workers (no pool
// to keep alive across fork() or interpreter shutdown); kernels use it only for jobs big enough
// that starting a thread (~20 us) is small against the work.
#pragma once
#include <cstdint>
#include <exception>
#include <thread>
#include <vector>

namespace npupack {

// Threads the kernels may use: set_num_threads(n) with n >= 1, or n <= 0 for the default (the
// machine's hardware threads).
int num_threads();
void set_num_threads(int n);

// True on a thread that already runs a part of a parallel_for: nested calls stay serial, so a
// batch split across layers does not multiply threads inside each layer.
bool in_parallel_region();
void set_in_parallel_region(bool on);

// Bytes of work below which a kernel stays on the calling thread.
constexpr int64_t kParallelBytes = int64_t{1} << 20;

// Calls f(begin, end) on disjoint ranges covering [0, n), at most num_threads() of them at
// once, each at least `grain` long (so small n runs on the caller alone). Exceptions from any
// range are rethrown on the caller after every worker has finished.
template <class F>
void parallel_for(int64_t n, int64_t grain, F&& f) {
  if (n <= 0) return;
  if (grain < 1) grain = 1;
  int64_t parts = n / grain;
  const int64_t threads = num_threads();
  if (parts > threads) parts = threads;
  if (parts <= 1 || in_parallel_region()) {
    f(int64_t{0}, n);
    return;
  }
  std::vector<std::thread> workers;
  std::vector<std::exception_ptr> errors(static_cast<size_t>(parts));
  workers.reserve(static_cast<size_t>(parts - 1));
  for (int64_t p = 1; p < parts; ++p) {
    const int64_t b = n * p / parts, e = n * (p + 1) / parts;
    workers.emplace_back([&f, &errors, p, b, e] {
      set_in_parallel_region(true);
      try {
        f(b, e);
      } catch (...) {
        errors[static_cast<size_t>(p)] = std::current_exception();
      }
    });
  }
  set_in_parallel_region(true);
  try {
    f(int64_t{0}, n / parts);
  } catch (...) {
    errors[0] = std::current_exception();
  }
  set_in_parallel_region(false);
  for (auto& w : workers) w.join();
  for (auto& e : errors) {
    if (e) std::rethrow_exception(e);
  }
}

}  // namespace npupack
