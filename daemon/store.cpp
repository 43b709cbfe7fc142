#include "daemon/store.h"

#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string_view>
#include <thread>
#include <tuple>
#include <unordered_map>

#include "daemon/user_names.h"

namespace ckprof {
namespace {

// How a connection waits for a lock another connection holds (the checkpointer's, for a
// RESTART's copy and fsync; the writer's, for its transaction): tries again every 250 us for
// the first 20 ms, then every 2 ms, for 5 s in all. SQLite's own busy timeout sleeps 1, 2, 5,
// 10, 15, 20, 25, 25 ... ms between tries: a lock held for 30 ms kept the daemon's thread, and
// every other user's request behind it, waiting 95 ms.
int WaitBriefly(void*, int tries) {
  constexpr int kFineTries = 80;                   // 80 x 250 us = 20 ms
  constexpr int kGiveUpTries = kFineTries + 2490;  // + 2490 x 2 ms: 5 s
  if (tries >= kGiveUpTries) return 0;
  std::this_thread::sleep_for(tries < kFineTries ? std::chrono::microseconds(250)
                                                 : std::chrono::microseconds(2000));
  return 1;
}

}  // namespace

// Checkpoints the WAL on its own thread and connection (SQLite's own automatic checkpoint would
// run inside a commit on the daemon's thread, fsyncs included: the GPUs would wait for the
// disk). Asked for by the writer's WAL hook once kPages frames have been written since what the
// last checkpoint copied, not after every commit once the log is that long (SQLite's own rule,
// which wakes this thread at every task's end). PASSIVE: it never blocks the writer nor waits for
// it; once it has copied every frame, the writer's next transaction starts the log over. A writer
// that never pauses gives it no such moment, so past kRestartPages the checkpoint is RESTART: it
// waits for the writer's transaction to end, copies what the passive passes left and has the log
// start over. A writer so busy that the RESTART's busy wait never finds a gap (it sleeps between
// tries; the writer takes the lock again at once) is held at its next commit past kHoldPages
// until that RESTART is done: bounded by kHoldWait, and only for the remainder's copy. A RESTART
// that still fails (a reader in the way) holds no further commit until the log has grown by
// another kHoldPages: at most one wait per 128 MiB written.
class Store::Checkpointer {
 public:
  static constexpr int kPages = 1000;          // SQLite's default automatic checkpoint size
  static constexpr int kRestartPages = 16384;  // 64 MiB of 4 KiB pages
  static constexpr int kHoldPages = 2 * kRestartPages;  // 128 MiB
  static constexpr auto kHoldWait = std::chrono::seconds(2);

  Checkpointer(sqlite3* db, std::string path) : db_(db), path_(std::move(path)) {
    sqlite3_busy_handler(db_, WaitBriefly, nullptr);  // RESTART waits for the writer's transaction
    // A connection learns that the database is in WAL mode only when it first reads it; until
    // then sqlite3_wal_checkpoint_v2 copies nothing and answers SQLITE_OK with -1 frames, and
    // the log would grow by every page written.
    (void)sqlite3_exec(db_, "PRAGMA journal_mode", nullptr, nullptr, nullptr);
    (void)sqlite3_exec(db_, "PRAGMA journal_size_limit=33554432", nullptr, nullptr, nullptr);
    thread_ = std::thread([this] { Loop(); });
  }
  ~Checkpointer() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
    sqlite3_close_v2(db_);
  }
  Checkpointer(const Checkpointer&) = delete;
  Checkpointer& operator=(const Checkpointer&) = delete;

  int64_t checkpoints() const { return checkpoints_.load(std::memory_order_relaxed); }

  // While large work goes on in steps, a RESTART only once passive ones have copied nearly all
  // of the log: it would hold each step back for as long as it copies (seconds, for a million
  // rows). So the log starts over (cut back to journal_size_limit) every 64 MiB or so.
  void SetBulk(bool bulk) {
    bulk_.store(bulk, std::memory_order_relaxed);
    if (!bulk) behind_.store(false, std::memory_order_relaxed);
  }

  // Large work in steps has made the log kRestartPages long: its steps wait (the daemon's other
  // work does not) until a passive pass has copied the whole log, so that the next transaction
  // starts the log over. No RESTART holds the daemon's thread for a copy and an fsync, and the
  // log stays about that long. (Passes that keep pace leave little to copy then.)
  bool Behind() const { return behind_.load(std::memory_order_relaxed); }

  // A TRUNCATE checkpoint soon: the whole log copied, and the file cut to nothing.
  void Truncate() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      truncate_ = true;
    }
    cv_.notify_all();
  }

  // The writer's connection's WAL hook: called after every commit, with the write lock
  // released, with the log's length in frames. After the log starts over it is shorter than
  // what was copied before.
  static int OnCommit(void* self, sqlite3*, const char*, int pages) {
    auto* c = static_cast<Checkpointer*>(self);
    const int copied = c->copied_.load(std::memory_order_relaxed);
    const int uncopied = pages >= copied ? pages - copied : pages;
    const bool bulk = c->bulk_.load(std::memory_order_relaxed);
    const bool behind = bulk && pages >= kRestartPages;
    if (behind) c->behind_.store(true, std::memory_order_relaxed);
    if (!bulk && pages >= c->hold_at_.load(std::memory_order_relaxed)) {
      c->HoldForRestart(pages);
    } else if (uncopied >= kPages || behind) {
      c->Poke(pages);
    }
    return SQLITE_OK;
  }

 private:
  void Poke(int pages) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      log_pages_ = std::max(log_pages_, pages);
      if (wanted_) return;
      wanted_ = true;
    }
    cv_.notify_all();
  }

  // On the writer's thread, between its transactions: asks for a RESTART and waits until one
  // that began after this call has ended (it finds no writer to wait for).
  void HoldForRestart(int pages) {
    std::unique_lock<std::mutex> lock(mu_);
    log_pages_ = std::max(log_pages_, pages);
    wanted_ = true;
    const int64_t done = passes_ + (busy_ ? 2 : 1);
    cv_.notify_all();
    const bool ended = cv_.wait_for(lock, kHoldWait, [&] { return passes_ >= done || stop_; });
    hold_at_.store(ended && restarted_ ? kHoldPages : pages + kHoldPages,
                   std::memory_order_relaxed);
  }

  void Loop() {
    std::string last_error;
    for (;;) {
      int pages = 0;
      bool truncate = false;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [this] { return wanted_ || truncate_ || stop_; });
        if (stop_) return;
        pages = log_pages_;
        log_pages_ = 0;
        truncate = truncate_;
        truncate_ = false;
        wanted_ = false;  // asked again during this pass: another pass follows
        busy_ = true;
      }
      auto [rc, copied, restarted, whole] = Checkpoint(truncate, pages);
      if (rc == SQLITE_OK && copied > 0) checkpoints_.fetch_add(1, std::memory_order_relaxed);
      {
        std::lock_guard<std::mutex> lock(mu_);
        busy_ = false;
        ++passes_;
        restarted_ = restarted;
        if (restarted) hold_at_.store(kHoldPages, std::memory_order_relaxed);
        // Large work waits for the whole log's copy: passes follow each other until then.
        if (whole || rc != SQLITE_OK) {
          behind_.store(false, std::memory_order_relaxed);
        } else if (behind_.load(std::memory_order_relaxed)) {
          wanted_ = true;
        }
      }
      cv_.notify_all();
      // Busy: a checkpoint or recovery elsewhere; a later commit asks again.
      std::string error = rc == SQLITE_OK || rc == SQLITE_BUSY ? "" : sqlite3_errmsg(db_);
      if (!error.empty() && error != last_error) {
        spdlog::warn("database {}: checkpoint failed: {} (the log grows until one succeeds)", path_,
                     error);
      }
      last_error = error;
    }
  }

  // One checkpoint: passive passes, then the RESTART or TRUNCATE asked for. Returns SQLite's
  // answer and the frames copied (by any pass), and notes in copied_ what is left of the log.
  struct Done {
    int rc;
    int copied;      // frames copied, by any pass
    bool restarted;  // the log starts over (a RESTART or TRUNCATE succeeded)
    bool whole;      // every frame of the log is copied
  };
  Done Checkpoint(bool truncate, int pages) {
    // TRUNCATE, like RESTART, holds the writer back while it copies: asked for only when the
    // daemon is idle after large writes, when the passive ones have copied most frames.
    int mode = truncate                 ? SQLITE_CHECKPOINT_TRUNCATE
               : pages >= kRestartPages ? SQLITE_CHECKPOINT_RESTART
                                        : SQLITE_CHECKPOINT_PASSIVE;
    // The frames copied first by passive checkpoints, which hold no writer back: the RESTART
    // or TRUNCATE then copies what is left and has the log start over (a writer waits for
    // that, not for a gigabyte's copy).
    int log = 0, copied = 0, copied_any = 0;
    int rc = SQLITE_OK;
    for (int pass = 0; pass < (mode == SQLITE_CHECKPOINT_PASSIVE ? 1 : 16); ++pass) {
      rc = sqlite3_wal_checkpoint_v2(db_, nullptr, SQLITE_CHECKPOINT_PASSIVE, &log, &copied);
      if (rc != SQLITE_OK) break;
      copied_any = std::max(copied_any, copied);
      if (copied >= log) break;
    }
    // Large work in steps is not held back at all: it waits for the passive passes instead
    // (Behind), and its next transaction starts the log over once they have copied it all.
    if (mode == SQLITE_CHECKPOINT_RESTART && bulk_.load(std::memory_order_relaxed)) {
      mode = SQLITE_CHECKPOINT_PASSIVE;
    }
    if (rc == SQLITE_OK && mode != SQLITE_CHECKPOINT_PASSIVE) {
      rc = sqlite3_wal_checkpoint_v2(db_, nullptr, mode, &log, &copied);
      if (rc == SQLITE_OK) copied_any = std::max(copied_any, copied);
    }
    // After a RESTART the log starts over: nothing of it is left to copy.
    copied_.store(rc == SQLITE_OK && mode != SQLITE_CHECKPOINT_PASSIVE ? 0 : std::max(copied, 0),
                  std::memory_order_relaxed);
    const bool restarted = rc == SQLITE_OK && mode != SQLITE_CHECKPOINT_PASSIVE;
    return {rc, copied_any, restarted, restarted || (rc == SQLITE_OK && copied >= log)};
  }

  sqlite3* db_;  // the checkpointer's own connection, used only by its thread
  std::string path_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool wanted_ = false, stop_ = false, truncate_ = false;
  bool busy_ = false;                     // a checkpoint is under way
  int64_t passes_ = 0;                    // checkpoints done, whatever they copied
  bool restarted_ = false;                // the last one had the log start over
  std::atomic<int> hold_at_{kHoldPages};  // the log's length (frames) that holds a commit
  int log_pages_ = 0;
  std::atomic<int> copied_{0};           // frames the last checkpoint had copied
  std::atomic<bool> bulk_{false};        // large work in steps: passive checkpoints only
  std::atomic<bool> behind_{false};      // large work waits for the log's copy (Behind)
  std::atomic<int64_t> checkpoints_{0};  // passes that copied frames
  std::thread thread_;
};

