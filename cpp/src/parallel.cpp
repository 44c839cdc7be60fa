#include "npupack/parallel.hpp"

#include <pthread.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

namespace npupack {

namespace {

// Asked once: glibc answers hardware_concurrency() by reading /sys, which is slow, and
// parallel_for asks on every call.
int hardware_threads() {
  static const int n = [] {
    const unsigned c = std::thread::hardware_concurrency();
    return c == 0 ? 1 : static_cast<int>(c);
  }();
  return n;
}

std::atomic<int> g_threads{0};  // 0: the default
thread_local bool t_in_parallel = false;

// How long an idle worker (or a caller waiting for its workers) polls before it sleeps: compilers
// call npupack layer after layer, and a wake-up through the scheduler costs far more than a poll.
constexpr auto kSpin = std::chrono::microseconds(200);

template <class Ready>
bool spin_until(Ready ready) {
  const auto until = std::chrono::steady_clock::now() + kSpin;
  while (!ready()) {
    if (std::chrono::steady_clock::now() >= until) return false;
    std::this_thread::yield();
  }
  return true;
}

// The pool is never destroyed: its workers sleep until the process ends (joining them from a
// static destructor at interpreter shutdown could deadlock). After fork() the child, which has
// none of the parent's threads, starts a new empty pool.
class Pool {
 public:
  bool run(int64_t parts, const std::function<void(int64_t)>& part) {
    std::unique_lock<std::mutex> busy(busy_, std::try_to_lock);
    if (!busy.owns_lock()) return false;
    grow(parts - 1);
    errors_.assign(static_cast<size_t>(parts), nullptr);
    {
      std::lock_guard<std::mutex> lock(m_);
      part_ = &part;
      parts_ = parts;
      pending_.store(parts - 1, std::memory_order_relaxed);
      generation_.fetch_add(1, std::memory_order_release);
    }
    wake_.notify_all();
    run_part(part, 0);
    if (!spin_until([&] { return pending_.load(std::memory_order_acquire) == 0; })) {
      std::unique_lock<std::mutex> lock(m_);
      done_.wait(lock, [&] { return pending_.load(std::memory_order_acquire) == 0; });
    }
    for (auto& e : errors_) {
      if (e) std::rethrow_exception(e);
    }
    return true;
  }

 private:
  void grow(int64_t workers) {
    while (static_cast<int64_t>(count_) < workers) {
      // The worker starts from the generation before this job's, which it must not miss however
      // late the thread gets going.
      std::thread(&Pool::work, this, static_cast<int64_t>(count_) + 1, generation_.load()).detach();
      ++count_;
    }
  }

  void run_part(const std::function<void(int64_t)>& part, int64_t p) {
    t_in_parallel = true;
    try {
      part(p);
    } catch (...) {
      errors_[static_cast<size_t>(p)] = std::current_exception();
    }
    t_in_parallel = false;
  }

  void work(int64_t index, uint64_t seen) {
    for (;;) {
      auto fresh = [&] { return generation_.load(std::memory_order_acquire) != seen; };
      if (!spin_until(fresh)) {
        std::unique_lock<std::mutex> lock(m_);
        wake_.wait(lock, fresh);
      }
      // The job and its generation are read together under the lock: read separately, a worker
      // that skips one job could pair its generation with the next job's part count and run a
      // part of that next job twice.
      const std::function<void(int64_t)>* part;
      int64_t parts;
      {
        std::lock_guard<std::mutex> lock(m_);
        seen = generation_.load(std::memory_order_relaxed);
        part = part_;
        parts = parts_;
      }
      if (index >= parts) continue;  // this job needs fewer workers
      run_part(*part, index);
      if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
        std::lock_guard<std::mutex> lock(m_);
        done_.notify_one();
      }
    }
  }

  std::mutex busy_;  // one job at a time
  size_t count_ = 0;  // workers started (guarded by busy_)
  std::mutex m_;
  std::condition_variable wake_, done_;
  std::atomic<uint64_t> generation_{0};
  std::atomic<int64_t> pending_{0};
  // The job (guarded by m_, set together with the generation).
  const std::function<void(int64_t)>* part_ = nullptr;
  int64_t parts_ = 0;
  std::vector<std::exception_ptr> errors_;
};

std::atomic<Pool*> g_pool{nullptr};

Pool& pool() {
  static const bool registered = [] {
    pthread_atfork(nullptr, nullptr, [] { g_pool.store(new Pool, std::memory_order_relaxed); });
    g_pool.store(new Pool, std::memory_order_release);
    return true;
  }();
  (void)registered;
  return *g_pool.load(std::memory_order_acquire);
}

}  // namespace

int num_threads() {
  const int n = g_threads.load(std::memory_order_relaxed);
  return n > 0 ? n : hardware_threads();
}

void set_num_threads(int n) { g_threads.store(n > 0 ? n : 0, std::memory_order_relaxed); }

bool in_parallel_region() { return t_in_parallel; }

bool run_on_pool(int64_t parts, const std::function<void(int64_t)>& part) { return pool().run(parts, part); }

}  // namespace npupack
