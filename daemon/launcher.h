// Launcher: the scheduler's seam to the outside world of processes. ProcessLauncher runs real
// profilers through ProcessRunner; tests may substitute a fake. All calls and callbacks happen
// on the daemon's io thread.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>

#include "daemon/runner.h"

namespace ckprof {

class Launcher {
 public:
  using RunId = uint64_t;
  virtual ~Launcher() = default;
  // Starts a run; spec.on_started gets its process (and process group) id once it exists,
  // on_done is called exactly once, later, on the io thread.
  virtual RunId Start(RunSpec spec, std::function<void(RunResult)> on_done) = 0;
  virtual bool Cancel(RunId id) = 0;
  virtual bool Interrupt(RunId id) = 0;
  virtual size_t running() const = 0;
  // What a run has written so far (see ProcessRunner::Output); nullopt when unknown.
  virtual std::optional<RunOutput> Output(RunId id) const = 0;
};

class ProcessLauncher final : public Launcher {
 public:
  // `cgroups` (may be null) gives each run a cgroup of its own (see ProcessRunner).
  explicit ProcessLauncher(asio::any_io_executor ex, TaskCgroups* cgroups = nullptr)
      : runner_(std::move(ex), cgroups) {}
  RunId Start(RunSpec spec, std::function<void(RunResult)> on_done) override {
    return runner_.Start(std::move(spec), std::move(on_done));
  }
  bool Cancel(RunId id) override { return runner_.Cancel(id); }
  bool Interrupt(RunId id) override { return runner_.Interrupt(id); }
  size_t running() const override { return runner_.running(); }
  std::optional<RunOutput> Output(RunId id) const override { return runner_.Output(id); }

 private:
  ProcessRunner runner_;
};

}  // namespace ckprof