// A statement borrowed from the Store's cache (prepared once per SQL text: parsing SQL each
// time costs more than running it), or prepared for this use when the cached one is busy.
// Reset (or finalized) on destruction. Bind indexes are 1-based.
class Store::Stmt {
 public:
  Stmt(Store* store, const char* sql) : db_(store->db_) {
    Cached& c = store->stmts_[sql];
    if (!c.in_use) {
      if (!c.stmt && sqlite3_prepare_v3(db_, sql, -1, SQLITE_PREPARE_PERSISTENT, &c.stmt,
                                        nullptr) != SQLITE_OK) {
        error_ = sqlite3_errmsg(db_);
        c.stmt = nullptr;
        return;
      }
      c.in_use = true;
      cached_ = &c;
      stmt_ = c.stmt;
      return;
    }
    if (sqlite3_prepare_v2(db_, sql, -1, &stmt_, nullptr) != SQLITE_OK) {
      error_ = sqlite3_errmsg(db_);
      stmt_ = nullptr;
    }
  }
  ~Stmt() {
    if (cached_) {
      sqlite3_reset(stmt_);
      sqlite3_clear_bindings(stmt_);
      cached_->in_use = false;
    } else {
      sqlite3_finalize(stmt_);
    }
  }
  Stmt(const Stmt&) = delete;
  Stmt& operator=(const Stmt&) = delete;

  bool ok() const { return stmt_ != nullptr; }
  const std::string& error() const { return error_; }
  Stmt& Bind(int i, int64_t v) {
    sqlite3_bind_int64(stmt_, i, v);
    return *this;
  }
  Stmt& Bind(int i, double v) {
    sqlite3_bind_double(stmt_, i, v);
    return *this;
  }
  Stmt& Bind(int i, std::string_view v) {
    sqlite3_bind_text(stmt_, i, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT);
    return *this;
  }
  // SQLITE_ROW, SQLITE_DONE or an error code.
  void Reset() {
    sqlite3_reset(stmt_);
    sqlite3_clear_bindings(stmt_);
  }
  int Step() {
    int rc = sqlite3_step(stmt_);
    if (rc != SQLITE_ROW && rc != SQLITE_DONE) error_ = sqlite3_errmsg(db_);
    return rc;
  }
  int64_t Int(int col) const { return sqlite3_column_int64(stmt_, col); }
  double Double(int col) const { return sqlite3_column_double(stmt_, col); }
  bool Null(int col) const { return sqlite3_column_type(stmt_, col) == SQLITE_NULL; }
  // Valid until the next Step or Reset.
  std::string_view View(int col) const {
    auto p = reinterpret_cast<const char*>(sqlite3_column_text(stmt_, col));
    return p ? std::string_view(p, static_cast<size_t>(sqlite3_column_bytes(stmt_, col)))
             : std::string_view();
  }
  std::string Text(int col) const {
    auto p = reinterpret_cast<const char*>(sqlite3_column_text(stmt_, col));
    return p ? std::string(p, static_cast<size_t>(sqlite3_column_bytes(stmt_, col))) : "";
  }

 private:
  sqlite3* db_;
  sqlite3_stmt* stmt_ = nullptr;
  Cached* cached_ = nullptr;
  std::string error_;
};

namespace {

using Stmt = Store::Stmt;

Status StepDone(Stmt& s, const char* what) {
  if (!s.ok()) return MakeError(std::string("database: ") + what + ": " + s.error());
  if (s.Step() != SQLITE_DONE)
    return MakeError(std::string("database: ") + what + ": " + s.error());
  return Status::Ok();
}

template <typename T>
std::string IntsToJson(const std::vector<T>& v) {
  return nlohmann::json(v).dump();
}
template <typename T>
std::vector<T> IntsFromJson(const std::string& s) {
  auto j = nlohmann::json::parse(s, nullptr, false);
  std::vector<T> out;
  if (j.is_array()) {
    for (const auto& e : j) {
      if (e.is_number_integer()) out.push_back(e.get<T>());
    }
  }
  return out;
}

constexpr int64_t kSchemaVersion = 10;  // PRAGMA user_version below
constexpr const char* kSchema = R"SQL(
CREATE TABLE IF NOT EXISTS jobs (
  id INTEGER PRIMARY KEY,
  uid INTEGER NOT NULL, gid INTEGER NOT NULL, groups TEXT NOT NULL, owner TEXT NOT NULL,
  name TEXT NOT NULL, priority INTEGER NOT NULL, gpus TEXT NOT NULL, max_gpus INTEGER NOT NULL,
  not_before REAL NOT NULL, timeout_s REAL NOT NULL, profiler_path TEXT NOT NULL,
  cwd TEXT NOT NULL, input_format TEXT NOT NULL, cancelled INTEGER NOT NULL DEFAULT 0,
  submitted_at REAL NOT NULL, finished_at REAL NOT NULL DEFAULT 0,
  task_order TEXT NOT NULL DEFAULT 'rank',
  repeat INTEGER NOT NULL DEFAULT 1, noise_threshold REAL NOT NULL DEFAULT 0.05,
  on_end TEXT NOT NULL DEFAULT '', reuse INTEGER NOT NULL DEFAULT 1,
  env TEXT NOT NULL DEFAULT '', held_by TEXT NOT NULL DEFAULT '',
  held_by_uid INTEGER NOT NULL DEFAULT -1, after_jobs TEXT NOT NULL DEFAULT '[]',
  after_ok_jobs TEXT NOT NULL DEFAULT '[]', cancel_reason TEXT NOT NULL DEFAULT '',
  job_timeout_s REAL NOT NULL DEFAULT 0, mail INTEGER NOT NULL DEFAULT 0);
CREATE TABLE IF NOT EXISTS tasks (
  id INTEGER PRIMARY KEY,
  job_id INTEGER NOT NULL REFERENCES jobs(id),
  position INTEGER NOT NULL, rank INTEGER NOT NULL, op TEXT NOT NULL, config TEXT NOT NULL,
  est_cost REAL NOT NULL, state TEXT NOT NULL, attempts INTEGER NOT NULL DEFAULT 0,
  gpu INTEGER NOT NULL DEFAULT -1, handle INTEGER NOT NULL DEFAULT 0,
  started_at REAL NOT NULL DEFAULT 0, ended_at REAL NOT NULL DEFAULT 0,
  result TEXT NOT NULL DEFAULT '', run INTEGER NOT NULL DEFAULT 0,
  problem TEXT NOT NULL DEFAULT '', reused_from INTEGER NOT NULL DEFAULT 0);
CREATE INDEX IF NOT EXISTS tasks_by_job ON tasks(job_id, position);
CREATE TABLE IF NOT EXISTS attempts (
  task_id INTEGER NOT NULL REFERENCES tasks(id), attempt INTEGER NOT NULL,
  gpu INTEGER NOT NULL, handle INTEGER NOT NULL DEFAULT 0, started_at REAL NOT NULL,
  ended_at REAL NOT NULL DEFAULT 0, outcome TEXT NOT NULL DEFAULT 'running',
  PRIMARY KEY (task_id, attempt));
CREATE TABLE IF NOT EXISTS usage (
  uid INTEGER PRIMARY KEY, usage REAL NOT NULL, updated_at REAL NOT NULL);
CREATE TABLE IF NOT EXISTS measurements (
  task_id INTEGER PRIMARY KEY, job_id INTEGER NOT NULL, uid INTEGER NOT NULL,
  problem TEXT NOT NULL, op TEXT NOT NULL, profiler TEXT NOT NULL, gpu_model TEXT NOT NULL,
  gpu INTEGER NOT NULL, measured_at REAL NOT NULL, best_name TEXT NOT NULL,
  avg_ms REAL NOT NULL, tflops REAL NOT NULL, gbps REAL NOT NULL, split_k TEXT NOT NULL);
-- How a job's --on-end command ended (a table of its own: a schema without it gains it as is).
CREATE TABLE IF NOT EXISTS job_on_end (
  job_id INTEGER PRIMARY KEY REFERENCES jobs(id), outcome TEXT NOT NULL,
  exit_code INTEGER NOT NULL, stderr_head TEXT NOT NULL, ended_at REAL NOT NULL);
CREATE INDEX IF NOT EXISTS measurements_by_problem
  ON measurements(problem, profiler, gpu_model, measured_at);
CREATE TABLE IF NOT EXISTS id_marks (name TEXT PRIMARY KEY, last INTEGER NOT NULL);
-- Jobs that are gone but whose rows are still being removed in steps (clean), or that were
-- never whole (a submit stored in steps, until its last step): nothing loads them. A table of
-- its own: a schema without it gains it as is.
CREATE TABLE IF NOT EXISTS jobs_dropped (job_id INTEGER PRIMARY KEY);
-- A cancelled job's queued tasks, all ended at once: each of its task rows still 'queued' is
-- cancelled, at ended_at, with this result (rewriting a million rows took seconds of writes).
-- Readers see them so (TaskColumns); a retry that revives the job writes them out first. A
-- table of its own: a schema without it gains it as is. (No foreign key: an older ckprofd,
-- which knows nothing of it, could not delete the job's row otherwise.)
CREATE TABLE IF NOT EXISTS job_cancels (
  job_id INTEGER PRIMARY KEY, ended_at REAL NOT NULL, result TEXT NOT NULL);
-- The GPUs drained (by an admin, or for their health), kept across restarts.
CREATE TABLE IF NOT EXISTS gpu_drains (
  gpu INTEGER PRIMARY KEY, drained_by TEXT NOT NULL, drained_at REAL NOT NULL,
  reason TEXT NOT NULL);
INSERT OR IGNORE INTO id_marks (name, last) VALUES ('jobs', 0), ('tasks', 0);
PRAGMA user_version = 10;
)SQL";

// Why this process cannot write `path` (a file or directory), with how to make it writable; ""
// when nothing says it cannot (it does not exist, or it may be written). Never "move it
// aside": the database holds every job and result.
std::string WhyNotWritable(const std::string& path) {
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) return "";
  const bool dir = S_ISDIR(st.st_mode);
  if (access(path.c_str(), dir ? (W_OK | X_OK) : (R_OK | W_OK)) == 0) return "";
  const int err = errno;
  if (err == EROFS) {
    return path +
           " is on a read-only filesystem: remount it read-write (mount -o remount,rw "
           "on its mount point), or give ckprofd a state dir on a writable one";
  }
  if (err == EPERM) {
    return path + " is immutable (chattr +i): make it writable again with chattr -i " + path;
  }
  if (err != EACCES) return path + ": " + std::strerror(err);
  char mode[8];
  std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
  const std::string me = UserNameOf(getuid());
  const std::string files = dir ? path : path + "*";
  const std::string fix =
      st.st_uid == getuid()
          ? "chmod u+" + std::string(dir ? "wx " : "rw ") + files
          : "chown " + me + " " + files + ", or run ckprofd as " + UserNameOf(st.st_uid);
  return path + " is owned by " + UserNameOf(st.st_uid) + ":" + GroupNameOf(st.st_gid) +
         " with mode " + mode + ", and ckprofd runs as " + me + " (uid " +
         std::to_string(getuid()) + "), who may not " + (dir ? "create files in it" : "write it") +
         ": make it writable for " + me + " (" + fix + ")" +
         (dir ? "" : "; the -wal and -shm files beside it too, where they exist");
}

