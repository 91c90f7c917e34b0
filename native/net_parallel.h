// Intra-batch parallelism of the dense parts of one training slice (TrainHyper.threads > 1) and of the
// re-ranker's solver: the caller's thread and T - 1 helper threads split one piece of work by disjoint ranges
// (samples of layer 0's forward, rows of a dense output layer, feature rows of layer 0's update, labels), so
// every row is still updated once per batch with the whole batch's gradient. Unlike HOGWILD workers, nothing
// races: the result is the same for every run with the same T (the ranges and the order in which partial
// sums are combined depend only on T).
//
// The helpers are persistent, one set per calling thread (thread_local: each piscina worker that trains
// with threads > 1 has its own), and wait for work by spinning for a while before they sleep. A training
// batch forks and joins several times, a few hundred microseconds of work each time at a 256-wide layer:
// starting a std::thread per fork (what this did before) cost 20 us per fork on an idle machine, and on a
// loaded one each new or woken thread waited for a core (2-vCPU AMD EPYC with other jobs running: 2 threads
// per batch trained 2x slower than 1). A spinning helper is already running when the work arrives.
#pragma once
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "net_internal.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace sl {
namespace net {

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

// The helpers of one calling thread. run(T, fn) runs fn(0) .. fn(T-1), each exactly once, on the caller and
// its helpers, returns when all are done, and rethrows the first exception any of them threw. The caller runs
// part 0 at once and then claims the parts no helper has claimed yet: a helper that does not get a core in
// time (a loaded machine) costs nothing but its wake-up, and the call takes no longer than on one thread.
// Which thread runs a part does not change the result: every part writes its own outputs and scratch
// (indexed by part, not by thread), and the caller combines them in part order.
class ForkJoinPool {
 public:
  ForkJoinPool() = default;
  ForkJoinPool(const ForkJoinPool&) = delete;
  ForkJoinPool& operator=(const ForkJoinPool&) = delete;
  ~ForkJoinPool() {
    {
      std::lock_guard<std::mutex> lk(m_);
      stop_.store(true);
      gen_.fetch_add(1);
    }
    cv_.notify_all();
    for (std::thread& h : helpers_) h.join();
  }

  // The pool of the calling thread (made on first use, joined when the thread exits).
  static ForkJoinPool& of_this_thread() {
    thread_local std::unique_ptr<ForkJoinPool> pool(new ForkJoinPool());
    return *pool;
  }

  template <class F>
  void run(uint32_t T, F& fn) {
    ensure_helpers(T - 1);
    call_ = [](void* ctx, uint32_t t) { (*static_cast<F*>(ctx))(t); };
    ctx_ = const_cast<void*>(static_cast<const void*>(&fn));
    err_.assign(T, nullptr);
    done_.store(0, std::memory_order_relaxed);
    const uint32_t g = static_cast<uint32_t>(gen_.load(std::memory_order_relaxed)) + 1;
    parts_.store(T, std::memory_order_relaxed);
    // Part 0 is the caller's; the claim word names its job, so that a helper still leaving the previous
    // job cannot claim a part of this one.
    claim_.store(uint64_t(g) << 32 | 1u, std::memory_order_relaxed);
    gen_.store(g);  // publishes the job (seq_cst: ordered before the sleepers check below)
    if (sleepers_.load() > 0) {
      std::lock_guard<std::mutex> lk(m_);
      cv_.notify_all();
    }
    run_part(0);
    for (uint32_t t; (t = claim(g, T)) < T;) run_part(t);
    // The parts helpers claimed and are still running.
    for (uint32_t spins = 0; done_.load(std::memory_order_acquire) != T; ++spins) {
      if (spins < 4096) cpu_relax();
      else std::this_thread::yield();
    }
    for (const std::exception_ptr& e : err_)
      if (e) std::rethrow_exception(e);
  }

