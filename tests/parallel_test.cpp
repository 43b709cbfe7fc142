// RunInParallel: every piece runs once, the first on the caller's thread, and an exception from
// any piece reaches the caller only after all pieces are done.
#include "common/parallel.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace ckprof {
namespace {

TEST(RunInParallel, RunsEachPieceOnceTheFirstOnTheCallersThread) {
  for (size_t n : {size_t{0}, size_t{1}, size_t{2}, size_t{5}}) {
    std::vector<std::atomic<int>> runs(n);
    std::mutex m;
    std::set<std::thread::id> ids;
    std::thread::id first;
    RunInParallel(n, [&](size_t k) {
      ++runs[k];
      std::lock_guard<std::mutex> lock(m);
      ids.insert(std::this_thread::get_id());
      if (k == 0) first = std::this_thread::get_id();
    });
    for (size_t k = 0; k < n; ++k) EXPECT_EQ(runs[k].load(), 1) << "n " << n << ", piece " << k;
    EXPECT_EQ(ids.size(), n) << "a thread per piece";
    if (n > 0) {
      EXPECT_EQ(first, std::this_thread::get_id());
    }
  }
}

TEST(RunInParallel, AnExceptionReachesTheCallerOnceEveryPieceIsDone) {
  std::atomic<int> done{0};
  try {
    RunInParallel(4, [&](size_t k) {
      if (k == 1 || k == 3) throw std::runtime_error("piece " + std::to_string(k));
      std::this_thread::sleep_for(std::chrono::milliseconds(20));  // ends after the throws
      ++done;
    });
    ADD_FAILURE() << "no exception";
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "piece 1");  // the lowest index's
  }
  EXPECT_EQ(done.load(), 2) << "pieces 0 and 2 finished before the exception came out";
}

}  // namespace
}  // namespace ckprof