// The job's variables ("K=V" each) as stored: one per line (a value holds no newline).
std::string JoinLines(const std::vector<std::string>& lines) {
  std::string out;
  for (const auto& l : lines) out += (out.empty() ? "" : "\n") + l;
  return out;
}

std::vector<std::string> SplitLines(const std::string& text) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start < text.size()) {
    size_t nl = text.find('\n', start);
    if (nl == std::string::npos) nl = text.size();
    if (nl > start) out.push_back(text.substr(start, nl - start));
    start = nl + 1;
  }
  return out;
}

}  // namespace

Store::Store(sqlite3* db, std::string path) : db_(db), path_(std::move(path)) {}

Store::~Store() {
  sqlite3_wal_hook(db_, nullptr, nullptr);
  checkpointer_.reset();
  for (auto& [sql, c] : stmts_) sqlite3_finalize(c.stmt);
  sqlite3_close_v2(db_);
}

void Store::Rollback() { (void)Exec("ROLLBACK"); }

Status Store::Exec(const char* sql) {
  // Transaction control runs for every transition: from the statement cache.
  if (std::strcmp(sql, "BEGIN IMMEDIATE") == 0 || std::strcmp(sql, "COMMIT") == 0 ||
      std::strcmp(sql, "ROLLBACK") == 0) {
    Stmt st(this, sql);
    if (st.ok() && st.Step() == SQLITE_DONE) return Status::Ok();
    return MakeError("database " + path_ + ": " + sql + ": " + st.error());
  }
  char* err = nullptr;
  if (sqlite3_exec(db_, sql, nullptr, nullptr, &err) != SQLITE_OK) {
    std::string msg = err ? err : sqlite3_errmsg(db_);
    sqlite3_free(err);
    return MakeError("database " + path_ + ": " + msg);
  }
  return Status::Ok();
}

Status PrepareStateDir(const std::string& state_dir) {
  struct stat st {};
  if (stat(state_dir.c_str(), &st) != 0) {
    if (mkdir(state_dir.c_str(), 0750) != 0 && errno != EEXIST) {
      return MakeError("state dir " + state_dir + " cannot be created: " + std::strerror(errno));
    }
  } else if (!S_ISDIR(st.st_mode)) {
    return MakeError("state dir " + state_dir + " is not a directory");
  }
  if (access(state_dir.c_str(), W_OK | X_OK) != 0) {
    const std::string err = std::strerror(errno);
    const std::string why = WhyNotWritable(state_dir);
    return MakeError("state dir " + state_dir + " is not writable: " + err +
                     (why.empty() ? "" : " (" + why + ")"));
  }
  return Status::Ok();
}

Result<std::unique_ptr<Store>> Store::Open(const std::string& state_dir, bool full_sync) {
  // No memory statistics: kept, they take a process-wide mutex at each of SQLite's
  // allocations (5% of a million-task cancel's time). Set before SQLite's first use; later
  // (another Store) it is refused and changes nothing.
  static const int no_memstatus = sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0);
  (void)no_memstatus;
  if (Status s = PrepareStateDir(state_dir); !s) return Error{s.error()};
  const std::string path = FileIn(state_dir);
  // A file it may not write is opened read-only by SQLite, or not at all: say why, and how
  // to make it writable, before SQLite says "attempt to write a readonly database".
  for (const std::string& file : {path, path + "-wal", path + "-shm"}) {
    if (std::string why = WhyNotWritable(file); !why.empty()) {
      return MakeError("database " + path + " is not writable: " + why);
    }
  }
  sqlite3* db = nullptr;
  int rc = sqlite3_open_v2(
      path.c_str(), &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, nullptr);
  if (rc != SQLITE_OK) {
    std::string msg = db ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
    sqlite3_close_v2(db);
    return MakeError("database " + path + " cannot be opened: " + msg);
  }
  std::unique_ptr<Store> store(new Store(db, path));
  sqlite3_busy_handler(db, WaitBriefly, nullptr);
  sqlite3_extended_result_codes(db, 1);
  if (sqlite3_db_readonly(db, "main") == 1) {
    return MakeError("database " + path +
                     " was opened read-only: make it, its -wal and -shm files and the state dir "
                     "writable for ckprofd (uid " +
                     std::to_string(getuid()) + ")");
  }
  // A file it cannot read or write is not to be moved aside (it holds every job): only a
  // corrupt one may be, when there is no backup.
  auto fail = [&](const std::string& what, const std::string& detail) {
    const int code = sqlite3_extended_errcode(db) & 0xff;
    std::string advice;
    if (what == "is corrupt" || code == SQLITE_CORRUPT || code == SQLITE_NOTADB) {
      advice = "restore a backup; or move it aside to start with an empty state, losing its jobs";
    } else if (code == SQLITE_READONLY || code == SQLITE_CANTOPEN || code == SQLITE_PERM ||
               code == SQLITE_AUTH) {
      advice =
          "check the owner and mode of it, its -wal and -shm files and the state dir, and "
          "that its filesystem is mounted read-write";
    } else {
      advice = "check the disk, and the owner and mode of the file and the state dir";
    }
    return MakeError("database " + path + " " + what + ": " + detail + " (" + advice + ")");
  };
  // Integrity before anything else writes: a corrupt file is a startup error, never reset.
  {
    Stmt check(store.get(), "PRAGMA quick_check");
    if (!check.ok()) return fail("cannot be read", check.error());
    if (check.Step() != SQLITE_ROW) return fail("cannot be read", check.error());
    std::string verdict = check.Text(0);
    if (verdict != "ok") return fail("is corrupt", verdict);
  }
  // A new database gives the pages that large deletes free back to the filesystem, step by
  // step (ShrinkStep); set before its first table, which fixes it.
  int64_t pages_at_open = 0;
  {
    Stmt count(store.get(), "PRAGMA page_count");
    if (!count.ok() || count.Step() != SQLITE_ROW) return fail("cannot be read", count.error());
    pages_at_open = count.Int(0);
  }
  if (pages_at_open == 0) {
    if (Status s = store->Exec("PRAGMA auto_vacuum=INCREMENTAL"); !s) return Error{s.error()};
  }
  if (Status s = store->Exec("PRAGMA journal_mode=WAL"); !s) return Error{s.error()};
  // The log starts over once a checkpoint has copied it all; past this size it is cut back
  // then, rather than keeping the largest it ever was (a million-task submit's gigabyte).
  if (Status s = store->Exec("PRAGMA journal_size_limit=33554432"); !s) return Error{s.error()};
  if (Status s = store->Exec(full_sync ? "PRAGMA synchronous=FULL" : "PRAGMA synchronous=NORMAL");
      !s) {
    return Error{s.error()};
  }
  if (Status s = store->Exec("PRAGMA foreign_keys=ON"); !s) return Error{s.error()};
  // Debian builds SQLite with secure_delete on: every page a delete frees is zeroed and
  // written, a log frame each (a million-task clean took 5.2 s, 2.5 s with FAST). FAST zeroes
  // deleted rows on the pages written anyway and writes no freed page: what a freed page held
  // stays in the file (the daemon's own, in its 0750 state directory) until the page is
  // reused or the compaction after large work gives it back.
  if (Status s = store->Exec("PRAGMA secure_delete=FAST"); !s) return Error{s.error()};
  int64_t schema = 0;
  {
    Stmt version(store.get(), "PRAGMA user_version");
    if (!version.ok() || version.Step() != SQLITE_ROW)
      return fail("cannot be read", version.error());
    schema = version.Int(0);
    if (schema > kSchemaVersion) {
      return MakeError("database " + path + " was written by a newer ckprofd (schema " +
                       std::to_string(schema) + ")");
    }
  }
  // Schema 1 -> 2: jobs.task_order; 2 -> 3: jobs.repeat, jobs.noise_threshold, tasks.run;
  // 3 -> 4: jobs.on_end; 4 -> 5 below. One
  // transaction with the version, so that a crash cannot leave a column added and the version
  // old.
  std::string migrate;
  if (schema >= 1 && schema < 2) {
    migrate += "ALTER TABLE jobs ADD COLUMN task_order TEXT NOT NULL DEFAULT 'rank';";
  }
  if (schema >= 1 && schema < 3) {
    migrate +=
        "ALTER TABLE jobs ADD COLUMN repeat INTEGER NOT NULL DEFAULT 1;"
        "ALTER TABLE jobs ADD COLUMN noise_threshold REAL NOT NULL DEFAULT 0.05;"
        "ALTER TABLE tasks ADD COLUMN run INTEGER NOT NULL DEFAULT 0;";
  }
  if (schema >= 1 && schema < 4)
    migrate += "ALTER TABLE jobs ADD COLUMN on_end TEXT NOT NULL DEFAULT '';";
  // 4 -> 5: reuse and the tuning table. Older successes have no problem key: they are neither
  // reused nor in `best` (their profiler build is not known either).
  if (schema >= 1 && schema < 5) {
    migrate +=
        "ALTER TABLE jobs ADD COLUMN reuse INTEGER NOT NULL DEFAULT 1;"
        "ALTER TABLE tasks ADD COLUMN problem TEXT NOT NULL DEFAULT '';"
        "ALTER TABLE tasks ADD COLUMN reused_from INTEGER NOT NULL DEFAULT 0;";
  }
  // 6 -> 7: jobs.env, the variables the submitter passed (submit --env).
  if (schema >= 1 && schema < 7)
    migrate += "ALTER TABLE jobs ADD COLUMN env TEXT NOT NULL DEFAULT '';";
  // 8 -> 9: jobs.held_by, jobs.held_by_uid (ckprof hold).
  if (schema >= 1 && schema < 9) {
    migrate +=
        "ALTER TABLE jobs ADD COLUMN held_by TEXT NOT NULL DEFAULT '';"
        "ALTER TABLE jobs ADD COLUMN held_by_uid INTEGER NOT NULL DEFAULT -1;";
  }
  // 9 -> 10: jobs.after_jobs, jobs.after_ok_jobs (submit --after, --after-ok), jobs.cancel_reason,
  // jobs.job_timeout_s (submit --job-timeout), jobs.mail (submit --mail).
  if (schema >= 1 && schema < 10) {
    migrate +=
        "ALTER TABLE jobs ADD COLUMN after_jobs TEXT NOT NULL DEFAULT '[]';"
        "ALTER TABLE jobs ADD COLUMN after_ok_jobs TEXT NOT NULL DEFAULT '[]';"
        "ALTER TABLE jobs ADD COLUMN cancel_reason TEXT NOT NULL DEFAULT '';"
        "ALTER TABLE jobs ADD COLUMN job_timeout_s REAL NOT NULL DEFAULT 0;"
        "ALTER TABLE jobs ADD COLUMN mail INTEGER NOT NULL DEFAULT 0;";
  }
  // 7 -> 8: tasks.pgid and attempts.pgid are the attempt's handle (a process group, or a
  // remote executor's id of the run): renamed. (A table that has no such column yet is made
  // with the new name below.)
  for (const char* table : {"tasks", "attempts"}) {
    if (schema < 1 || schema >= 8) break;
    Stmt has(store.get(), "SELECT count(*) FROM pragma_table_info(?) WHERE name='pgid'");
    has.Bind(1, std::string_view(table));
    if (!has.ok() || has.Step() != SQLITE_ROW) return fail("cannot be read", has.error());
    if (has.Int(0) > 0)
      migrate += "ALTER TABLE " + std::string(table) + " RENAME COLUMN pgid TO handle;";
  }
  // 5 -> 6: ids are never given twice (`clean`, keep_finished_days): the highest job and task
  // id ever given is kept in id_marks, from the largest an older database holds (the ids of
  // jobs it removed before are not known).
  const std::string marks = schema >= 1 && schema < 6
                                ? "INSERT OR REPLACE INTO id_marks (name, last) VALUES "
                                  "('jobs', (SELECT ifnull(max(id), 0) FROM jobs)),"
                                  "('tasks', (SELECT ifnull(max(id), 0) FROM tasks));"
                                : "";
  const std::string setup = "BEGIN IMMEDIATE;" + migrate + kSchema + marks + "COMMIT;";
  if (Status s = store->Exec(setup.c_str()); !s) {
    store->Rollback();
    return fail("cannot be brought to schema " + std::to_string(kSchemaVersion), s.error());
  }
  store->full_sync_ = full_sync;
  // An older database frees pages for reuse only (auto_vacuum NONE). A small one is rewritten
  // once to give them back from now on; a large one would stall the start for as long as it
  // takes to copy it, so it stays as it is (README: how to convert it by hand).
  {
    Stmt mode(store.get(), "PRAGMA auto_vacuum");
    if (mode.ok() && mode.Step() == SQLITE_ROW && mode.Int(0) == 0) {
      mode.Reset();
      constexpr int64_t kConvertPages = 16384;  // 64 MiB of 4 KiB pages
      if (pages_at_open <= kConvertPages) {
        Status s = store->Exec("PRAGMA auto_vacuum=INCREMENTAL");
        if (s) s = store->Exec("VACUUM");
        if (!s)
          spdlog::warn("database {}: not converted to auto_vacuum=INCREMENTAL: {}", path,
                       s.error());
      } else {
        spdlog::info(
            "database {}: {} pages, auto_vacuum NONE: pages freed by clean are reused, not given "
            "back (stop ckprofd and run sqlite3 {} 'PRAGMA auto_vacuum=INCREMENTAL; VACUUM' "
            "to change that)",
            path, pages_at_open, path);
      }
    }
  }
  // Checkpoints on a second connection and thread; without one, SQLite's automatic ones.
  sqlite3* cdb = nullptr;
  if (sqlite3_open_v2(path.c_str(), &cdb, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX, nullptr) ==
      SQLITE_OK) {
    store->checkpointer_ = std::make_unique<Checkpointer>(cdb, path);
    sqlite3_wal_hook(db, &Checkpointer::OnCommit, store->checkpointer_.get());
  } else {
    spdlog::warn("database {}: no checkpoint connection ({}); checkpoints run inside commits", path,
                 cdb ? sqlite3_errmsg(cdb) : "out of memory");
    sqlite3_close_v2(cdb);
  }
  return store;
}

