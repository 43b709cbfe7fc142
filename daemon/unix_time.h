// The daemon's clock for stored and shown times: Unix seconds, with microseconds. Any thread.
#pragma once

#include <chrono>

namespace ckprof {

// Unix time now, in seconds with microseconds.
inline double UnixNow() {
  using namespace std::chrono;
  return static_cast<double>(
             duration_cast<microseconds>(system_clock::now().time_since_epoch()).count()) /
         1e6;
}

}  // namespace ckprof
