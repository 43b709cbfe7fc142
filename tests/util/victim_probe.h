// VictimProbe: another real user's `status` latency while a test attacks the daemon. Runs
// bench's status_probe as that user (a new connection, the hello and a status request every
// 50 ms, as `ckprof status` does) from before the attack to after it; the test then checks
// that the victim was served (no error, p99 under 100 ms). Test threads only.
#pragma once

#include <memory>
#include <string>

#include "tests/util/commands.h"
#include "tests/util/users.h"

namespace ckprof::testing {

struct VictimFigures {
  int requests = 0, errors = 0;
  double p50_ms = 0, p99_ms = 0, max_ms = 0;
  std::string first_error;  // "" when every request was answered
  std::string text;         // the probe's line, for failure messages
};

class VictimProbe {
 public:
  // Starts the probe as `user` against `socket` and waits until it has been answered once
  // (throws when it never is within 30 s). `job`: status of that job instead of the list.
  VictimProbe(const SystemUser& user, const std::string& socket, int64_t job = 0,
              int interval_ms = 50);
  ~VictimProbe();
  VictimProbe(const VictimProbe&) = delete;
  VictimProbe& operator=(const VictimProbe&) = delete;

  // Stops the probe and returns what it measured.
  VictimFigures Stop();

 private:
  std::unique_ptr<BackgroundCommand> probe_;
};

}  // namespace ckprof::testing