Status Store::SaveCopy(const std::string& to) {
  // A new file of ours (never another's, nor one a link points at), empty: an empty database.
  const int fd = open(to.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) return MakeError("cannot save the database to " + to + ": " + std::strerror(errno));
  close(fd);
  sqlite3* dest = nullptr;
  int rc = sqlite3_open_v2(to.c_str(), &dest, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX, nullptr);
  std::string error;
  if (rc == SQLITE_OK) {
    sqlite3_backup* b = sqlite3_backup_init(dest, "main", db_, "main");
    if (!b) {
      error = sqlite3_errmsg(dest);
    } else {
      rc = sqlite3_backup_step(b, -1);
      sqlite3_backup_finish(b);
      if (rc != SQLITE_DONE) error = sqlite3_errstr(rc);
    }
  } else {
    error = dest ? sqlite3_errmsg(dest) : sqlite3_errstr(rc);
  }
  sqlite3_close_v2(dest);
  if (error.empty()) return Status::Ok();
  unlink(to.c_str());
  return MakeError("cannot save the database to " + to + ": " + error);
}

int64_t Store::CheckpointsForTesting() const {
  return checkpointer_ ? checkpointer_->checkpoints() : 0;
}

namespace {

// The columns of a task row as a submit stores it, and the binding of one record.
constexpr const char* kInsertTask =
    "INSERT INTO tasks (job_id, position, rank, op, config, est_cost, state, run, problem, "
    "reused_from, result, started_at, ended_at, id) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)";

void BindTask(Stmt& ins, int64_t job_id, int64_t id, const TaskRecord& t) {
  ins.Bind(1, job_id)
      .Bind(2, t.position)
      .Bind(3, t.rank)
      .Bind(4, t.op)
      .Bind(5, t.config)
      .Bind(6, t.est_cost)
      .Bind(7, EnumName(t.reused_from ? TaskState::kSucceeded : TaskState::kQueued))
      .Bind(8, int64_t{t.run})
      .Bind(9, t.problem)
      .Bind(10, t.reused_from)
      .Bind(11, t.result)
      .Bind(12, t.started_at)
      .Bind(13, t.ended_at)
      .Bind(14, id);
}

}  // namespace

Status Store::InsertJob(JobRecord* job, std::vector<TaskRecord>* tasks) {
  if (!full_sync_) {
    if (Status s = Exec("PRAGMA synchronous=FULL"); !s) return s;
  }
  if (Status s = Begin(); !s) return s;
  auto rollback = [&](Status s) {
    Rollback();
    if (!full_sync_) (void)Exec("PRAGMA synchronous=NORMAL");
    return s;
  };
  int64_t job_id = 0, last_task = 0;
  if (Status s = InsertJobRow(*job, &job_id, &last_task); !s) return rollback(s);
  job->id = job_id;
  {
    Stmt ins(this, kInsertTask);
    if (!ins.ok()) return rollback(MakeError("database: insert task: " + ins.error()));
    for (auto& t : *tasks) {
      BindTask(ins, job->id, ++last_task, t);
      if (ins.Step() != SQLITE_DONE) {
        return rollback(MakeError("database: insert task: " + ins.error()));
      }
      t.id = last_task;
      t.job_id = job->id;
      t.state = t.reused_from ? TaskState::kSucceeded : TaskState::kQueued;
      ins.Reset();
    }
  }
  {
    Stmt marks(this, "UPDATE id_marks SET last=? WHERE name=?");
    marks.Bind(1, job->id).Bind(2, std::string_view("jobs"));
    if (Status s = StepDone(marks, "keep the last ids"); !s) return rollback(s);
    marks.Reset();
    marks.Bind(1, last_task).Bind(2, std::string_view("tasks"));
    if (Status s = StepDone(marks, "keep the last ids"); !s) return rollback(s);
  }
  if (Status s = Commit(); !s) return rollback(s);
  if (!full_sync_) (void)Exec("PRAGMA synchronous=NORMAL");
  return Status::Ok();
}

// Inside a transaction: the next job id and the last task id given (after the highest ever
// given, id_marks, not after the highest still stored: a job removed by `clean` must not lend
// its id, or its tasks' ids, to the next one), and `job`'s row inserted with that id.
Status Store::InsertJobRow(const JobRecord& job, int64_t* job_id, int64_t* last_task) {
  int64_t last_job = 0;
  {
    Stmt q(this,
           "SELECT (SELECT max(ifnull((SELECT max(id) FROM jobs), 0), last) FROM id_marks "
           "WHERE name='jobs'), (SELECT max(ifnull((SELECT max(id) FROM tasks), 0), last) "
           "FROM id_marks WHERE name='tasks')");
    if (!q.ok() || q.Step() != SQLITE_ROW) {
      return MakeError("database: read the last ids: " + q.error());
    }
    last_job = q.Int(0);
    *last_task = q.Int(1);
  }
  {
    Stmt ins(
        this,
        "INSERT INTO jobs (uid, gid, groups, owner, name, priority, gpus, max_gpus, "
        "not_before, timeout_s, profiler_path, cwd, input_format, cancelled, submitted_at, "
        "task_order, repeat, noise_threshold, on_end, reuse, id, env, after_jobs, after_ok_jobs, "
        "job_timeout_s, mail) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,0,?,?,?,?,?,?,?,?,?,?,?,?)");
    std::vector<int> groups(job.groups.begin(), job.groups.end());
    ins.Bind(1, int64_t{job.uid})
        .Bind(2, int64_t{job.gid})
        .Bind(3, IntsToJson(groups))
        .Bind(4, job.owner)
        .Bind(5, job.name)
        .Bind(6, int64_t{job.priority})
        .Bind(7, IntsToJson(job.gpus))
        .Bind(8, int64_t{job.max_gpus})
        .Bind(9, job.not_before)
        .Bind(10, job.timeout_s)
        .Bind(11, job.profiler_path)
        .Bind(12, job.cwd)
        .Bind(13, job.input_format)
        .Bind(14, job.submitted_at)
        .Bind(15, EnumName(job.order))
        .Bind(16, int64_t{job.repeat})
        .Bind(17, job.noise_threshold)
        .Bind(18, job.on_end)
        .Bind(19, int64_t{job.reuse ? 1 : 0})
        .Bind(20, last_job + 1)
        .Bind(21, JoinLines(job.env))
        .Bind(22, IntsToJson(job.after))
        .Bind(23, IntsToJson(job.after_ok))
        .Bind(24, job.job_timeout_s)
        .Bind(25, int64_t{job.mail ? 1 : 0});
    if (Status s = StepDone(ins, "insert job"); !s) return s;
  }
  *job_id = last_job + 1;
  return Status::Ok();
}

Result<int64_t> Store::BeginJob(JobRecord* job, int64_t task_count) {
  if (grouped_) return MakeError("database: a job is not stored inside a group");
  if (Status s = Begin(); !s) return Error{s.error()};
  auto rollback = [&](Status s) -> Result<int64_t> {
    Rollback();
    return Error{s.error()};
  };
  int64_t job_id = 0, last_task = 0;
  if (Status s = InsertJobRow(*job, &job_id, &last_task); !s) return rollback(s);
  const int64_t last_job = job_id - 1;
  {
    Stmt hide(this, "INSERT INTO jobs_dropped (job_id) VALUES (?)");
    hide.Bind(1, last_job + 1);
    if (Status s = StepDone(hide, "insert job"); !s) return rollback(s);
  }
  {
    // The ids are taken now: another submit stored meanwhile gets the ones after them.
    Stmt marks(this, "UPDATE id_marks SET last=? WHERE name=?");
    marks.Bind(1, last_job + 1).Bind(2, std::string_view("jobs"));
    if (Status s = StepDone(marks, "keep the last ids"); !s) return rollback(s);
    marks.Reset();
    marks.Bind(1, last_task + task_count).Bind(2, std::string_view("tasks"));
    if (Status s = StepDone(marks, "keep the last ids"); !s) return rollback(s);
  }
  if (Status s = Commit(); !s) return Error{s.error()};
  job->id = last_job + 1;
  return last_task + 1;
}

