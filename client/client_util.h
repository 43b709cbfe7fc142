// Helpers the ckprof commands share: connecting with the standard error message, parsing
// job ids and GPU lists, and formatting durations and ages.
#pragma once

#include <signal.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "client/commands.h"
#include "client/connection.h"

namespace ckprof {

// Prints "ckprof CMD: message" to stderr, its control characters escaped (EscapeControl). A message
// that already starts with "CMD: " (the daemon names the request it refuses: "submit: ...") gets
// the command's name once.
void PrintError(const std::string& cmd, const std::string& message);

// Connects to the daemon named by the global options. On failure prints "ckprof CMD: <why>"
// and returns nullptr; the caller exits with kExitUnreachable.
std::unique_ptr<Connection> ConnectOrReport(const GlobalOptions& global, const std::string& cmd);

// Connects, sends `request` and stores the daemon's reply (the request's Reply) in *reply.
// Returns 0, or the exit code after printing why: kExitUnreachable when no daemon answers (or
// it went away before answering), 1 when it refused.
// `error`, when given, also receives the message.
template <typename R>
requires IsRequest<R>
int Ask(const GlobalOptions& global, const std::string& cmd, const R& request,
        typename R::Reply* reply, std::string* error = nullptr) {
  auto conn = Connection::Open(ResolveSocketPath(global.socket));
  if (!conn) {
    PrintError(cmd, conn.error());
    if (error) *error = conn.error();
    return kExitUnreachable;
  }
  auto a = (*conn)->Call(request);
  if (!a) {
    PrintError(cmd, a.error());
    if (error) *error = a.error();
    return (*conn)->lost() ? kExitUnreachable : 1;
  }
  *reply = std::move(*a);
  return 0;
}

// A job's results (its summary and every task; their captures and configs `with_output`;
// a repeated job's runs too, besides the merged results, `with_runs`).
Result<ResultsReply> FetchResults(Connection& conn, int64_t job_id, bool with_output,
                                  bool with_runs = false);

// Jobs as a JSON array of their summaries (status, list, wait --json).
nlohmann::json JobsJson(const std::vector<JobSummary>& jobs);

// "-1000..1000": the priority's range (kMinPriority..kMaxPriority), for --help texts.
std::string PriorityRange();
// A priority (submit/edit --priority, boost PRIORITY, named `what`): an integer in the range,
// or the error "WHAT must be an integer from -1000 to 1000, got 'x'".
Result<int> ReadPriority(const std::string& text, const std::string& what);
// ReadPriority; nullopt after printing its error as "ckprof CMD: ...".
std::optional<int> ParsePriorityArg(const std::string& text, const std::string& what,
                                    const std::string& cmd);

// "12" -> 12; prints "ckprof CMD: JOB must be a job id (a positive integer), got 'x'" else.
std::optional<int64_t> ParseJobId(const std::string& text, const std::string& cmd);
// ParseJobId of each; nullopt after printing the first bad one's error.
std::optional<std::vector<int64_t>> ParseJobIds(const std::vector<std::string>& texts,
                                                const std::string& cmd);

// --gpus "0,1,3" or "0-3" -> {0,1,2,3}; the error "--gpus: <why>" when malformed.
Result<std::vector<int>> ReadGpuList(const std::string& text);

// A time as ParseWhen (common/time_text.h) reads it, seen now: "+30m", "09:00", "tomorrow
// 09:00", "2026-11-30T02:00", "now", unix seconds, ... nullopt when it is none of these.
std::optional<double> ParseTime(const std::string& text);
// A span of time: "90" or "90s", "30m", "12h", "7d", "2w" (seconds). nullopt when malformed.
std::optional<double> ParseDurationArg(const std::string& text);

// "1:05:03", "3:07", "0:04" for seconds; "-" when negative.
std::string FormatDuration(double seconds);
// "45s", "12m", "3h", "2d" since a unix time.
std::string FormatAge(double unix_time);
bool StdoutIsTerminal();
// "09:19" today, else "2026-12-02 09:19": local time.
std::string FormatClock(double unix_time);
// Whether states are coloured: stdout is a terminal, NO_COLOR is unset or empty, TERM is not
// "dumb" (https://no-color.org).
bool UseColour();
// A job state's name, coloured when UseColour (green: finished, cyan: running/cancelling,
// yellow: queued/waiting, dim: cancelled).
std::string ColourState(JobState state);

// A task as the views name it: "#3 fwd (rank 2)", of a repeated job "#3 fwd (rank 2) run 1".
std::string TaskLabel(const TaskResult& t);

// A job's tasks in the words every view uses (TaskCounts::Describe); a cancelled job first says
// how many ran: "3 of 10 ran: 2 succeeded, 1 failed, 7 cancelled".
std::string JobCountsText(const JobSummary& job);
// How far a job got, as `status` counts it (DONE of DONE/TOTAL): its final tasks; of a cancelled
// job, and of one whose queued tasks are still being cancelled, those that ran.
int64_t JobDone(const JobSummary& job);
// "partial: job 7 still running" (waiting, queued, cancelling) while a job has not ended; "" once
// it has.
std::string PartialNote(const JobSummary& job);

// The absolute form of a path against the current directory (no symlink resolution).
std::string AbsolutePath(const std::string& path);

// "-" as an INPUT or OUTPUT argument means stdin or stdout.
inline bool IsStdio(const std::string& path) { return path == "-"; }
// How messages name an input or output: "stdin"/"stdout" for "-", else the path itself.
std::string InputLabel(const std::string& path);
std::string OutputLabel(const std::string& path);
// The whole of stdin, as it is (not decompressed). Errors: "cannot read stdin: <reason>".
Result<std::string> ReadStdinBytes();
// While one lives, a SIGBUS (a mapped input cut short as it is read: MappedFile) prints
// `message` on stderr and exits 1, rather than a bare "Bus error". One at a time.
class SigbusExit {
 public:
  explicit SigbusExit(const std::string& message);
  ~SigbusExit();
  SigbusExit(const SigbusExit&) = delete;
  SigbusExit& operator=(const SigbusExit&) = delete;

