// JobOptions: the job settings that `ckprof submit`, `edit` and `run` take on the command line
// (--priority, --gpus, --max-gpus, --not-before, --timeout), declared once with their help texts
// and read once, with one set of messages. What differs between the commands (which options
// each takes, what else a value may be, what leaving an option out means) is data:
// JobOptionRules. Used on the client's one thread.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "client/args.h"
#include "common/protocol.h"
#include "common/result.h"

namespace ckprof {

// What one command takes. Each help text is the option's shared words, then the command's
// `*_help` words (what leaving it out means, or the other values it takes).
struct JobOptionRules {
  // Which options the command takes besides --gpus and --timeout (which all of them take).
  bool priority = false;
  bool max_gpus = false;
  bool not_before = false;
  // The values edit takes besides: --gpus any (or all): every GPU; --max-gpus 0: no limit
  // (otherwise 1 is the least: leaving the option out means no limit); --timeout default: the
  // daemon's.
  bool gpus_any = false;
  bool max_gpus_zero = false;
  bool timeout_default = false;
  // Whether an option given with an empty value is refused (edit: a given option changes
  // something). Otherwise it is as if left out (`--gpus "$GPUS"` in a script).
  bool refuse_empty = false;
  std::string priority_help, gpus_help, max_gpus_help, not_before_help, timeout_help;
};

// The rules of `ckprof submit`, `ckprof edit` and `ckprof run`.
const JobOptionRules& SubmitJobOptionRules();
const JobOptionRules& EditJobOptionRules();
const JobOptionRules& RunJobOptionRules();

// The options given, checked; nullopt: left out.
struct JobSettings {
  std::optional<int> priority;
  std::optional<std::vector<int>> gpus;  // {} = any GPU
  std::optional<int> max_gpus;           // 0 = no limit
  std::optional<double> not_before;      // unix seconds
  std::optional<double> timeout_s;       // -1 = the daemon's default, 0 = none

  // Sets the request's fields of the settings given; leaves the others as they are.
  void ApplyTo(SubmitOptions* s) const;
  void ApplyTo(EditOptions* e) const;
};

// A --timeout value: seconds from 0 to the protocol's bound, or (`takes_default`) "default",
// -1: the daemon's. The error says what it takes (retry's --timeout reads it too).
Result<double> ReadTimeout(const std::string& text, bool takes_default);

class JobOptions {
 public:
  // Declares on `parser` the options `rules` takes. `parser` writes the values into this
  // object and is asked what was given: both must live until Read.
  JobOptions(const JobOptionRules& rules, ArgParser* parser);
  JobOptions(const JobOptions&) = delete;
  JobOptions& operator=(const JobOptions&) = delete;

  // After parser->Parse: the options given, checked against the rules. The error names the
  // first bad option and what it takes ("--max-gpus must be an integer from 1 to 1024, got '0'
  // (leave it out for no limit)"); the command prints it and exits 2.
  Result<JobSettings> Read() const;

  // --gpus and --timeout as given ("" when left out): `run --local` passes them on to its
  // private ckprofd (after Read has checked them).
  const std::string& gpus_text() const { return gpus_; }
  const std::string& timeout_text() const { return timeout_; }

 private:
  // Whether `name` holds a value to read (given, and not empty unless empty is refused).
  bool Has(const std::string& name, const std::string& text) const;

  const JobOptionRules& rules_;
  const ArgParser& parser_;
  std::string priority_, gpus_, max_gpus_, not_before_, timeout_;
};

}  // namespace ckprof