Status Store::InsertTasks(int64_t job_id, int64_t first_id, std::span<TaskRecord> tasks) {
  if (grouped_) return MakeError("database: tasks are not stored inside a group");
  if (tasks.empty()) return Status::Ok();
  if (Status s = Begin(); !s) return s;
  Stmt ins(this, kInsertTask);
  if (!ins.ok()) {
    Rollback();
    return MakeError("database: insert task: " + ins.error());
  }
  int64_t id = first_id;
  for (auto& t : tasks) {
    BindTask(ins, job_id, id, t);
    if (ins.Step() != SQLITE_DONE) {
      std::string error = ins.error();
      ins.Reset();
      Rollback();
      return MakeError("database: insert task: " + error);
    }
    ins.Reset();
    t.id = id++;
    t.job_id = job_id;
    t.state = t.reused_from ? TaskState::kSucceeded : TaskState::kQueued;
  }
  return Commit();
}

Status Store::CommitJob(int64_t job_id) {
  if (!full_sync_) {
    if (Status s = Exec("PRAGMA synchronous=FULL"); !s) return s;
  }
  Status s = Begin();
  if (s) {
    Stmt up(this, "DELETE FROM jobs_dropped WHERE job_id=?");
    up.Bind(1, job_id);
    s = StepDone(up, "store the job");
    s = s ? Commit() : (Rollback(), s);
  }
  if (!full_sync_) (void)Exec("PRAGMA synchronous=NORMAL");
  return s;
}

Status Store::MarkDropped(const std::vector<int64_t>& job_ids) {
  if (job_ids.empty()) return Status::Ok();
  if (Status s = BeginWrite(); !s) return s;
  Status s;
  Stmt ins(this, "INSERT OR IGNORE INTO jobs_dropped (job_id) VALUES (?)");
  for (int64_t id : job_ids) {
    ins.Bind(1, id);
    if (s = StepDone(ins, "remove job"); !s) break;
    ins.Reset();
  }
  return EndWrite(s);
}

Status Store::DeleteDropped(int64_t job_id, int64_t max_rows, DropProgress* p) {
  if (p->done) return Status::Ok();
  if (grouped_) return MakeError("database: a job is not removed inside a group");
  // A job's task ids rise with its positions (they are given in that order and kept): its
  // first is found through the index, then the rows go in ranges of ids, each a range of
  // the table itself (NOT INDEXED: the index would hand them over by position, and sorting a
  // million of them by id would cost more than the deleting).
  if (p->after_id < 0) {
    auto first = FirstTaskId(job_id);
    if (!first) return Error{first.error()};
    p->after_id = *first > 0 ? *first - 1 : 0;
  }
  int64_t last = 0;
  {
    Stmt range(this,
               "SELECT max(id) FROM (SELECT id FROM tasks NOT INDEXED WHERE id > ?1 AND "
               "job_id = ?2 ORDER BY id LIMIT ?3)");
    range.Bind(1, p->after_id).Bind(2, job_id).Bind(3, std::max<int64_t>(max_rows, 1));
    if (!range.ok() || range.Step() != SQLITE_ROW) {
      return MakeError("database: remove job: " + range.error());
    }
    last = range.Null(0) ? 0 : range.Int(0);
  }
  if (Status s = Begin(); !s) return s;
  Status s;
  int64_t removed = 0;
  if (last > 0) {
    Stmt attempts(this,
                  "DELETE FROM attempts WHERE task_id > ?1 AND task_id <= ?2 AND task_id IN "
                  "(SELECT id FROM tasks NOT INDEXED WHERE id > ?1 AND id <= ?2 AND job_id = ?3)");
    Stmt measurements(this,
                      "DELETE FROM measurements WHERE task_id > ?1 AND task_id <= ?2 AND "
                      "job_id = ?3");
    Stmt tasks(this, "DELETE FROM tasks NOT INDEXED WHERE id > ?1 AND id <= ?2 AND job_id = ?3");
    for (Stmt* q : {&attempts, &measurements, &tasks}) {
      q->Bind(1, p->after_id).Bind(2, last).Bind(3, job_id);
      if (s = StepDone(*q, "remove job"); !s) break;
    }
    removed = sqlite3_changes(db_);  // the tasks'
  } else {
    // No row after the last range: unless one is left before it (ids out of position order,
    // which a job stored by this daemon never has), the job itself goes.
    auto left = FirstTaskId(job_id);
    if (left && *left > 0) {
      Rollback();
      p->after_id = *left - 1;
      return Status::Ok();
    }
    if (!left) s = Error{left.error()};
    // (Its measurements went with its tasks: they are keyed by task.)
    Stmt on_end(this, "DELETE FROM job_on_end WHERE job_id=?");
    Stmt cancels(this, "DELETE FROM job_cancels WHERE job_id=?");
    Stmt jobs(this, "DELETE FROM jobs WHERE id=?");
    Stmt mark(this, "DELETE FROM jobs_dropped WHERE job_id=?");
    for (Stmt* q : {&on_end, &cancels, &jobs, &mark}) {
      if (!s) break;
      q->Bind(1, job_id);
      s = StepDone(*q, "remove job");
    }
  }
  if (!s) {
    Rollback();
    return s;
  }
  if (Status c = Commit(); !c) return c;
  if (last > 0) {
    p->rows += removed;
    p->after_id = last;
  } else {
    p->done = true;
  }
  return Status::Ok();
}

Status Store::SetDrains(const std::vector<DrainRecord>& drains) {
  if (Status s = BeginWrite(); !s) return s;
  Status s = Exec("DELETE FROM gpu_drains");
  for (const auto& d : drains) {
    if (!s) break;
    Stmt ins(this, "INSERT INTO gpu_drains (gpu, drained_by, drained_at, reason) VALUES (?,?,?,?)");
    ins.Bind(1, int64_t{d.gpu}).Bind(2, d.by).Bind(3, d.at).Bind(4, d.reason);
    s = StepDone(ins, "record a drained GPU");
  }
  return EndWrite(s);
}

Result<std::vector<DrainRecord>> Store::Drains() {
  Stmt q(this, "SELECT gpu, drained_by, drained_at, reason FROM gpu_drains ORDER BY gpu");
  if (!q.ok()) return MakeError("database: drained GPUs: " + q.error());
  std::vector<DrainRecord> out;
  int rc;
  while ((rc = q.Step()) == SQLITE_ROW) {
    out.push_back({static_cast<int>(q.Int(0)), q.Text(1), q.Double(2), q.Text(3)});
  }
  if (rc != SQLITE_DONE) return MakeError("database: drained GPUs: " + q.error());
  return out;
}

Result<std::vector<int64_t>> Store::DroppedJobs() {
  Stmt q(this, "SELECT job_id FROM jobs_dropped ORDER BY job_id");
  if (!q.ok()) return MakeError("database: jobs being removed: " + q.error());
  std::vector<int64_t> out;
  int rc;
  while ((rc = q.Step()) == SQLITE_ROW) out.push_back(q.Int(0));
  if (rc != SQLITE_DONE) return MakeError("database: jobs being removed: " + q.error());
  return out;
}

Result<int64_t> Store::ShrinkStep(int64_t max_pages) {
  if (grouped_) return MakeError("database: no vacuum inside a group");
  {
    Stmt mode(this, "PRAGMA auto_vacuum");
    if (!mode.ok() || mode.Step() != SQLITE_ROW) return MakeError("database: " + mode.error());
    if (mode.Int(0) != 2) return int64_t{0};  // not INCREMENTAL: free pages are reused
  }
  // (Not a cached statement: the count is part of its text.)
  const std::string vacuum = "PRAGMA incremental_vacuum(" + std::to_string(max_pages) + ")";
  if (Status s = Begin(); !s) return Error{s.error()};
  if (Status s = Exec(vacuum.c_str()); !s) {
    Rollback();
    return Error{s.error()};
  }
  if (Status s = Commit(); !s) return Error{s.error()};
  Stmt free_pages(this, "PRAGMA freelist_count");
  if (!free_pages.ok() || free_pages.Step() != SQLITE_ROW) {
    return MakeError("database: " + free_pages.error());
  }
  return free_pages.Int(0);
}

void Store::TruncateLogSoon() {
  if (checkpointer_) checkpointer_->Truncate();
}

void Store::SetBulkWriting(bool bulk) {
  if (!checkpointer_ || bulk == bulk_writing_) return;
  bulk_writing_ = bulk;
  checkpointer_->SetBulk(bulk);
  // Meanwhile the log is reused from its start, not cut back each time (an ftruncate of tens
  // of megabytes held a step 10 ms); TruncateLogSoon cuts it to nothing once it is over.
  (void)Exec(bulk ? "PRAGMA journal_size_limit=-1" : "PRAGMA journal_size_limit=33554432");
}

bool Store::LogBehind() const { return checkpointer_ && checkpointer_->Behind(); }

Status Store::MarkRunning(int64_t task_id, int attempt, int gpu, double started_at) {
  if (Status s = BeginWrite(); !s) return s;
  Stmt up(this,
          "UPDATE tasks SET state='running', attempts=?, gpu=?, handle=0, started_at=?, "
          "ended_at=0 WHERE id=?");
  up.Bind(1, int64_t{attempt}).Bind(2, int64_t{gpu}).Bind(3, started_at).Bind(4, task_id);
  Status s = StepDone(up, "mark task running");
  if (s) {
    Stmt ins(this,
             "INSERT OR REPLACE INTO attempts (task_id, attempt, gpu, started_at) "
             "VALUES (?,?,?,?)");
    ins.Bind(1, task_id).Bind(2, int64_t{attempt}).Bind(3, int64_t{gpu}).Bind(4, started_at);
    s = StepDone(ins, "record attempt");
  }
  return EndWrite(s);
}

void Store::SetHandleLater(int64_t task_id, int attempt, int64_t handle) {
  pending_handles_.push_back({task_id, attempt, handle});
}

Status Store::FlushHandles() {
  if (pending_handles_.empty()) return Status::Ok();
  if (Status s = Begin(); !s) return s;
  return Commit();
}

Status Store::Begin() {
  if (Status s = Exec("BEGIN IMMEDIATE"); !s) return s;
  for (const auto& p : pending_handles_) {
    Stmt up(this, "UPDATE tasks SET handle=? WHERE id=? AND attempts=? AND state='running'");
    up.Bind(1, p.handle).Bind(2, p.task_id).Bind(3, int64_t{p.attempt});
    Status s = StepDone(up, "record a run's handle");
    if (s) {
      Stmt up2(this, "UPDATE attempts SET handle=? WHERE task_id=? AND attempt=?");
      up2.Bind(1, p.handle).Bind(2, p.task_id).Bind(3, int64_t{p.attempt});
      s = StepDone(up2, "record a run's handle");
    }
    if (!s) {
      Rollback();
      return s;
    }
  }
  return Status::Ok();
}

