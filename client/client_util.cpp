#include "client/client_util.h"

#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <iostream>
#include <regex>
#include <set>
#include <sstream>

#include "common/ck_config.h"
#include "common/convert.h"
#include "common/file_util.h"
#include "common/gpu_list.h"
#include "common/terminal_text.h"
#include "common/time_text.h"

namespace ckprof {

namespace {

bool CountsWhatRan(const JobSummary& job) {
  return job.state == JobState::kCancelled || job.state == JobState::kCancelling;
}

}  // namespace

int64_t JobDone(const JobSummary& job) {
  return CountsWhatRan(job) ? job.counts.ran() : job.done();
}

std::string JobCountsText(const JobSummary& job) {
  const TaskCounts& c = job.counts;
  std::string ran;
  if (CountsWhatRan(job)) {
    ran = std::to_string(c.ran()) + " of " + std::to_string(job.total) + " ran: ";
  }
  std::string reused;
  if (job.reused > 0) {
    reused = " (" + std::to_string(job.reused) + " of the succeeded reused from earlier runs)";
  }
  return ran + c.Describe() + reused;
}

std::string PartialNote(const JobSummary& job) {
  if (IsEnded(job.state)) return "";
  return "partial: job " + std::to_string(job.id) + " still " + std::string(EnumName(job.state));
}

void PrintError(const std::string& cmd, const std::string& message) {
  const std::string own = cmd + ": ";
  const bool named = message.compare(0, own.size(), own) == 0;
  // The daemon's refusals quote users' text (names, paths): shown escaped.
  std::cerr << "ckprof " << cmd << ": "
            << EscapeControl(named ? message.substr(own.size()) : message, LineBreaks::kKeep)
            << "\n";
}

std::string InputLabel(const std::string& path) { return IsStdio(path) ? "stdin" : path; }
std::string OutputLabel(const std::string& path) { return IsStdio(path) ? "stdout" : path; }

Result<std::string> ReadStdinBytes() {
  auto out = ReadFdBytes(STDIN_FILENO);
  if (!out) return MakeError("cannot read stdin: " + out.error());
  return out;
}

namespace {
char sigbus_message[1024];
size_t sigbus_length = 0;

void OnSigbus(int) {
  (void)!write(STDERR_FILENO, sigbus_message, sigbus_length);
  _exit(1);
}
}  // namespace

SigbusExit::SigbusExit(const std::string& message) {
  sigbus_length = std::min(message.size(), sizeof sigbus_message);
  std::memcpy(sigbus_message, message.data(), sigbus_length);
  struct sigaction sa {};
  sa.sa_handler = OnSigbus;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGBUS, &sa, &previous_);
}

SigbusExit::~SigbusExit() { sigaction(SIGBUS, &previous_, nullptr); }

std::string NameInput(const std::string& error, const std::string& label) {
  static const std::string kUnnamed = "input: ";
  if (error.compare(0, kUnnamed.size(), kUnnamed) != 0) return error;
  return label + ": " + error.substr(kUnnamed.size());
}

std::string Lowercase(std::string text) {
  for (char& c : text) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return text;
}

std::unique_ptr<Connection> ConnectOrReport(const GlobalOptions& global, const std::string& cmd) {
  auto c = Connection::Open(ResolveSocketPath(global.socket));
  if (!c) {
    PrintError(cmd, c.error());
    return nullptr;
  }
  return std::move(*c);
}

nlohmann::json JobsJson(const std::vector<JobSummary>& jobs) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& j : jobs) out.push_back(ToJson(j));
  return out;
}

Result<ResultsReply> FetchResults(Connection& conn, int64_t job_id, bool with_output,
                                  bool with_runs) {
  ResultsRequest r;
  r.job_id = job_id;
  r.all = with_output;
  r.runs = with_runs;
  return conn.Call(r);
}

std::string PriorityRange() {
  return std::to_string(kMinPriority) + ".." + std::to_string(kMaxPriority);
}

Result<int> ReadPriority(const std::string& text, const std::string& what) {
  static const std::regex integer(R"(-?\d{1,9})");
  if (!std::regex_match(text, integer) || std::stoi(text) < kMinPriority ||
      std::stoi(text) > kMaxPriority) {
    return MakeError(what + " must be an integer from " + std::to_string(kMinPriority) + " to " +
                     std::to_string(kMaxPriority) + ", got '" + text + "'");
  }
  return std::stoi(text);
}

