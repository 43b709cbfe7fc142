// Accounting (`ckprof usage`, as sacct and sshare tell it): Service::HandleUsage counts the
// stored attempts per job and outcome (Store::TallyAttempts: one aggregate query) on the
// conversion pool, through a read-only connection of its own, since the query visits every
// attempt's task row (6 to 8 s for a million attempts in a 2 GB database, on a busy 2-core
// machine), one scan at a time (usage_gate_); back on the io thread, Scheduler::Usage adds them up
// per user and job and adds fair share's view from the QueuePolicy.
#include <pwd.h>

#include <asio/experimental/as_tuple.hpp>
#include <map>
#include <vector>

#include "common/outcome.h"
#include "daemon/scheduler.h"
#include "daemon/service.h"
#include "daemon/unix_time.h"
#include "daemon/user_names.h"

namespace ckprof {

namespace {

// Adds a group of attempts (one job, one outcome) to a row.
void Add(const Store::AttemptTally& t, UsageRow* row) {
  row->gpu_seconds += t.gpu_seconds;
  row->runs += t.attempts;
  const std::optional<Outcome::Kind> kind = ParseOutcomeKindName(t.outcome);  // none: running
  if (kind && *kind == Outcome::Kind::kSucceeded) row->succeeded += t.attempts;
  if (kind && IsFailure(*kind)) row->failed += t.attempts;
}

// `usage --user`: a name or a uid, as the daemon's machine knows it; -1 with no such user.
int64_t UidOf(const std::string& user) {
  if (!user.empty() && user.size() <= 10 &&
      user.find_first_not_of("0123456789") == std::string::npos) {
    const int64_t uid = std::stoll(user);
    return uid <= 0xffffffffLL ? uid : -1;
  }
  struct passwd pw {};
  struct passwd* found = nullptr;
  std::vector<char> buf(16384);
  if (getpwnam_r(user.c_str(), &pw, buf.data(), buf.size(), &found) == 0 && found) {
    return pw.pw_uid;
  }
  return -1;
}

}  // namespace

UsageReply Scheduler::Usage(const std::vector<Store::AttemptTally>& tallies, int64_t uid,
                            bool per_job) const {
  std::map<uint32_t, UsageRow> users;  // by uid
  std::map<int64_t, UsageRow> jobs;    // by job id
  for (const Store::AttemptTally& t : tallies) {
    UsageRow& u = users[t.uid];
    u.user = t.owner;
    Add(t, &u);
    if (!per_job) continue;
    UsageRow& j = jobs[t.job_id];
    j.user = t.owner;
    j.uid = t.uid;
    j.job_id = t.job_id;
    j.job_name = t.job_name;
    Add(t, &j);
  }
  // Fair share: every user with an account (their usage decays on after their jobs are
  // cleaned), placed when they have queued work.
  const double now = UnixNow();
  auto wanted = [uid](uint32_t u) { return uid < 0 || u == uid; };
  for (const auto& [account, usage] : policy_.AllUsage()) {
    if (wanted(account)) users[account];
  }
  const std::vector<uint32_t> order = policy_.FairShareOrder(now);
  for (size_t i = 0; i < order.size(); ++i) {
    if (wanted(order[i])) users[order[i]].place = static_cast<int64_t>(i) + 1;
  }
  UsageReply reply;
  reply.half_life_s = policy_.half_life_s();
  for (auto& [u, row] : users) {
    row.uid = u;
    if (row.user.empty()) row.user = UserNameOf(u);
    row.fair_share_usage = policy_.EffectiveUsage(u, now);
    reply.users.push_back(std::move(row));
  }
  for (auto& [id, row] : jobs) reply.jobs.push_back(std::move(row));
  return reply;
}

// Every user sees everyone's usage, as `status` shows everyone's jobs (sshare's default).
asio::awaitable<Service::Answer<UsageReply>> Service::HandleUsage(const UsageRequest& r,
                                                                  const Identity& who) {
  if (!co_await usage_turn_.Enter(who.uid))
    co_return Refusal{"usage: ckprofd is stopping", std::nullopt};
  const double now = UnixNow();
  const std::string path = Store::FileIn(config_.state_dir);
  co_await ToPool();  // the user's name looked up (NSS may ask a network), the Store read
  const int64_t uid = r.user.empty() ? -1 : UidOf(r.user);
  auto tallies = uid < 0 && !r.user.empty()
                     ? Result<std::vector<Store::AttemptTally>>(std::vector<Store::AttemptTally>{})
                     : Store::TallyAttempts(path, r.since, now, uid);
  co_await ToIo();
  usage_turn_.Leave();
  if (!r.user.empty() && uid < 0) {
    co_return Refusal{
        "usage: --user " + r.user + ": no such user on the daemon's machine (a name or a uid)",
        std::nullopt};
  }
  if (!tallies) co_return Refusal{"usage: " + tallies.error(), std::nullopt};
  UsageReply reply = scheduler_.Usage(*tallies, uid, r.jobs);
  reply.since = r.since;
  reply.now = now;
  reply.you = UseAndLimits(who);
  co_return reply;
}

}  // namespace ckprof