Status Store::Commit() {
  Status s = fail_commits_ ? MakeError("database " + path_ + ": COMMIT: refused (test fault)")
                           : Exec("COMMIT");
  if (!s) {
    Rollback();  // a COMMIT that failed may leave its transaction open
    return s;
  }
  pending_handles_.clear();
  return Status::Ok();
}

Status Store::EndWrite(Status s) {
  if (grouped_) return s;
  if (!s) {
    Rollback();
    return s;
  }
  return Commit();
}

Status Store::BeginGroup() {
  Status s = Begin();
  grouped_ = s.ok();
  return s;
}

Status Store::CommitGroup() {
  grouped_ = false;
  return Commit();
}

void Store::RollbackGroup() {
  grouped_ = false;
  Rollback();
}

Status Store::FinishAttempt(int64_t task_id, int attempt, Outcome::Kind outcome,
                            TaskState final_state, double ended_at, const std::string& result_json,
                            const UsageRecord* usage, const MeasurementRecord* measurement) {
  if (Status s = BeginWrite(); !s) return s;
  Status s;
  {
    Stmt up(this, "UPDATE tasks SET state=?, handle=0, ended_at=?, result=? WHERE id=?");
    up.Bind(1, EnumName(final_state)).Bind(2, ended_at).Bind(3, result_json).Bind(4, task_id);
    s = StepDone(up, "finish task");
  }
  if (s) {
    Stmt up(this, "UPDATE attempts SET ended_at=?, outcome=? WHERE task_id=? AND attempt=?");
    up.Bind(1, ended_at)
        .Bind(2, OutcomeKindName(outcome))
        .Bind(3, task_id)
        .Bind(4, int64_t{attempt});
    s = StepDone(up, "finish attempt");
  }
  if (s && usage) s = WriteUsage(*usage);
  if (s && measurement) {
    const MeasurementRecord& m = *measurement;
    Stmt ins(this,
             "INSERT OR REPLACE INTO measurements (task_id, job_id, uid, problem, op, profiler, "
             "gpu_model, gpu, measured_at, best_name, avg_ms, tflops, gbps, split_k) "
             "SELECT t.id, t.job_id, j.uid, t.problem, t.op, ?, ?, ?, ?, ?, ?, ?, ?, ? "
             "FROM tasks t JOIN jobs j ON j.id = t.job_id WHERE t.id = ? AND t.problem <> ''");
    ins.Bind(1, m.profiler)
        .Bind(2, m.gpu_model)
        .Bind(3, int64_t{m.gpu})
        .Bind(4, ended_at)
        .Bind(5, m.best_name)
        .Bind(6, m.avg_ms)
        .Bind(7, m.tflops)
        .Bind(8, m.gbps)
        .Bind(9, m.split_k)
        .Bind(10, task_id);
    s = StepDone(ins, "record measurement");
  }
  return EndWrite(s);
}

Result<std::optional<ReusableRecord>> Store::FindReusable(const std::string& problem,
                                                          const std::string& profiler,
                                                          const std::string& gpu_model,
                                                          double since, int64_t uid) {
  Stmt q(this,
         "SELECT m.task_id, m.job_id, t.position, m.gpu, m.measured_at, t.result "
         "FROM measurements m JOIN tasks t ON t.id = m.task_id "
         "WHERE m.problem = ?1 AND m.profiler = ?2 AND m.gpu_model = ?3 AND m.measured_at >= ?4 "
         "AND (?5 < 0 OR m.uid = ?5) AND t.state = 'succeeded' "
         "AND m.job_id NOT IN (SELECT job_id FROM jobs_dropped) "
         "ORDER BY m.measured_at DESC LIMIT 1");
  if (!q.ok()) return MakeError("database: find a result to reuse: " + q.error());
  q.Bind(1, problem).Bind(2, profiler).Bind(3, gpu_model).Bind(4, since).Bind(5, uid);
  const int rc = q.Step();
  if (rc == SQLITE_DONE) return std::optional<ReusableRecord>();
  if (rc != SQLITE_ROW) return MakeError("database: find a result to reuse: " + q.error());
  ReusableRecord r;
  r.task_id = q.Int(0);
  r.job_id = q.Int(1);
  r.position = q.Int(2);
  r.gpu = static_cast<int>(q.Int(3));
  r.measured_at = q.Double(4);
  r.result = q.Text(5);
  return std::optional<ReusableRecord>(std::move(r));
}

Status Store::SetTasksState(const std::vector<int64_t>& task_ids, TaskState state,
                            const std::string& result_json, double ended_at) {
  if (task_ids.empty()) return Status::Ok();
  if (Status s = Begin(); !s) return s;
  Stmt up(this, "UPDATE tasks SET state=?, ended_at=?, result=?, reused_from=0 WHERE id=?");
  for (int64_t id : task_ids) {
    up.Bind(1, EnumName(state)).Bind(2, ended_at).Bind(3, result_json).Bind(4, id);
    if (up.Step() != SQLITE_DONE) {
      Rollback();
      return MakeError("database: set task state: " + up.error());
    }
    up.Reset();
  }
  return Commit();
}

Status Store::SetRetried(int64_t job_id, const std::vector<int64_t>& written_out,
                         const std::vector<int64_t>& requeued) {
  if (written_out.empty() && requeued.empty()) return Status::Ok();
  if (Status s = BeginWrite(); !s) return s;
  Status s;
  {
    Stmt out(this,
             "UPDATE tasks SET state='cancelled', "
             "ended_at=(SELECT ended_at FROM job_cancels WHERE job_id=?1), "
             "result=(SELECT result FROM job_cancels WHERE job_id=?1), reused_from=0 "
             "WHERE id=?2 AND job_id=?1 AND state='queued' AND "
             "EXISTS (SELECT 1 FROM job_cancels WHERE job_id=?1)");
    for (size_t i = 0; s && i < written_out.size(); ++i) {
      out.Bind(1, job_id).Bind(2, written_out[i]);
      s = StepDone(out, "write out the cancelled tasks");
      out.Reset();
    }
  }
  if (s) {
    Stmt up(this,
            "UPDATE tasks SET state='queued', ended_at=0, result='', reused_from=0 "
            "WHERE id=?");
    for (size_t i = 0; s && i < requeued.size(); ++i) {
      up.Bind(1, requeued[i]);
      s = StepDone(up, "requeue the retried tasks");
      up.Reset();
    }
  }
  return EndWrite(s);
}

Result<bool> Store::HasCancelMark(int64_t job_id) {
  Stmt q(this, "SELECT 1 FROM job_cancels WHERE job_id=?");
  if (!q.ok()) return MakeError("database: read the job's cancel: " + q.error());
  q.Bind(1, job_id);
  const int rc = q.Step();
  if (rc != SQLITE_ROW && rc != SQLITE_DONE) {
    return MakeError("database: read the job's cancel: " + q.error());
  }
  return rc == SQLITE_ROW;
}

Status Store::MarkQueuedCancelled(int64_t job_id, double ended_at, const std::string& result_json) {
  if (Status s = BeginWrite(); !s) return s;
  Status s;
  {
    Stmt ins(this, "INSERT OR REPLACE INTO job_cancels (job_id, ended_at, result) VALUES (?,?,?)");
    ins.Bind(1, job_id).Bind(2, ended_at).Bind(3, result_json);
    s = StepDone(ins, "cancel the job's queued tasks");
  }
  return EndWrite(s);
}

Result<int64_t> Store::FirstTaskId(int64_t job_id) {
  Stmt q(this, "SELECT id FROM tasks WHERE job_id=? ORDER BY job_id, position LIMIT 1");
  q.Bind(1, job_id);
  const int rc = q.Step();
  if (rc == SQLITE_ROW) return q.Int(0);
  if (rc == SQLITE_DONE) return int64_t{0};
  return MakeError("database: the tasks of job " + std::to_string(job_id) + ": " + q.error());
}

Status Store::SetUsage(const std::vector<UsageRecord>& usage) {
  if (usage.empty()) return Status::Ok();
  if (Status s = BeginWrite(); !s) return s;
  Status s;
  for (const auto& u : usage) {
    if (s = WriteUsage(u); !s) break;
  }
  return EndWrite(s);
}

Status Store::WriteUsage(const UsageRecord& u) {
  Stmt up(this, "INSERT OR REPLACE INTO usage (uid, usage, updated_at) VALUES (?,?,?)");
  up.Bind(1, int64_t{u.uid}).Bind(2, u.usage).Bind(3, u.updated_at);
  return StepDone(up, "record usage");
}

Status Store::SetJobCancelled(int64_t job_id, bool cancelled, const std::string& reason,
                              bool marked_requeued) {
  if (Status s = BeginWrite(); !s) return s;
  Status s;
  if (!cancelled && marked_requeued) {
    Stmt unmark(this, "DELETE FROM job_cancels WHERE job_id=?");
    unmark.Bind(1, job_id);
    s = StepDone(unmark, "revive job");
  } else if (!cancelled) {
    // Revived: the tasks its cancel's mark ended (rows still 'queued') are written out as
    // cancelled, and the mark goes; a retry requeues those it retries afterwards.
    Stmt out(this,
             "UPDATE tasks SET state='cancelled', "
             "ended_at=(SELECT ended_at FROM job_cancels WHERE job_id=?1), "
             "result=(SELECT result FROM job_cancels WHERE job_id=?1), reused_from=0 "
             "WHERE job_id=?1 AND state='queued' AND "
             "EXISTS (SELECT 1 FROM job_cancels WHERE job_id=?1)");
    out.Bind(1, job_id);
    s = StepDone(out, "revive job");
    if (s) {
      Stmt unmark(this, "DELETE FROM job_cancels WHERE job_id=?");
      unmark.Bind(1, job_id);
      s = StepDone(unmark, "revive job");
    }
  }
  if (s) {
    Stmt up(this, "UPDATE jobs SET cancelled=?, cancel_reason=? WHERE id=?");
    up.Bind(1, int64_t{cancelled ? 1 : 0}).Bind(2, cancelled ? reason : "").Bind(3, job_id);
    s = StepDone(up, "cancel job");
  }
  return EndWrite(s);
}

Status Store::SetJobPriority(int64_t job_id, int priority) {
  Stmt up(this, "UPDATE jobs SET priority=? WHERE id=?");
  up.Bind(1, int64_t{priority}).Bind(2, job_id);
  return StepDone(up, "set job priority");
}

Status Store::SetJobHold(int64_t job_id, const std::string& by, int64_t by_uid) {
  Stmt up(this, "UPDATE jobs SET held_by=?, held_by_uid=? WHERE id=?");
  up.Bind(1, by).Bind(2, by.empty() ? int64_t{-1} : by_uid).Bind(3, job_id);
  return StepDone(up, by.empty() ? "release job" : "hold job");
}

Status Store::SetJobRunSettings(int64_t job_id, double timeout_s,
                                const std::string& profiler_path) {
  Stmt up(this, "UPDATE jobs SET timeout_s=?, profiler_path=? WHERE id=?");
  up.Bind(1, timeout_s).Bind(2, profiler_path).Bind(3, job_id);
  return StepDone(up, "set job run settings");
}

