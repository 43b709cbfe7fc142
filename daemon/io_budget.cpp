#include "daemon/io_budget.h"

#include <algorithm>

namespace ckprof {

double IoBudget::Filled(const Bucket& b, Clock::time_point now) {
  const double elapsed = std::max(0.0, std::chrono::duration<double>(now - b.at).count());
  return std::min(kBurst, b.tokens + elapsed * kRate);
}

IoBudget::Clock::duration IoBudget::Wait(uid_t uid, Clock::time_point now) {
  const auto it = users_.find(uid);
  if (it == users_.end()) return Clock::duration::zero();
  const double tokens = Filled(it->second, now);
  if (tokens >= 0) return Clock::duration::zero();
  return std::chrono::duration_cast<Clock::duration>(
      std::chrono::duration<double>(-tokens / kRate));
}

void IoBudget::Charge(uid_t uid, double seconds, Clock::time_point now) {
  Prune(now);
  if (seconds <= 0) return;
  auto [it, fresh] = users_.try_emplace(uid);
  Bucket& b = it->second;
  const double tokens = fresh ? kBurst : Filled(b, now);
  b.tokens = std::max(-kBurst, tokens - seconds);
  b.at = now;
}

bool IoBudget::Tell(uid_t uid, Clock::time_point now) {
  if (!users_.contains(uid)) return false;
  auto [it, fresh] = told_.try_emplace(uid, now);
  if (!fresh && now - it->second < std::chrono::minutes(1)) return false;
  it->second = now;
  return true;
}

double IoBudget::Tokens(uid_t uid, Clock::time_point now) const {
  const auto it = users_.find(uid);
  return it == users_.end() ? kBurst : Filled(it->second, now);
}

void IoBudget::Prune(Clock::time_point now) {
  if (now - pruned_ < std::chrono::seconds(1)) return;
  pruned_ = now;
  std::erase_if(users_, [&](const auto& entry) { return Filled(entry.second, now) >= kBurst; });
  std::erase_if(told_,
                [&](const auto& entry) { return now - entry.second >= std::chrono::minutes(1); });
}

}  // namespace ckprof