std::optional<int> ParsePriorityArg(const std::string& text, const std::string& what,
                                    const std::string& cmd) {
  auto priority = ReadPriority(text, what);
  if (!priority) {
    PrintError(cmd, priority.error());
    return std::nullopt;
  }
  return *priority;
}

std::optional<int64_t> ParseJobId(const std::string& text, const std::string& cmd) {
  static const std::regex id(R"(\d{1,18})");
  if (std::regex_match(text, id)) {
    int64_t v = std::stoll(text);
    if (v > 0) return v;
  }
  PrintError(cmd,
             "JOB must be a job id (a positive integer, see 'ckprof list'), got '" + text + "'");
  return std::nullopt;
}

std::optional<std::vector<int64_t>> ParseJobIds(const std::vector<std::string>& texts,
                                                const std::string& cmd) {
  std::vector<int64_t> ids;
  for (const auto& text : texts) {
    auto id = ParseJobId(text, cmd);
    if (!id) return std::nullopt;
    ids.push_back(*id);
  }
  return ids;
}

Result<std::vector<int>> ReadGpuList(const std::string& text) {
  auto gpus = ParseGpuList(text);
  if (!gpus) return MakeError("--gpus: " + gpus.error());
  return gpus;
}

std::string FormatDuration(double seconds) {
  if (seconds < 0 || !std::isfinite(seconds)) return "-";
  auto s = static_cast<int64_t>(std::llround(seconds));
  char buf[32];
  if (s >= 3600) {
    std::snprintf(buf, sizeof buf, "%lld:%02lld:%02lld", static_cast<long long>(s / 3600),
                  static_cast<long long>(s / 60 % 60), static_cast<long long>(s % 60));
  } else {
    std::snprintf(buf, sizeof buf, "%lld:%02lld", static_cast<long long>(s / 60),
                  static_cast<long long>(s % 60));
  }
  return buf;
}

std::string FormatAge(double unix_time) {
  if (unix_time <= 0) return "-";
  double age = static_cast<double>(std::time(nullptr)) - unix_time;
  if (age < 0) age = 0;
  if (age < 120) return std::to_string(static_cast<int64_t>(age)) + "s";
  if (age < 7200) return std::to_string(static_cast<int64_t>(age / 60)) + "m";
  if (age < 172800) return std::to_string(static_cast<int64_t>(age / 3600)) + "h";
  return std::to_string(static_cast<int64_t>(age / 86400)) + "d";
}

bool StdoutIsTerminal() { return isatty(STDOUT_FILENO) == 1; }

size_t TerminalWidth(bool wide) {
  if (wide) return 0;
  if (StdoutIsTerminal()) {
    struct winsize ws {};
    if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0) return ws.ws_col;
  }
  // A script may set COLUMNS to ask for a width; a pipe otherwise gets every character.
  if (const char* columns = std::getenv("COLUMNS"); columns && *columns) {
    char* end = nullptr;
    const long n = std::strtol(columns, &end, 10);
    if (*end == '\0' && n > 0 && n < 100000) return static_cast<size_t>(n);
  }
  return StdoutIsTerminal() ? 80 : 0;
}

std::string AbsolutePath(const std::string& path) {
  if (path.empty() || path[0] == '/') return path;
  std::error_code ec;
  auto abs = std::filesystem::absolute(path, ec);
  return ec ? path : abs.lexically_normal().string();
}

std::string RefusalMessage(const std::string& error, const ErrorReply& refusal,
                           const std::string& label, const std::string& input_name) {
  if (refusal.conversion && refusal.conversion->kept == 0) {
    size_t without_shapes = 0;
    for (const auto& w : refusal.conversion->warnings) {
      if (w.find(kNoShapesReason) != std::string::npos) ++without_shapes;
    }
    return label + ": " +
           NoConfigsReason(static_cast<size_t>(refusal.conversion->records), without_shapes);
  }
  // "submit: the input cannot be used: input: not valid JSON ..." -> "FILE: not valid JSON ...".
  static const std::string kOwn = "submit: ", kUnusable = "the input cannot be used: ";
  std::string message = error;
  if (message.compare(0, kOwn.size(), kOwn) == 0) message.erase(0, kOwn.size());
  if (message.compare(0, kUnusable.size(), kUnusable) != 0) return error;  // not about the input
  message.erase(0, kUnusable.size());
  // The daemon names the text it converted "input" (or, should it, the name it was sent).
  for (const std::string& name : {std::string("input"), input_name}) {
    if (!name.empty() && message.compare(0, name.size() + 2, name + ": ") == 0) {
      message.erase(0, name.size() + 2);
      break;
    }
  }
  return label + ": " + message;
}

