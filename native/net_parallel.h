// Intra-batch parallelism of the dense parts of one training slice (TrainHyper.threads > 1): the caller's
// thread and T - 1 helper threads split one mini-batch's work by disjoint ranges (samples of layer 0's
// forward, rows of a dense output layer, feature rows of layer 0's update), so every row is still updated
// once per batch with the whole batch's gradient. Unlike HOGWILD workers, nothing races: the result is the
// same for every run with the same T (the ranges and the order in which partial sums are combined depend
// only on T). Helpers are plain std::threads made for the call: a batch takes milliseconds, a thread start
// and join tens of microseconds.
#pragma once
#include <cstdint>
#include <exception>
#include <thread>
#include <vector>

#include "net_internal.h"

namespace sl {
namespace net {

// Runs fn(t) for t in [0, T): t = 0 on the calling thread, the others on helper threads (each with
// flush-to-zero set, as the caller has), and returns when all are done. The first exception thrown by any
// of them is rethrown on the calling thread after every helper has finished.
template <class F>
void fork_join(uint32_t T, F&& fn) {
  if (T <= 1) {
    fn(0u);
    return;
  }
  std::vector<std::exception_ptr> err(T);
  std::vector<std::thread> helpers;
  helpers.reserve(T - 1);
  for (uint32_t t = 1; t < T; ++t) {
    try {
      helpers.emplace_back([&fn, &err, t] {
        FtzScope ftz;
        try {
          fn(t);
        } catch (...) {
          err[t] = std::current_exception();
        }
      });
    } catch (...) {  // no thread could be started: run that part here
      try {
        fn(t);
      } catch (...) {
        err[t] = std::current_exception();
      }
    }
  }
  try {
    fn(0u);
  } catch (...) {
    err[0] = std::current_exception();
  }
  for (std::thread& h : helpers) h.join();
  for (const std::exception_ptr& e : err)
    if (e) std::rethrow_exception(e);
}

// [lo, hi) of part t of T over [0, n), in multiples of `align` (the last part takes the rest).
inline void split_range(uint32_t n, uint32_t T, uint32_t t, uint32_t align, uint32_t& lo, uint32_t& hi) {
  const uint64_t blocks = (uint64_t(n) + align - 1) / align;
  lo = static_cast<uint32_t>(std::min<uint64_t>(n, blocks * t / T * align));
  hi = t + 1 == T ? n : static_cast<uint32_t>(std::min<uint64_t>(n, blocks * (t + 1) / T * align));
}

}  // namespace net
}  // namespace sl