Status Store::SetJobFinished(int64_t job_id, double finished_at) {
  Stmt up(this, "UPDATE jobs SET finished_at=? WHERE id=?");
  up.Bind(1, finished_at).Bind(2, job_id);
  return StepDone(up, "finish job");
}

Status Store::SetJobSettings(const JobRecord& job) {
  Stmt up(this,
          "UPDATE jobs SET name=?, priority=?, gpus=?, max_gpus=?, not_before=?, timeout_s=? "
          "WHERE id=?");
  up.Bind(1, job.name)
      .Bind(2, int64_t{job.priority})
      .Bind(3, IntsToJson(job.gpus))
      .Bind(4, int64_t{job.max_gpus})
      .Bind(5, job.not_before)
      .Bind(6, job.timeout_s)
      .Bind(7, job.id);
  return StepDone(up, "edit job");
}

Status Store::SetOnEndResult(int64_t job_id, const OnEndResult& r) {
  Stmt up(this,
          "INSERT OR REPLACE INTO job_on_end (job_id, outcome, exit_code, stderr_head, ended_at) "
          "VALUES (?, ?, ?, ?, ?)");
  up.Bind(1, job_id)
      .Bind(2, r.outcome)
      .Bind(3, int64_t{r.exit_code})
      .Bind(4, r.stderr_head)
      .Bind(5, r.ended_at);
  return StepDone(up, "record the on-end command's end");
}

Status Store::DeleteJobs(const std::vector<int64_t>& job_ids) {
  if (job_ids.empty()) return Status::Ok();
  if (Status s = BeginWrite(); !s) return s;
  Status s;
  {
    Stmt attempts(this,
                  "DELETE FROM attempts WHERE task_id IN (SELECT id FROM tasks WHERE job_id=?)");
    Stmt measurements(this, "DELETE FROM measurements WHERE job_id=?");
    Stmt tasks(this, "DELETE FROM tasks WHERE job_id=?");
    Stmt on_end(this, "DELETE FROM job_on_end WHERE job_id=?");
    Stmt cancels(this, "DELETE FROM job_cancels WHERE job_id=?");
    Stmt jobs(this, "DELETE FROM jobs WHERE id=?");
    for (int64_t id : job_ids) {
      for (Stmt* q : {&attempts, &measurements, &tasks, &on_end, &cancels, &jobs}) {
        q->Bind(1, id);
        if (s = StepDone(*q, "remove job"); !s) break;
        q->Reset();
      }
      if (!s) break;
    }
  }
  return EndWrite(s);
}

Status Store::ForEachJob(const std::function<void(JobRecord&&)>& fn) {
  Stmt q(this,
         "SELECT id, uid, gid, groups, owner, name, priority, gpus, max_gpus, not_before, "
         "timeout_s, profiler_path, cwd, input_format, cancelled, submitted_at, finished_at, "
         "task_order, repeat, noise_threshold, on_end, reuse, outcome, exit_code, stderr_head, "
         "ended_at, env, held_by, held_by_uid, after_jobs, after_ok_jobs, cancel_reason, "
         "job_timeout_s, mail "
         "FROM jobs "
         "LEFT JOIN job_on_end ON job_on_end.job_id = jobs.id "
         "WHERE jobs.id NOT IN (SELECT job_id FROM jobs_dropped) ORDER BY id");
  if (!q.ok()) return MakeError("database: load jobs: " + q.error());
  int rc;
  while ((rc = q.Step()) == SQLITE_ROW) {
    JobRecord j;
    j.id = q.Int(0);
    j.uid = static_cast<uint32_t>(q.Int(1));
    j.gid = static_cast<uint32_t>(q.Int(2));
    j.groups = IntsFromJson<uint32_t>(q.Text(3));
    j.owner = q.Text(4);
    j.name = q.Text(5);
    j.priority = static_cast<int>(q.Int(6));
    j.gpus = IntsFromJson<int>(q.Text(7));
    j.max_gpus = static_cast<int>(q.Int(8));
    j.not_before = q.Double(9);
    j.timeout_s = q.Double(10);
    j.profiler_path = q.Text(11);
    j.cwd = q.Text(12);
    j.input_format = q.Text(13);
    j.cancelled = q.Int(14) != 0;
    j.submitted_at = q.Double(15);
    j.finished_at = q.Double(16);
    if (!ParseEnum(q.Text(17), &j.order)) j.order = TaskOrder::kRank;
    j.repeat = static_cast<int>(q.Int(18));
    j.noise_threshold = q.Double(19);
    j.on_end = q.Text(20);
    j.reuse = q.Int(21) != 0;
    if (!q.Null(22)) {
      j.on_end_result =
          OnEndResult{q.Text(22), static_cast<int>(q.Int(23)), q.Text(24), q.Double(25)};
    }
    j.env = SplitLines(q.Text(26));
    j.held_by = q.Text(27);
    j.held_by_uid = q.Int(28);
    j.after = IntsFromJson<int64_t>(q.Text(29));
    j.after_ok = IntsFromJson<int64_t>(q.Text(30));
    j.cancel_reason = q.Text(31);
    j.job_timeout_s = q.Double(32);
    j.mail = q.Int(33) != 0;
    fn(std::move(j));
  }
  if (rc != SQLITE_DONE) return MakeError("database: load jobs: " + q.error());
  return Status::Ok();
}

Status Store::ForEachUsage(const std::function<void(UsageRecord&&)>& fn) {
  Stmt q(this, "SELECT uid, usage, updated_at FROM usage");
  if (!q.ok()) return MakeError("database: load usage: " + q.error());
  int rc;
  while ((rc = q.Step()) == SQLITE_ROW) {
    fn(UsageRecord{static_cast<uint32_t>(q.Int(0)), q.Double(1), q.Double(2)});
  }
  if (rc != SQLITE_DONE) return MakeError("database: load usage: " + q.error());
  return Status::Ok();
}

Result<std::string> Store::TaskConfig(int64_t task_id) {
  Stmt q(this, "SELECT config FROM tasks WHERE id=?");
  q.Bind(1, task_id);
  if (!q.ok() || q.Step() != SQLITE_ROW) {
    return MakeError("database: no config for task " + std::to_string(task_id));
  }
  return q.Text(0);
}

namespace {

// A task column as ReadTaskRow reads it, from kTaskRows: as stored, or, for a row still 'queued'
// of a job whose cancel ended its queued tasks (job_cancels), as the cancel has it.
std::string OrCancelled(const std::string& column, const std::string& cancelled) {
  return "CASE WHEN c.job_id IS NOT NULL AND t.state = 'queued' THEN " + cancelled + " ELSE t." +
         column + " END";
}

// The columns ReadTaskRow reads, in its order; `brief`: without the config, result and problem
// texts (read as ""), the scheduler's working set.
std::string TaskColumns(bool brief) {
  auto text = [brief](const std::string& column) { return brief ? std::string("''") : column; };
  return "t.id, t.job_id, t.position, t.rank, t.op, " + text("t.config") + ", t.est_cost, " +
         OrCancelled("state", "'cancelled'") + ", t.attempts, t.gpu, t.handle, t.started_at, " +
         OrCancelled("ended_at", "c.ended_at") + ", " + text(OrCancelled("result", "c.result")) +
         ", t.run, " + text("t.problem") + ", t.reused_from";
}
constexpr const char* kTaskRows = " FROM tasks t LEFT JOIN job_cancels c ON c.job_id = t.job_id";

template <typename Q>
TaskRecord ReadTaskRow(Q& q) {
  TaskRecord t;
  t.id = q.Int(0);
  t.job_id = q.Int(1);
  t.position = q.Int(2);
  t.rank = q.Int(3);
  t.op = q.Text(4);
  t.config = q.Text(5);
  t.est_cost = q.Double(6);
  if (!ParseEnum(q.Text(7), &t.state)) t.state = TaskState::kFailed;
  t.attempts = static_cast<int>(q.Int(8));
  t.gpu = static_cast<int>(q.Int(9));
  t.handle = q.Int(10);
  t.started_at = q.Double(11);
  t.ended_at = q.Double(12);
  t.result = q.Text(13);
  t.run = static_cast<int>(q.Int(14));
  t.problem = q.Text(15);
  t.reused_from = q.Int(16);
  return t;
}

}  // namespace

Status Store::ForEachTaskBrief(const std::function<void(TaskRecord&&)>& fn) {
  static const std::string sql =
      "SELECT " + TaskColumns(/*brief=*/true) + kTaskRows +
      " WHERE t.job_id NOT IN (SELECT job_id FROM jobs_dropped) ORDER BY t.id";
  Stmt q(this, sql.c_str());
  if (!q.ok()) return MakeError("database: load tasks: " + q.error());
  int rc;
  while ((rc = q.Step()) == SQLITE_ROW) fn(ReadTaskRow(q));
  if (rc != SQLITE_DONE) return MakeError("database: load tasks: " + q.error());
  return Status::Ok();
}

Result<std::vector<TaskRecord>> Store::JobTasks(int64_t job_id) {
  return JobTaskRows(job_id, /*brief=*/false);
}

Result<std::vector<TaskRecord>> Store::JobTasksBrief(int64_t job_id) {
  return JobTaskRows(job_id, /*brief=*/true);
}

Result<std::vector<TaskRecord>> Store::JobTasksBriefAfter(int64_t job_id, RowsAfter after,
                                                          int64_t limit) {
  return JobTaskRows(job_id, /*brief=*/true, &after, limit);
}

Result<std::vector<TaskRecord>> Store::JobTaskRows(int64_t job_id, bool brief,
                                                   const RowsAfter* after, int64_t limit) {
  // A part (`after`): (position, id) is the order of tasks_by_job (an index ends with the
  // rowid), so that each part is a seek and a walk along it, not a sort of the rest.
  auto sql_of = [](bool b, bool part) {
    return "SELECT " + TaskColumns(b) + ", c.job_id IS NOT NULL AND t.state = 'queued'" +
           kTaskRows + " WHERE t.job_id=?" +
           (part ? " AND t.position >= ? AND (t.position > ? OR t.id > ?) "
                   "ORDER BY t.position, t.id LIMIT ?"
                 : " ORDER BY t.position, t.run");
  };
  static const std::string full = sql_of(false, false), brief_sql = sql_of(true, false),
                           part_sql = sql_of(true, true);
  Stmt q(this, (after ? part_sql : brief ? brief_sql : full).c_str());
  if (!q.ok()) return MakeError("database: load job tasks: " + q.error());
  q.Bind(1, job_id);
  if (after) q.Bind(2, after->position).Bind(3, after->position).Bind(4, after->id).Bind(5, limit);
  std::vector<TaskRecord> out;
  int rc;
  while ((rc = q.Step()) == SQLITE_ROW) {
    out.push_back(ReadTaskRow(q));
    out.back().marked = q.Int(17) != 0;
  }
  if (rc != SQLITE_DONE) return MakeError("database: load job tasks: " + q.error());
  return out;
}

