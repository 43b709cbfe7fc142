// RunInParallel: a few independent pieces of one piece of work at once, on short-lived threads.
// Used where a large input is split by hand (a configs list's runs, a submit's task records).
#pragma once

#include <cstddef>
#include <functional>

namespace ckprof {

// Runs fn(0), ..., fn(n - 1) at once: fn(0) on the calling thread, the others on threads of
// their own (or, when no thread can be had, on the calling thread after fn(0)). Returns when all
// are done. An exception thrown by any of them is rethrown here (the lowest index's), as if all
// had run on the calling thread.
void RunInParallel(size_t n, const std::function<void(size_t)>& fn);

}  // namespace ckprof