 private:
  struct sigaction previous_ {};
};
// Errors about text converted in memory start "input: "; this names it `label` instead.
std::string NameInput(const std::string& error, const std::string& label);
// The daemon's refusal of a submit as the user should read it: the input named once, as it
// was given (the daemon calls the content it converts "input"), and for an input with nothing
// to profile, the reason `ckprof convert` gives (from `refusal`, the refused answer). `label`
// names the input as given ("stdin", "data/trace.json"), `input_name` as sent.
std::string RefusalMessage(const std::string& error, const ErrorReply& refusal,
                           const std::string& label, const std::string& input_name);
// The width tables fit: 0 (unlimited) with `wide` or when stdout is not a terminal and
// COLUMNS is unset; else the terminal's width (COLUMNS when the terminal does not say).
size_t TerminalWidth(bool wide);
// ASCII lower case: option values are accepted in any case ("NHWC", "Fp16").
std::string Lowercase(std::string text);

// The format a command writes, as the user asked for it and never by where it goes (a pipe
// gets what a terminal gets): `format` (--format, any case; `json` true: --json, the same as
// --format json), else the extension of `output` (--output; "" or "-" is stdout), else
// `formats`' first, the default. Extensions: .json json, .csv csv, .md/.markdown md,
// .html/.htm html, .txt table, each only where `formats` holds it. Errors (the caller prints
// them and exits 2): a format not in `formats`, --json against another --format, an output
// file whose extension names no format of `formats` (a file named "res" or "res.dat": which
// was meant cannot be told; the message names the choices).
Result<std::string> PickFormat(const std::string& format, bool json, const std::string& output,
                               const std::vector<std::string>& formats);

}  // namespace ckprof