Result<std::vector<TaskRecord>> Store::JobTasksAt(int64_t job_id, const std::vector<int>& positions,
                                                  bool brief) {
  auto query = [](bool brief) {
    return "SELECT " + TaskColumns(brief) + kTaskRows +
           " WHERE t.job_id=?1 AND t.position IN (SELECT value FROM json_each(?2))"
           " ORDER BY t.position, t.run";
  };
  static const std::string sql[2] = {query(false), query(true)};
  Stmt q(this, sql[brief ? 1 : 0].c_str());
  if (!q.ok()) return MakeError("database: load a job's task: " + q.error());
  std::string list = "[";
  for (int p : positions) list += (list.size() > 1 ? "," : "") + std::to_string(p);
  list += "]";
  q.Bind(1, job_id).Bind(2, list);
  std::vector<TaskRecord> out;
  int rc;
  while ((rc = q.Step()) == SQLITE_ROW) out.push_back(ReadTaskRow(q));
  if (rc != SQLITE_DONE) return MakeError("database: load a job's task: " + q.error());
  return out;
}

Result<std::vector<AttemptRecord>> Store::Attempts(int64_t task_id_or_0) {
  Stmt q(this, task_id_or_0
                   ? "SELECT task_id, attempt, gpu, handle, started_at, ended_at, outcome FROM "
                     "attempts WHERE task_id=? ORDER BY attempt"
                   : "SELECT task_id, attempt, gpu, handle, started_at, ended_at, outcome FROM "
                     "attempts ORDER BY started_at");
  if (!q.ok()) return MakeError("database: load attempts: " + q.error());
  if (task_id_or_0) q.Bind(1, task_id_or_0);
  std::vector<AttemptRecord> out;
  int rc;
  while ((rc = q.Step()) == SQLITE_ROW) {
    out.push_back(AttemptRecord{q.Int(0), static_cast<int>(q.Int(1)), static_cast<int>(q.Int(2)),
                                q.Int(3), q.Double(4), q.Double(5), q.Text(6)});
  }
  if (rc != SQLITE_DONE) return MakeError("database: load attempts: " + q.error());
  return out;
}

Result<std::string> Store::QuickCheck() {
  Stmt q(this, "PRAGMA integrity_check");
  if (!q.ok() || q.Step() != SQLITE_ROW) return MakeError("database: integrity_check failed");
  return q.Text(0);
}

namespace {

// A read-only connection of its own to the database at `path` (WAL: it reads what was
// committed, and never blocks the daemon's writes), for any thread; `what` names the reading
// in the error.
Result<sqlite3*> OpenReader(const std::string& path, const std::string& what) {
  sqlite3* db = nullptr;
  if (sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY | SQLITE_OPEN_NOMUTEX, nullptr) !=
      SQLITE_OK) {
    const std::string why = db ? sqlite3_errmsg(db) : "out of memory";
    sqlite3_close(db);
    return MakeError("database: " + what + ": cannot open " + path + ": " + why);
  }
  sqlite3_busy_timeout(db, 5000);
  return db;
}

std::string ColumnText(sqlite3_stmt* q, int col) {
  const unsigned char* t = sqlite3_column_text(q, col);
  return t ? std::string(reinterpret_cast<const char*>(t),
                         static_cast<size_t>(sqlite3_column_bytes(q, col)))
           : std::string();
}

// ReadTaskRow's view of a statement of such a connection.
struct ReaderRow {
  sqlite3_stmt* q;
  int64_t Int(int col) const { return sqlite3_column_int64(q, col); }
  double Double(int col) const { return sqlite3_column_double(q, col); }
  std::string Text(int col) const { return ColumnText(q, col); }
  std::string_view View(int col) const {
    const unsigned char* t = sqlite3_column_text(q, col);
    return t ? std::string_view(reinterpret_cast<const char*>(t),
                                static_cast<size_t>(sqlite3_column_bytes(q, col)))
             : std::string_view();
  }
};

// Store::ReadBest's pass over the measurements (`q` at its first row): each problem, profiler
// build and model's fastest, into `out`; SQLite's last step code.
int BestPass(ReaderRow q, const BestFilter& f, std::vector<BestRecord>& out) {
  std::string model_part = f.gpu_model;
  for (char& c : model_part) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  std::unordered_map<std::string, size_t> index;  // problem, profiler and model -> out[i]
  std::string key;
  int rc;
  while ((rc = sqlite3_step(q.q)) == SQLITE_ROW) {
    // Filters on the profiler's path and the model's name are not SQL: a path is the
    // identity's first word, a model matches by a part of its name in any case.
    std::string_view profiler = q.View(2);
    if (!f.profiler.empty()) {
      // The executable itself, or one in that directory (per-operation executables).
      const std::string_view path = profiler.substr(0, profiler.find(" size="));
      const bool same = path == f.profiler;
      const bool inside = path.size() > f.profiler.size() &&
                          path.compare(0, f.profiler.size(), f.profiler) == 0 &&
                          path[f.profiler.size()] == '/';
      if (!same && !inside) continue;
    }
    std::string_view model = q.View(3);
    if (!model_part.empty()) {
      std::string lower(model);
      for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      if (lower.find(model_part) == std::string::npos) continue;
    }
    const std::string_view problem = q.View(0);
    key.assign(problem).append(1, '\0').append(profiler).append(1, '\0').append(model);
    auto [it, added] = index.try_emplace(key, out.size());
    const double avg_ms = q.Double(6), at = q.Double(11);
    if (added) {
      out.emplace_back();
      BestRecord& b = out.back();
      b.problem = problem;
      b.op = q.Text(1);
      b.profiler = profiler;
      b.gpu_model = model;
      b.first_at = at;
      b.avg_ms = -1;
    }
    BestRecord& b = out[it->second];
    ++b.measured;
    b.first_at = std::min(b.first_at, at);
    b.last_at = std::max(b.last_at, at);
    if (b.avg_ms < 0 || avg_ms < b.avg_ms || (avg_ms == b.avg_ms && at < b.best_at)) {
      b.avg_ms = avg_ms;
      b.best_name = q.Text(4);
      b.split_k = q.Text(5);
      b.tflops = q.Double(7);
      b.gbps = q.Double(8);
      b.job_id = q.Int(9);
      b.task_id = q.Int(10);
      b.best_at = at;
    }
  }
  return rc;
}

}  // namespace

Result<std::vector<BestRecord>> Store::ReadBest(const std::string& path, const BestFilter& f) {
  auto db = OpenReader(path, "the tuning table");
  if (!db) return Error{db.error()};
  // One pass over the table, grouped here in a hash map: reading 100,000 rows in the index's
  // order costs a lookup of the table per row, several times a plain scan. (SQLite's bare
  // columns beside two aggregates are not defined, so the grouping is not SQL's either.)
  sqlite3_stmt* stmt = nullptr;
  int rc = sqlite3_prepare_v2(
      *db,
      "SELECT problem, op, profiler, gpu_model, best_name, split_k, avg_ms, tflops, gbps, "
      "job_id, task_id, measured_at FROM measurements "
      "WHERE (?1 = '' OR op = ?1) AND (?2 < 0 OR uid = ?2) "
      "AND job_id NOT IN (SELECT job_id FROM jobs_dropped)",
      -1, &stmt, nullptr);
  std::vector<BestRecord> out;
  if (rc == SQLITE_OK) {
    sqlite3_bind_text(stmt, 1, f.op.data(), static_cast<int>(f.op.size()), SQLITE_TRANSIENT);
    sqlite3_bind_int64(stmt, 2, f.uid);
    rc = BestPass(ReaderRow{stmt}, f, out);
  }
  const std::string why = sqlite3_errmsg(*db);
  sqlite3_finalize(stmt);
  sqlite3_close(*db);
  if (rc != SQLITE_DONE) return MakeError("database: the tuning table: " + why);
  std::sort(out.begin(), out.end(), [](const BestRecord& a, const BestRecord& b) {
    return std::tie(a.op, a.problem, a.gpu_model, a.profiler) <
           std::tie(b.op, b.problem, b.gpu_model, b.profiler);
  });
  return out;
}

Result<std::vector<BestRecord>> Store::Best(const BestFilter& filter) {
  return ReadBest(path_, filter);
}

Result<std::vector<TaskRecord>> Store::ReadJobTasks(const std::string& path, int64_t job_id) {
  auto db = OpenReader(path, "results");
  if (!db) return Error{db.error()};
  static const std::string sql = "SELECT " + TaskColumns(/*brief=*/false) + kTaskRows +
                                 " WHERE t.job_id=? ORDER BY t.position, t.run";
  sqlite3_stmt* q = nullptr;
  int rc = sqlite3_prepare_v2(*db, sql.c_str(), -1, &q, nullptr);
  std::vector<TaskRecord> out;
  if (rc == SQLITE_OK) {
    sqlite3_bind_int64(q, 1, job_id);
    ReaderRow row{q};
    while ((rc = sqlite3_step(q)) == SQLITE_ROW) out.push_back(ReadTaskRow(row));
  }
  const std::string why = sqlite3_errmsg(*db);
  sqlite3_finalize(q);
  sqlite3_close(*db);
  if (rc != SQLITE_DONE) return MakeError("database: results: " + why);
  return out;
}

Result<std::vector<Store::AttemptTally>> Store::TallyAttempts(const std::string& path, double since,
                                                              double now, int64_t uid) {
  auto reader = OpenReader(path, "usage");
  if (!reader) return Error{reader.error()};
  sqlite3* db = *reader;
  sqlite3_stmt* q = nullptr;
  int rc = sqlite3_prepare_v2(
      db,
      "SELECT j.id, j.uid, j.owner, j.name, a.outcome, COUNT(*), "
      "SUM(MAX(0, (CASE WHEN a.ended_at > 0 THEN a.ended_at ELSE ?2 END) - a.started_at)) "
      "FROM attempts a JOIN tasks t ON t.id = a.task_id JOIN jobs j ON j.id = t.job_id "
      "WHERE a.started_at >= ?1 AND (?3 < 0 OR j.uid = ?3) "
      "AND j.id NOT IN (SELECT job_id FROM jobs_dropped) GROUP BY j.id, a.outcome",
      -1, &q, nullptr);
  std::vector<AttemptTally> out;
  if (rc == SQLITE_OK) {
    sqlite3_bind_double(q, 1, since);
    sqlite3_bind_double(q, 2, now);
    sqlite3_bind_int64(q, 3, uid);
    while ((rc = sqlite3_step(q)) == SQLITE_ROW) {
      out.push_back(AttemptTally{sqlite3_column_int64(q, 0),
                                 static_cast<uint32_t>(sqlite3_column_int64(q, 1)),
                                 ColumnText(q, 2), ColumnText(q, 3), ColumnText(q, 4),
                                 sqlite3_column_int64(q, 5), sqlite3_column_double(q, 6)});
    }
  }
  const std::string why = sqlite3_errmsg(db);
  sqlite3_finalize(q);
  sqlite3_close(db);
  if (rc != SQLITE_DONE) return MakeError("database: usage: " + why);
  return out;
}

}  // namespace ckprof
