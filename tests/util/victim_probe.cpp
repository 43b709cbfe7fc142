#include "tests/util/victim_probe.h"

#include <signal.h>

#include <nlohmann/json.hpp>
#include <stdexcept>

#include "tests/util/files.h"

namespace ckprof::testing {

VictimProbe::VictimProbe(const SystemUser& user, const std::string& socket, int64_t job,
                         int interval_ms) {
  std::vector<std::string> argv = user.As();
  argv.push_back(SharedBinPath("status_probe"));
  argv.push_back(socket);
  argv.push_back("--interval-ms");
  argv.push_back(std::to_string(interval_ms));
  if (job > 0) {
    argv.push_back("--job");
    argv.push_back(std::to_string(job));
  }
  probe_ = std::make_unique<BackgroundCommand>(argv);
  if (!probe_->WaitForOutput("ready", 30)) {
    auto r = probe_->Finish(5);
    throw std::runtime_error("the victim's status probe was never answered: " + r.out + r.err);
  }
}

VictimProbe::~VictimProbe() = default;

VictimFigures VictimProbe::Stop() {
  probe_->Signal(SIGTERM);
  CommandResult r = probe_->Finish(30);
  VictimFigures f;
  f.text = r.out;
  auto j = nlohmann::json::parse(r.out, nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    f.errors = -1;
    f.first_error = "the probe printed no figures: " + r.out + r.err;
    return f;
  }
  f.requests = j.value("requests", 0);
  f.errors = j.value("errors", 0);
  f.p50_ms = j.value("p50_ms", 0.0);
  f.p99_ms = j.value("p99_ms", 0.0);
  f.max_ms = j.value("max_ms", 0.0);
  f.first_error = j.value("first_error", "");
  return f;
}

}  // namespace ckprof::testing
