// Service: ckprofd's request handlers — one per request kind, reached through one dispatch
// switch. It checks what the caller may do, converts submitted inputs (on a worker pool, so
// the io thread keeps serving) and asks the Scheduler to act. Streaming `watch` is the
// Server's job; everything else answers with one JSON response.
//
// Call Handle() on the daemon's io thread; it resumes there.
#pragma once

#include <asio.hpp>
#include <nlohmann/json.hpp>

#include "common/protocol.h"
#include "daemon/daemon_config.h"
#include "daemon/scheduler.h"

namespace ckprof {

class Service {
 public:
  // `pool` runs conversions; `config` is read for policy (allowed roots, default profiler).
  Service(asio::any_io_executor io, asio::thread_pool& pool, Scheduler& scheduler,
          const DaemonConfig& config);

  asio::awaitable<nlohmann::json> Handle(const Request& request, const Identity& who);

  Scheduler& scheduler() { return scheduler_; }
  // Resume the calling coroutine on the conversion pool, and back on the io thread: for work
  // that would stall every other client (a large frame's parse, a conversion).
  asio::awaitable<void> ToPool();
  asio::awaitable<void> ToIo();
  void set_config(const DaemonConfig& c) { config_ = c; }

 private:
  asio::awaitable<nlohmann::json> HandleSubmit(const Request& r, const Identity& who);
  nlohmann::json HandleStatus(const Request& r);
  nlohmann::json HandleResults(const Request& r);
  nlohmann::json HandleCancel(const Request& r, const Identity& who);
  nlohmann::json HandleRetry(const Request& r, const Identity& who);
  nlohmann::json HandleBoost(const Request& r, const Identity& who);
  nlohmann::json HandleGpus(const Request& r);
  nlohmann::json HandleDrain(const Request& r, const Identity& who, bool drain);
  // Whether `who` may run the profiler at `path` through this daemon; the error says why not.
  Status CheckProfilerPolicy(const std::string& path, const Identity& who) const;

  asio::any_io_executor io_;
  asio::thread_pool& pool_;
  Scheduler& scheduler_;
  DaemonConfig config_;
};

}  // namespace ckprof
