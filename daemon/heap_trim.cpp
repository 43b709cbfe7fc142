#include "daemon/heap_trim.h"

#include <mutex>
#include <system_error>
#include <thread>

#ifdef __GLIBC__  // (defined once a C library header is in)
#include <malloc.h>
#endif

namespace ckprof {
namespace {

std::mutex trim_mu;
bool trim_running = false;  // a trimming thread is under way
bool trim_again = false;    // asked for again while it ran

}  // namespace

void TrimHeap() {
#ifdef __GLIBC__
  malloc_trim(0);
#endif
}

void ConfigureHeap() {
#ifdef __GLIBC__
  mallopt(M_MXFAST, 0);
#endif
}

void TrimHeapSoon() {
  {
    std::lock_guard<std::mutex> lock(trim_mu);
    if (trim_running) {
      trim_again = true;
      return;
    }
    trim_running = true;
  }
  try {
    std::thread([] {
      for (;;) {
        TrimHeap();
        std::lock_guard<std::mutex> lock(trim_mu);
        if (!trim_again) {
          trim_running = false;
          return;
        }
        trim_again = false;
      }
    }).detach();
  } catch (const std::system_error&) {  // no thread to be had: here, then
    TrimHeap();
    std::lock_guard<std::mutex> lock(trim_mu);
    trim_running = false;
  }
}

}  // namespace ckprof
