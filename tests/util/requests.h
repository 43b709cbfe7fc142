// Requests to a test's daemon through the real client Connection, one call each: a request on
// a fresh connection, a submit, a job's event stream followed until a condition or the job's
// end, its results, a ping. Header-only; test threads only.
#pragma once

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "client/connection.h"
#include "common/protocol.h"

namespace ckprof::testing {

// One request on a fresh connection.
inline Result<nlohmann::json> CallOnce(const std::string& socket, Request r) {
  auto conn = Connection::Open(socket);
  if (!conn) return Error{conn.error()};
  return (*conn)->CallJson(std::move(r));
}

// Submits `content` (a configs file, IR list or trace text); `tweak` may set more options.
inline Result<int64_t> SubmitContent(const std::string& socket, const std::string& content,
                                     const std::function<void(SubmitOptions&)>& tweak = {}) {
  SubmitRequest r;
  r.submit.content = content;
  r.submit.input_name = "reliability.json";
  if (tweak) tweak(r.submit);
  auto a = CallOnce(socket, std::move(r));
  if (!a) return Error{a.error()};
  return a->value("job_id", int64_t{0});
}

// Follows a job's event stream until `until` is true for a frame's job summary (or the stream
// ends); returns the last summary seen.
inline Result<JobSummary> WatchUntil(const std::string& socket, int64_t job,
                                     const std::function<bool(const JobSummary&)>& until) {
  auto conn = Connection::Open(socket);
  if (!conn) return Error{conn.error()};
  JobSummary last;
  Status s = (*conn)->Watch(job, [&](const nlohmann::json& f) {
    if (auto it = f.find("job"); it != f.end()) {
      if (auto js = JobSummaryFromJson(*it); js) last = *js;
    }
    return !until(last);
  });
  if (!s) return Error{s.error()};
  return last;
}

// A job's summary as `status` gives it.
inline Result<JobSummary> JobStatus(const std::string& socket, int64_t job) {
  StatusRequest r;
  r.job_id = job;
  auto a = CallOnce(socket, r);
  if (!a) return Error{a.error()};
  return JobSummaryFromJson((*a)["job"]);
}

// Waits for a job to end (its watch stream's end); returns its final summary.
inline Result<JobSummary> WaitJobEnd(const std::string& socket, int64_t job) {
  auto end = WatchUntil(socket, job, [](const JobSummary&) { return false; });
  if (!end) return end;
  return JobStatus(socket, job);
}

// A job's per-task results (with output captures and configs when `with_output`).
inline Result<std::vector<TaskResult>> JobResults(const std::string& socket, int64_t job,
                                                  bool with_output = false) {
  ResultsRequest r;
  r.job_id = job;
  r.all = with_output;
  auto a = CallOnce(socket, r);
  if (!a) return Error{a.error()};
  std::vector<TaskResult> out;
  for (const auto& t : a->value("tasks", nlohmann::json::array())) {
    if (auto tr = TaskResultFromJson(t); tr) out.push_back(*tr);
  }
  return out;
}

inline bool Ping(const std::string& socket) {
  PingRequest r;
  return CallOnce(socket, r).ok();
}

}  // namespace ckprof::testing
