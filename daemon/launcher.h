// Launcher: the scheduler's seam to the outside world of processes. ProcessLauncher runs real
// profilers through ProcessRunner; tests may substitute a fake. All calls and callbacks happen
// on the daemon's io thread.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "common/protocol.h"
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

  // The executor's name, as the config's `executor` kind says it ("local", "slurm"): what
  // `gpus` answers and a Placement carries.
  virtual std::string_view Name() const = 0;
  // A remote launcher (a cluster's: SlurmLauncher) pins the GPU itself (RunSpec::set_env
  // holds no pin variable for it), takes no host lock, and its runs outlive the daemon: a
  // stopping daemon leaves them running, and the next one follows them with Adopt.
  virtual bool Remote() const { return false; }
  // What an admin who drains one of its GPUs is told, for a launcher whose GPUs are not the
  // daemon's to drain (a cluster's: its own way to drain a node); "" = the daemon drains them.
  virtual std::string DrainAdvice() const { return ""; }
  // Follows a run a previous daemon started: `handle` is what its on_started gave (the
  // cluster's job id; 0 when it was not stored: the launcher looks for it). on_done as Start's.
  virtual RunId Adopt(RunSpec spec, int64_t handle, std::function<void(RunResult)> on_done) {
    (void)handle;
    return Start(std::move(spec), std::move(on_done));
  }
  // Where a remote run is now; nullopt for local runs or when unknown.
  virtual std::optional<Placement> Where(RunId id) const {
    (void)id;
    return std::nullopt;
  }
  // The cluster's GPU nodes, as last seen (empty for local runs).
  virtual std::vector<ClusterNode> Cluster() { return {}; }
  // A removed job (clean): what the launcher kept of it (a cluster's work files) may go. Its
  // runs have all ended.
  virtual void ForgetJob(int64_t job_id, const std::string& owner, uint32_t uid, uint32_t gid) {
    (void)job_id, (void)owner, (void)uid, (void)gid;
  }
  // The allocations a launcher runs its tasks in (the Slurm executor's allocation mode).
  virtual std::vector<AllocationInfo> Allocations() const { return {}; }
};

class ProcessLauncher final : public Launcher {
 public:
  // `cgroups` (may be null) gives each run a cgroup of its own (see ProcessRunner).
  explicit ProcessLauncher(asio::any_io_executor ex, TaskCgroups* cgroups = nullptr)
      : runner_(std::move(ex), cgroups) {}
  std::string_view Name() const override { return "local"; }
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
