#include "common/parallel.h"

#include <exception>
#include <system_error>
#include <thread>
#include <vector>

namespace ckprof {

void RunInParallel(size_t n, const std::function<void(size_t)>& fn) {
  if (n == 0) return;
  std::vector<std::exception_ptr> failed(n);
  auto run = [&](size_t k) {
    try {
      fn(k);
    } catch (...) {
      failed[k] = std::current_exception();
    }
  };
  std::vector<std::thread> threads;
  threads.reserve(n);
  size_t started = 1;
  try {
    for (; started < n; ++started) threads.emplace_back(run, started);
  } catch (const std::system_error&) {  // no more threads: the rest runs here
  }
  run(0);
  for (size_t k = started; k < n; ++k) run(k);
  for (auto& t : threads) t.join();
  for (const auto& e : failed) {
    if (e) std::rethrow_exception(e);
  }
}

}  // namespace ckprof