 private:
  // How long an idle helper spins before it sleeps: longer than the gaps between the forks of one batch and
  // between batches (the main thread's hand-off), short enough to give the core back soon after training.
  static constexpr std::chrono::microseconds kSpin{1000};

  // The next unclaimed part of job g (T parts), or T when none is left or the job is over.
  uint32_t claim(uint32_t g, uint32_t T) {
    uint64_t c = claim_.load(std::memory_order_relaxed);
    for (;;) {
      if (uint32_t(c >> 32) != g || uint32_t(c) >= T) return T;
      if (claim_.compare_exchange_weak(c, c + 1, std::memory_order_acq_rel, std::memory_order_relaxed)) return uint32_t(c);
    }
  }

  void run_part(uint32_t t) {
    try {
      call_(ctx_, t);
    } catch (...) {
      err_[t] = std::current_exception();
    }
    done_.fetch_add(1, std::memory_order_acq_rel);
  }

  void ensure_helpers(uint32_t n) {
    while (helpers_.size() < n) {
      try {
        // The generation before the job that needs it: a new helper must not take that job's for seen.
        const uint32_t seen = static_cast<uint32_t>(gen_.load());
        helpers_.emplace_back([this, seen] { loop(seen); });
      } catch (...) {
        return;  // no thread could be started: the caller runs those parts itself
      }
    }
  }

  void loop(uint32_t seen) {
    FtzScope ftz;  // as the kernels' callers set it
    for (;;) {
      uint32_t g = static_cast<uint32_t>(gen_.load(std::memory_order_acquire));
      if (g == seen) {
        const auto t0 = std::chrono::steady_clock::now();
        for (uint32_t spins = 0; (g = static_cast<uint32_t>(gen_.load(std::memory_order_acquire))) == seen; ++spins) {
          cpu_relax();
          if ((spins & 255) == 255 && std::chrono::steady_clock::now() - t0 > kSpin) {
            std::unique_lock<std::mutex> lk(m_);
            sleepers_.fetch_add(1);
            cv_.wait(lk, [&] { return static_cast<uint32_t>(gen_.load()) != seen; });
            sleepers_.fetch_sub(1);
          }
        }
      }
      seen = g;
      if (stop_.load()) return;
      const uint32_t T = parts_.load(std::memory_order_relaxed);
      for (uint32_t t; (t = claim(g, T)) < T;) run_part(t);
    }
  }

  std::vector<std::thread> helpers_;
  std::atomic<uint64_t> gen_{0};    // job number (its low 32 bits name it in claim_)
  std::atomic<uint64_t> claim_{0};  // job number << 32 | next unclaimed part
  std::atomic<uint32_t> parts_{0};
  std::atomic<uint32_t> done_{0};
  std::atomic<uint32_t> sleepers_{0};
  std::atomic<bool> stop_{false};
  void (*call_)(void*, uint32_t) = nullptr;
  void* ctx_ = nullptr;
  std::vector<std::exception_ptr> err_;
  std::mutex m_;
  std::condition_variable cv_;
};

// Runs fn(t) for t in [0, T): t = 0 on the calling thread, the others on its pool's helper threads (with
// flush-to-zero set), and returns when all are done. The first exception thrown by any of them is rethrown
// on the calling thread after every part has finished.
template <class F>
void fork_join(uint32_t T, F&& fn) {
  if (T <= 1) {
    fn(0u);
    return;
  }
  ForkJoinPool::of_this_thread().run(T, fn);
}

// [lo, hi) of part t of T over [0, n), in multiples of `align` (the last part takes the rest).
inline void split_range(uint32_t n, uint32_t T, uint32_t t, uint32_t align, uint32_t& lo, uint32_t& hi) {
  const uint64_t blocks = (uint64_t(n) + align - 1) / align;
  lo = static_cast<uint32_t>(std::min<uint64_t>(n, blocks * t / T * align));
  hi = t + 1 == T ? n : static_cast<uint32_t>(std::min<uint64_t>(n, blocks * (t + 1) / T * align));
}

}  // namespace net
}  // namespace sl
