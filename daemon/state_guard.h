// StateGuard: whether the files of ckprofd's state dir that it holds open (the database, its
// write-ahead log, the state dir's lock file) are still the files their paths name.
//
// Removing or replacing one under a running daemon (`rm ckprofd.db*`, `rm ckprofd.lock`) does
// not disturb it: it goes on writing into a file that no path reaches. What it acknowledges then
// is gone at its next start, and without its lock file a second ckprofd may take the state dir
// and stop the first one's profilers as a crash's leftovers. The daemon asks Check before it
// acknowledges a submit and every few seconds, and stops when a file is no longer its own.
//
// A plain value; Check costs one stat per file. Any thread; the daemon uses it on
// its io thread.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "common/result.h"

namespace ckprof {

class StateGuard {
 public:
  // `state_dir` names the directory in the messages.
  explicit StateGuard(std::string state_dir) : state_dir_(std::move(state_dir)) {}

  // Remembers which file `path` names: the one open as `fd` when fd >= 0, else the one stat
  // finds now. `consequence` ends the message when it is gone ("stopping so that nothing is
  // acknowledged that would be lost"). An error when the file cannot be examined. The file
  // must stay open (as SQLite keeps the database): a removed file that nobody holds frees its
  // inode, which the next file made may get, and a replacement would then pass for it.
  Status Watch(const std::string& path, int fd, std::string consequence);

  // Ok while every watched path still names the file it named at Watch; else an error that
  // names the state dir, the file, what happened to it and the consequence: "state dir /x:
  // ckprofd.db was removed under the running daemon; stopping so that ...". `lost`, when not
  // null, is set to the path of the file that is gone.
  Status Check(std::string* lost = nullptr) const;

 private:
  struct Watched {
    std::string path, consequence;
    dev_t dev = 0;
    ino_t ino = 0;
  };
  std::string state_dir_;
  std::vector<Watched> files_;
};

}  // namespace ckprof
