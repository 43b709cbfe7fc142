// The Slurm executor's allocation mode (config `executor`: {"kind": "slurm", "mode":
// "allocations", ...}): ckprofd asks Slurm for allocations, each one user's batch job of `gres`
// GPUs for `allocation_time`, submitted as that user (--uid/--gid from a root ckprofd) so that
// Slurm's accounting, limits and fair share see them; the job's script runs ckprof-agent, which
// connects back to ckprofd over TCP and runs that user's tasks, one at a time per GPU, pinned
// to the GPU Slurm granted, as a local run starts (daemon/agent_main.cpp). A task then costs
// milliseconds of the GPU's time, not a Slurm job's seconds.
//
// Which task goes next is the Scheduler's (fair share, priorities: its QueuePolicy fills the
// executor's slots, max_allocations x GPUs per allocation); this launcher places each task it is
// handed on a free GPU of an allocation of the task's owner that has time enough left for the
// task's timeout, asks for a new allocation for the owner when none has, and lets an idle one
// go (after idle_release_s, or at once when another user needs its room under
// max_allocations).
//
// The channel (daemon/agent_channel.h): ckprofd listens on agent_listen:agent_port and writes
// where the agents reach it (agent_host:port) into <work_dir>/.agent-address; each allocation
// has a secret, written before its sbatch into <work_dir>/<user>/alloc-<name>/secret, readable
// by its user only; every line both ways is sealed with it, so a forged, replayed or reflected
// message is refused. A connection that has not proved itself within a few seconds is closed,
// and few such connections are kept at once.
//
// Exactly once: a run is named by its task and attempt (RunSpec::run_key), which the agent
// keeps; its handle (stored by the Scheduler) is its allocation's Slurm job id. ckprofd
// restarted finds its allocations again (squeue, by the job's comment) and their secrets, each
// agent connects again and says what it runs and what ended unacknowledged, and each run
// followed (Adopt) is matched to it: nothing runs twice, and an end is acknowledged only once
// the Scheduler recorded it. An allocation that ends (node failure, time limit, scancel) ends
// the runs in it as interrupted, with the reason, and the Scheduler requeues them.
//
// Single-threaded: the io thread only.
#pragma once

#include <asio/any_io_executor.hpp>
#include <asio/ip/tcp.hpp>
#include <asio/steady_timer.hpp>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/protocol.h"
#include "daemon/launcher.h"
#include "daemon/slurm_executor.h"

namespace ckprof {

// The batch script of an allocation (POSIX sh): it runs the agent in place of the shell.
std::string AllocationScript(const std::string& agent_bin, const std::string& address_file,
                             const std::string& name, const std::string& secret_file,
                             double reconnect_s, const std::string& comment);

class AllocationLauncher final : public Launcher {
 public:
  // `tag` names this daemon in its jobs' comments (host and state dir); `pin_env`: the variables
  // a run's GPU is pinned with (each set to the allocation's GPU the run was given).
  AllocationLauncher(asio::any_io_executor ex, SlurmSettings settings, std::string tag,
                     std::vector<std::string> pin_env);
  ~AllocationLauncher() override;
  // Checks Slurm's commands, the work dir and the agent; starts listening for agents and looks
  // for the allocations a previous ckprofd left (their agents connect again).
  Status Check();

  RunId Start(RunSpec spec, std::function<void(RunResult)> on_done) override;
  RunId Adopt(RunSpec spec, int64_t handle, std::function<void(RunResult)> on_done) override;
  bool Cancel(RunId id) override;
  bool Interrupt(RunId id) override;  // runs outlive the daemon: nothing to do
  size_t running() const override { return runs_.size(); }
  std::optional<RunOutput> Output(RunId id) const override;
  std::string_view Name() const override { return "slurm"; }
  bool Remote() const override { return true; }
  std::string DrainAdvice() const override;
  std::optional<Placement> Where(RunId id) const override;
  std::vector<ClusterNode> Cluster() override { return tools_->Cluster(); }
  std::vector<AllocationInfo> Allocations() const override;

  // Where agents reach this daemon ("host:port"), once it listens.
  const std::string& address() const { return address_; }

 private:
  struct Run;
  struct Alloc;
  struct Conn;
  using RunPtr = std::shared_ptr<Run>;
  using AllocPtr = std::shared_ptr<Alloc>;
  using ConnPtr = std::shared_ptr<Conn>;

  RunPtr NewRun(RunSpec spec, std::function<void(RunResult)> on_done);
  Status Listen();
  void Accept();
  void Session(ConnPtr conn);
  void ReadLine(ConnPtr conn, size_t max, std::function<void(std::string)> on_line);
  void OnHello(const ConnPtr& conn, const std::string& line);
  void OnSealed(const ConnPtr& conn, const std::string& line);
  void OnReady(const AllocPtr& alloc, const ConnPtr& conn, const nlohmann::json& m);
  void OnEnded(const AllocPtr& alloc, const nlohmann::json& m);
  void Drop(const ConnPtr& conn, const std::string& why);
  void Send(const ConnPtr& conn, const nlohmann::json& m);
  void WriteNext(const ConnPtr& conn);

  void SchedulePlace();
  void Place();
  bool SendRun(const AllocPtr& alloc, const RunPtr& run);
  void Request(const RunSpec& owner);
  void OnSubmitted(const AllocPtr& alloc, RunResult tool);
  void Release(const AllocPtr& alloc, const std::string& why);
  void Ended(const AllocPtr& alloc, const std::string& why);
  void Scan();
  void ArmTick();
  void Tick();
  void Poll();
  void Finish(const RunPtr& run, RunResult r);
  void FinishLater(const RunPtr& run, Outcome o);
  RunPtr FindKey(int64_t key) const;
  AllocPtr FindAlloc(const std::string& name) const;
  // Seconds a run needs of an allocation's time: its timeout, its grace and a margin (0: no
  // timeout, so any allocation).
  double Need(const Run& run) const;
  int LiveAllocations() const;

  asio::any_io_executor ex_;
  SlurmSettings settings_;
  std::string tag_;
  std::vector<std::string> pin_env_;
  std::unique_ptr<SlurmTools> tools_;
  std::optional<asio::ip::tcp::acceptor> acceptor_;
  std::string address_;
  RunId next_id_ = 1;
  std::map<RunId, RunPtr> runs_;
  std::map<std::string, AllocPtr> allocs_;    // by name
  std::deque<RunPtr> waiting_;                // handed to us, not yet on an allocation's GPU
  std::map<RunId, int64_t> adopted_handles_;  // followed runs and their allocations' job ids
  std::map<uid_t, int> failed_starts_;        // allocations in a row whose agent never came
  int unproven_ = 0;                          // connections not yet authenticated
  bool place_posted_ = false;
  bool scanned_ = false;  // the allocations a previous ckprofd left are known
  double scanned_at_ = 0;
  asio::steady_timer tick_timer_;
  bool tick_armed_ = false, polling_ = false;
  double polled_at_ = 0;
  std::shared_ptr<bool> alive_;
};

}  // namespace ckprof