std::optional<double> ParseTime(const std::string& text) {
  return ParseWhen(text, std::time(nullptr));
}

std::optional<double> ParseDurationArg(const std::string& text) {
  static const std::regex span(R"((\d+(?:\.\d+)?)([smhdw]?))");
  std::smatch m;
  if (!std::regex_match(text, m, span)) return std::nullopt;
  const std::string unit = m[2];
  const double scale = unit == "m"   ? 60
                       : unit == "h" ? 3600
                       : unit == "d" ? 86400
                       : unit == "w" ? 7 * 86400
                                     : 1;
  return std::stod(m[1]) * scale;
}

std::string TaskLabel(const TaskResult& t) {
  return "#" + std::to_string(t.position) + " " + ShortOp(t.operation) + " (rank " +
         std::to_string(t.priority_rank) + ")" +
         (t.run > 0 ? " run " + std::to_string(t.run) : std::string());
}

std::string FormatClock(double unix_time) {
  const std::time_t t = static_cast<std::time_t>(unix_time), now = std::time(nullptr);
  std::tm tm{}, today{};
  localtime_r(&t, &tm);
  localtime_r(&now, &today);
  const bool same_day = tm.tm_year == today.tm_year && tm.tm_yday == today.tm_yday;
  char buf[32];
  std::strftime(buf, sizeof buf, same_day ? "%H:%M" : "%Y-%m-%d %H:%M", &tm);
  return buf;
}

bool UseColour() {
  static const bool use = [] {
    const char* no = std::getenv("NO_COLOR");
    const char* term = std::getenv("TERM");
    return StdoutIsTerminal() && !(no && *no) && !(term && std::string(term) == "dumb");
  }();
  return use;
}

std::string ColourState(JobState state) {
  const std::string name(EnumName(state));
  if (!UseColour()) return name;
  const char* code = "";
  switch (state) {
    case JobState::kFinished:
      code = "32";  // green
      break;
    case JobState::kRunning:
    case JobState::kCancelling:
      code = "36";  // cyan
      break;
    case JobState::kQueued:
    case JobState::kWaiting:
    case JobState::kHeld:
      code = "33";  // yellow
      break;
    case JobState::kCancelled:
      code = "2";  // dim
      break;
  }
  return std::string("\x1b[") + code + "m" + name + "\x1b[0m";
}

Result<std::string> PickFormat(const std::string& format, bool json, const std::string& output,
                               const std::vector<std::string>& formats) {
  auto list = [&](const std::string& last_word) {
    std::string text;
    for (size_t i = 0; i < formats.size(); ++i) {
      text += (i == 0 ? "" : i + 1 == formats.size() ? " " + last_word + " " : ", ") + formats[i];
    }
    return text;
  };
  auto allowed = [&](const std::string& f) {
    return std::find(formats.begin(), formats.end(), f) != formats.end();
  };
  std::string picked = Lowercase(format);
  if (picked == "markdown") picked = "md";
  if (json) {
    if (!picked.empty() && picked != "json") {
      return MakeError("--json and --format " + format + " contradict each other");
    }
    picked = "json";
  }
  if (!picked.empty()) {
    if (!allowed(picked)) {
      return MakeError("--format must be " + list("or") + ", got '" + format + "'");
    }
    return picked;
  }
  if (output.empty() || IsStdio(output)) return formats.front();
  static const std::vector<std::pair<std::string, std::string>> kExtensions = {
      {".json", "json"}, {".csv", "csv"},  {".md", "md"},    {".markdown", "md"},
      {".html", "html"}, {".htm", "html"}, {".txt", "table"}};
  const size_t slash = output.find_last_of('/');
  const std::string base = slash == std::string::npos ? output : output.substr(slash + 1);
  const size_t dot = base.find_last_of('.');
  const std::string ext = dot == std::string::npos || dot == 0 ? "" : Lowercase(base.substr(dot));
  for (const auto& [e, f] : kExtensions) {
    if (ext == e && allowed(f)) return f;
  }
  std::string names;
  for (const auto& [e, f] : kExtensions) {
    if (allowed(f)) names += (names.empty() ? "" : ", ") + e;
  }
  return MakeError("cannot tell the format of " + output + " from its name: name it " + names +
                   ", or say --format " + list("or"));
}

}  // namespace ckprof
