#include "npupack/parallel.hpp"

#include <atomic>

namespace npupack {

namespace {

int hardware_threads() {
  const unsigned n = std::thread::hardware_concurrency();
  return n == 0 ? 1 : static_cast<int>(n);
}

std::atomic<int> g_threads{0};  // 0: the default
thread_local bool t_in_parallel = false;

}  // namespace

int num_threads() {
  const int n = g_threads.load(std::memory_order_relaxed);
  return n > 0 ? n : hardware_threads();
}

void set_num_threads(int n) { g_threads.store(n > 0 ? n : 0, std::memory_order_relaxed); }

bool in_parallel_region() { return t_in_parallel; }

void set_in_parallel_region(bool on) { t_in_parallel = on; }

}  // namespace npupack
