#include "daemon/gpu_probe.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <fstream>
#include <mutex>
#include <sstream>
#include <string_view>

#include "common/gpu_list.h"
#include "daemon/process_util.h"
#include "daemon/unique_fd.h"
#include "daemon/user_names.h"

extern char** environ;

namespace ckprof {
namespace {

std::string Join(const std::string& root, const std::string& path) {
  if (root.empty() || root == "/") return path;
  return (root.back() == '/' ? root.substr(0, root.size() - 1) : root) + path;
}

// Calls f(name, inode) for each entry of `dir` (not "." nor ".."), unsorted; none when it
// cannot be read. One open, getdents64 into a buffer on the stack, one close: ListDir's opendir
// also stats the directory and allocates 32 KiB each time, and a look at the GPUs' processes
// lists a directory for each process, at each task's end.
template <typename F>
void ForEachEntry(const std::string& dir, F f) {
  const UniqueFd fd(open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (fd.get() < 0) return;
  alignas(struct dirent64) char buf[8192];
  ssize_t n;
  while ((n = getdents64(fd.get(), buf, sizeof buf)) > 0) {
    for (ssize_t at = 0; at < n;) {
      const auto* d = reinterpret_cast<const struct dirent64*>(buf + at);
      at += d->d_reclen;
      if (d->d_name[0] != '.') f(std::string_view(d->d_name), static_cast<ino_t>(d->d_ino));
    }
  }
}

std::vector<std::string> Names(const std::string& dir) {
  std::vector<std::string> out;
  ForEachEntry(dir, [&](std::string_view name, ino_t) { out.emplace_back(name); });
  return out;
}

bool IsNumber(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), ::isdigit);
}

// Entries whose names are numbers (topology nodes, pids), in numeric order, with their inodes.
std::vector<std::pair<long long, ino_t>> NumericEntriesAndInodes(const std::string& dir) {
  std::vector<std::pair<long long, ino_t>> out;
  ForEachEntry(dir, [&](std::string_view name, ino_t ino) {
    if (IsNumber(name)) out.emplace_back(std::stoll(std::string(name)), ino);
  });
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<long long> NumericEntries(const std::string& dir) {
  std::vector<long long> out;
  for (const auto& [n, ino] : NumericEntriesAndInodes(dir)) out.push_back(n);
  return out;
}

std::string Trimmed(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ' || s.back() == '\0')) s.pop_back();
  return s;
}

std::string ReadText(const std::string& path) { return Trimmed(ReadKernelFile(path)); }

std::optional<double> ParseNumber(const std::string& text, double scale) {
  if (text.empty()) return std::nullopt;
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (end == text.c_str() || !std::isfinite(v)) return std::nullopt;
  return v * scale;
}

// A small file a GPU's readings come from (clocks, busy, temperature, power), opened with the
// probe: each reading reads it again from its start (sysfs makes the text anew then), one
// pread instead of an open, a read and a close per file and task. One absent at the start is
// not looked for again (the probe's devices are fixed at its start too); one that can no
// longer be read through its descriptor (sysfs says ENODEV once its device is gone; a plain
// file, as in a test's tree, is checked for having been removed) is read by path. Not changed
// after construction: any thread may read it.
class ReadingFile {
 public:
  explicit ReadingFile(std::string path)
      : path_(std::move(path)), fd_(open(path_.c_str(), O_RDONLY | O_CLOEXEC)) {
    absent_ = fd_.get() < 0 && errno == ENOENT;
    struct statfs fs {};
    sysfs_ = fd_.get() >= 0 && fstatfs(fd_.get(), &fs) == 0 && fs.f_type == SYSFS_MAGIC;
  }
  std::string Text() const {
    struct stat st {};
    if (fd_.get() >= 0 && (sysfs_ || (fstat(fd_.get(), &st) == 0 && st.st_nlink > 0))) {
      char buf[4096];
      ssize_t n;
      while ((n = pread(fd_.get(), buf, sizeof buf, 0)) < 0 && errno == EINTR) {
      }
      if (n >= 0 && static_cast<size_t>(n) < sizeof buf) {
        return Trimmed(std::string(buf, static_cast<size_t>(n)));
      }
    }
    return absent_ ? "" : ReadText(path_);
  }
  std::optional<double> Number(double scale) const { return ParseNumber(Text(), scale); }

 private:
  std::string path_;
  UniqueFd fd_;
  bool absent_ = false;
  bool sysfs_ = false;  // on sysfs: read errors say a file is gone, no check needed
};

std::map<std::string, long long> ReadProperties(const std::string& path) {
  std::map<std::string, long long> out;
  std::ifstream f(path);
  std::string key;
  long long value = 0;
  while (f >> key >> value) out[key] = value;
  return out;
}

// Who `pid` is, or nullopt when it is gone (a stale entry must not hold a GPU for ever).
std::optional<ProbedProcess> Probe(pid_t pid, const std::string& runs_cgroup) {
  auto owner = ReadProcOwner(pid);
  if (!owner) return std::nullopt;
  const auto st = ReadProcStat(pid);
  if (!st || st->state == 'Z' || st->state == 'X') return std::nullopt;
  ProbedProcess p;
  p.user.pid = pid;
  p.user.uid = owner->uid;
  p.user.user = UserNameOf(owner->uid);
  p.user.command = owner->command;
  p.pgid = st->pgrp;
  // Ours: in a cgroup under the daemon's runs' (only root can move a process there). Not by
  // the CKPROFD_STATE variable: every user sees it in her profiler's environment and may set
  // it on anything of hers, which would hide her own use of a GPU.
  if (!runs_cgroup.empty()) {
    const std::string cgroup = ProcessCgroupPath(pid);
    p.ours = cgroup.size() > runs_cgroup.size() &&
             cgroup.compare(0, runs_cgroup.size(), runs_cgroup) == 0 &&
             cgroup[runs_cgroup.size()] == '/';
  }
  return p;
}

double Now() {
  using namespace std::chrono;
  return duration_cast<microseconds>(system_clock::now().time_since_epoch()).count() / 1e6;
}

// ---------------------------------------------------------------- AMD (KFD)

class KfdProbe final : public GpuProbe {
 public:
  KfdProbe(std::string root, std::string runs_cgroup)
      : root_(std::move(root)), runs_cgroup_(std::move(runs_cgroup)) {
    const std::string nodes = Join(root_, "/sys/class/kfd/kfd/topology/nodes");
    for (long long n : NumericEntries(nodes)) {
      const std::string dir = nodes + "/" + std::to_string(n);
      auto props = ReadProperties(dir + "/properties");
      if (props["simd_count"] <= 0) continue;
      Node node;
      node.gpu_id = ReadText(dir + "/gpu_id");
      node.render_minor = props.count("drm_render_minor") ? props["drm_render_minor"] : -1;
      node.arch = GfxArchName(props["gfx_target_version"]);
      if (node.render_minor >= 0) {
        node.device =
            Join(root_, "/sys/class/drm/renderD" + std::to_string(node.render_minor) + "/device");
        node.sclk.emplace(node.device + "/pp_dpm_sclk");
        node.mclk.emplace(node.device + "/pp_dpm_mclk");
        node.busy.emplace(node.device + "/gpu_busy_percent");
        for (const auto& h : ListDir(node.device + "/hwmon")) {
          const std::string hw = node.device + "/hwmon/" + h;
          node.hwmon.push_back(Hwmon{ReadingFile(hw + "/temp1_input"),
                                     ReadingFile(hw + "/power1_average"),
                                     ReadingFile(hw + "/power1_input")});
        }
      }
      nodes_.push_back(std::move(node));
    }
  }

  bool cheap() const override { return true; }
  std::string Describe() const override {
    return "AMD KFD under " + root_ + " (" + std::to_string(nodes_.size()) + " GPU(s))";
  }

  // Called on the io thread (each task's end) and the watch's thread.
  Result<std::map<int, std::vector<ProbedProcess>>> Processes() override {
    std::map<int, std::vector<ProbedProcess>> out;
    const std::string procs = Join(root_, "/sys/class/kfd/kfd/proc");
    const auto now = std::chrono::steady_clock::now();
    std::lock_guard<std::mutex> lock(known_mu_);
    std::map<long long, Known> known;
    for (const auto& [pid, ino] : NumericEntriesAndInodes(procs)) {
      // Who it is was learned at an earlier look of this same entry (the KFD makes a new one,
      // a new inode, for a new process of that pid), recently: a process that was gone stays
      // gone, and one that lived is checked to live still (and for its process group).
      const auto it = known_.find(pid);
      Known k;
      if (it != known_.end() && it->second.ino == ino && now - it->second.at < kKnownFor) {
        k = it->second;
        if (!k.who) {
          known[pid] = k;
          continue;  // a stale entry: nothing of it is read again
        }
        const auto st = ReadProcStat(static_cast<pid_t>(pid));
        if (!st || st->state == 'Z' || st->state == 'X') {
          k.who.reset();
          known[pid] = k;
          continue;
        }
        k.who->pgid = st->pgrp;
      }
      const std::string dir = procs + "/" + std::to_string(pid);
      const std::vector<std::string> entries = Names(dir);
      std::vector<std::string> queue_gpus;
      if (std::find(entries.begin(), entries.end(), "queues") != entries.end()) {
        for (const auto& q : Names(dir + "/queues")) {
          queue_gpus.push_back(ReadText(dir + "/queues/" + q + "/gpuid"));
        }
      }
      for (size_t g = 0; g < nodes_.size(); ++g) {
        const std::string& id = nodes_[g].gpu_id;
        const bool uses =
            std::find(entries.begin(), entries.end(), "vram_" + id) != entries.end() ||
            std::find(queue_gpus.begin(), queue_gpus.end(), id) != queue_gpus.end();
        if (!uses) continue;
        if (k.ino == 0) {  // not known: probed once, the first time it uses a GPU we watch
          k = Known{ino, now, Probe(static_cast<pid_t>(pid), runs_cgroup_)};
          known[pid] = k;
        }
        if (!k.who) break;  // gone
        out[static_cast<int>(g)].push_back(*k.who);
      }
      if (k.ino != 0) known[pid] = k;
    }
    known_ = std::move(known);  // entries no longer listed are forgotten
    return out;
  }

  std::map<int, GpuState> Identities() override {
    std::map<int, GpuState> out;
    const std::string driver = ReadText(Join(root_, "/sys/module/amdgpu/version"));
    for (size_t g = 0; g < nodes_.size(); ++g) {
      GpuState s;
      s.arch = nodes_[g].arch;
      s.driver = driver.empty() ? "" : "amdgpu " + driver;
      const std::string& dev = nodes_[g].device;
      if (!dev.empty()) {
        s.name = ReadText(dev + "/product_name");
        s.uuid = ReadText(dev + "/unique_id");
      }
      out[static_cast<int>(g)] = std::move(s);
    }
    return out;
  }

  std::map<int, GpuReading> Readings() override {
    std::map<int, GpuReading> out;
    for (size_t g = 0; g < nodes_.size(); ++g) out[static_cast<int>(g)] = *ReadingOf(g);
    return out;
  }

  std::optional<GpuReading> ReadingOf(int gpu) override {
    if (gpu < 0 || static_cast<size_t>(gpu) >= nodes_.size()) return std::nullopt;
    GpuReading r;
    r.at = Now();
    const Node& node = nodes_[static_cast<size_t>(gpu)];
    if (!node.device.empty()) {
      r.sclk_mhz = CurrentDpmClock(node.sclk->Text());
      r.mclk_mhz = CurrentDpmClock(node.mclk->Text());
      r.busy_percent = node.busy->Number(1);
      for (const Hwmon& hw : node.hwmon) {
        if (!r.temperature_c) r.temperature_c = hw.temp.Number(1e-3);
        if (!r.power_w) r.power_w = hw.power_average.Number(1e-6);
        if (!r.power_w) r.power_w = hw.power_input.Number(1e-6);
      }
    }
    return r;
  }

 private:
  struct Hwmon {
    ReadingFile temp, power_average, power_input;
  };
  struct Node {
    std::string gpu_id;
    long long render_minor = -1;
    std::string arch;
    std::string device;  // /sys/class/drm/renderD<minor>/device; "" = none
    // Its reading files, set with `device`.
    std::optional<ReadingFile> sclk, mclk, busy;
    std::vector<Hwmon> hwmon;  // one per hwmon directory
  };

  // What a look learned of a process of the KFD's list: kept while the list shows the same
  // entry (its inode), for kKnownFor, so that each task's end does not read /proc again for
  // every process it has seen (a stale entry cost five system calls a look, a live one six).
  struct Known {
    ino_t ino = 0;  // 0: not probed
    std::chrono::steady_clock::time_point at;
    std::optional<ProbedProcess> who;  // nullopt: gone
  };
  static constexpr std::chrono::seconds kKnownFor{2};

  std::string root_;
  std::string runs_cgroup_;
  std::vector<Node> nodes_;
  std::mutex known_mu_;
  std::map<long long, Known> known_;  // by pid
};

// ---------------------------------------------------------------- NVIDIA (nvidia-smi)

// CSV fields of one nvidia-smi line ("0, GPU-1234, NVIDIA H200").
std::vector<std::string> CsvFields(const std::string& line) {
  std::vector<std::string> out;
  std::stringstream ss(line);
  std::string f;
  while (std::getline(ss, f, ',')) {
    const size_t a = f.find_first_not_of(' ');
    const size_t b = f.find_last_not_of(" \r");
    out.push_back(a == std::string::npos ? "" : f.substr(a, b - a + 1));
  }
  return out;
}

// A number nvidia-smi printed; "[N/A]", "[Not Supported]" and the like are nullopt.
std::optional<double> SmiNumber(const std::string& field) {
  if (field.empty() || field[0] == '[' || field == "N/A") return std::nullopt;
  char* end = nullptr;
  const double v = std::strtod(field.c_str(), &end);
  if (end == field.c_str() || !std::isfinite(v)) return std::nullopt;
  return v;
}

std::vector<std::vector<std::string>> SmiQuery(const std::string& smi,
                                               const std::vector<std::string>& args,
                                               std::string* error) {
  std::vector<std::string> argv = {smi};
  argv.insert(argv.end(), args.begin(), args.end());
  auto out = RunAndCapture(argv, 10);
  if (!out) {
    if (error) *error = out.error();
    return {};
  }
  std::vector<std::vector<std::string>> rows;
  std::stringstream ss(*out);
  std::string line;
  while (std::getline(ss, line)) {
    if (line.find_first_not_of(" \r") == std::string::npos) continue;
    rows.push_back(CsvFields(line));
  }
  return rows;
}

class NvidiaSmiProbe final : public GpuProbe {
 public:
  NvidiaSmiProbe(std::string smi, std::string runs_cgroup)
      : smi_(std::move(smi)), runs_cgroup_(std::move(runs_cgroup)) {}

  bool cheap() const override { return false; }
  std::string Describe() const override { return smi_; }

  Result<std::map<int, std::vector<ProbedProcess>>> Processes() override {
    std::string error;
    if (std::lock_guard<std::mutex> lock(mu_); uuids_.empty()) LoadIdentities();
    auto rows = SmiQuery(
        smi_, {"--query-compute-apps=pid,gpu_uuid,used_memory", "--format=csv,noheader"}, &error);
    if (!error.empty()) return MakeError(error);
    std::map<int, std::vector<ProbedProcess>> out;
    for (const auto& f : rows) {
      if (f.size() < 2) continue;
      int gpu = -1;
      if (std::lock_guard<std::mutex> lock(mu_); uuids_.count(f[1])) gpu = uuids_[f[1]];
      const auto pid = SmiNumber(f[0]);
      if (gpu < 0 || !pid) continue;
      if (auto who = Probe(static_cast<pid_t>(*pid), runs_cgroup_)) out[gpu].push_back(*who);
    }
    return out;
  }

  std::map<int, GpuState> Identities() override {
    std::lock_guard<std::mutex> lock(mu_);
    return LoadIdentities();
  }

  std::map<int, GpuReading> Readings() override {
    std::map<int, GpuReading> out;
    const double now = Now();
    for (const auto& f : SmiQuery(smi_,
                                  {"--query-gpu=index,clocks.sm,clocks.mem,temperature.gpu,"
                                   "power.draw,utilization.gpu",
                                   "--format=csv,noheader,nounits"},
                                  nullptr)) {
      if (f.size() < 5 || !SmiNumber(f[0])) continue;
      GpuReading r;
      r.at = now;
      r.sclk_mhz = SmiNumber(f[1]);
      r.mclk_mhz = SmiNumber(f[2]);
      r.temperature_c = SmiNumber(f[3]);
      r.power_w = SmiNumber(f[4]);
      if (f.size() > 5) r.busy_percent = SmiNumber(f[5]);
      out[static_cast<int>(*SmiNumber(f[0]))] = r;
    }
    return out;
  }

 private:
  // (mu_ held.)
  std::map<int, GpuState> LoadIdentities() {
    std::map<int, GpuState> out;
    auto rows = SmiQuery(
        smi_, {"--query-gpu=index,uuid,name,driver_version", "--format=csv,noheader"}, nullptr);
    for (const auto& f : rows) {
      if (f.size() < 4 || !SmiNumber(f[0])) continue;
      const int g = static_cast<int>(*SmiNumber(f[0]));
      GpuState s;
      s.uuid = f[1];
      s.name = f[2];
      s.driver = "NVIDIA driver " + f[3];
      uuids_[f[1]] = g;
      out[g] = std::move(s);
    }
    // compute_cap is newer than some drivers: asked on its own, so that its absence costs
    // only the architecture.
    for (const auto& f :
         SmiQuery(smi_, {"--query-gpu=index,compute_cap", "--format=csv,noheader"}, nullptr)) {
      if (f.size() < 2 || !SmiNumber(f[0]) || !out.count(static_cast<int>(*SmiNumber(f[0])))) {
        continue;
      }
      std::string cap = f[1];
      cap.erase(std::remove(cap.begin(), cap.end(), '.'), cap.end());
      if (!cap.empty() && std::all_of(cap.begin(), cap.end(), ::isdigit)) {
        out[static_cast<int>(*SmiNumber(f[0]))].arch = "sm_" + cap;
      }
    }
    return out;
  }

  const std::string smi_;
  const std::string runs_cgroup_;
  std::mutex mu_;
  std::map<std::string, int> uuids_;  // GPU UUID -> index (mu_)
};

}  // namespace

std::string GfxArchName(long long v) {
  if (v <= 0) return "";
  const long long major = v / 10000, minor = (v / 100) % 100, stepping = v % 100;
  static const char* hex = "0123456789abcdef";
  if (minor > 15 || stepping > 15) return "gfx" + std::to_string(v);
  return "gfx" + std::to_string(major) + hex[minor] + hex[stepping];
}

std::optional<double> CurrentDpmClock(const std::string& text) {
  // Lines such as "1: 2100Mhz *"; the current level ends in '*'. (Parsed by hand: it is read
  // twice per task.)
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    const std::string_view line(text.data() + start, end - start);
    start = end + 1;
    const size_t colon = line.find(':');
    const size_t star = line.find_last_not_of(" \t\r");
    if (colon == std::string_view::npos || star == std::string_view::npos || line[star] != '*') {
      continue;
    }
    const std::string value(line.substr(colon + 1));
    char* stop = nullptr;
    const double mhz = std::strtod(value.c_str(), &stop);
    if (stop == value.c_str() || !std::isfinite(mhz)) continue;
    std::string unit(stop);
    unit.erase(0, unit.find_first_not_of(' '));
    for (char& c : unit) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (unit.rfind("mhz", 0) == 0) return mhz;
  }
  return std::nullopt;
}

int CountKfdGpus(const std::string& sysfs_root) {
  int n = 0;
  const std::string nodes = Join(sysfs_root, "/sys/class/kfd/kfd/topology/nodes");
  for (long long node : NumericEntries(nodes)) {
    auto props = ReadProperties(nodes + "/" + std::to_string(node) + "/properties");
    n += props["simd_count"] > 0 ? 1 : 0;
  }
  return n;
}

Result<std::string> RunAndCapture(const std::vector<std::string>& argv, double timeout_s) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return MakeError(std::string("pipe: ") + std::strerror(errno));
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&fa, fds[1], 1);
  posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = -1;
  const int rc = posix_spawnp(&pid, args[0], &fa, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  close(fds[1]);
  if (rc != 0) {
    close(fds[0]);
    return MakeError("cannot run " + argv[0] + ": " + std::strerror(rc));
  }
  std::string out;
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1000));
  bool timed_out = false;
  char buf[8192];
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      timed_out = true;
      break;
    }
    pollfd p{fds[0], POLLIN, 0};
    const int n = poll(&p, 1, static_cast<int>(left.count()));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      timed_out = n == 0;
      break;
    }
    const ssize_t got = read(fds[0], buf, sizeof buf);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) break;
    out.append(buf, static_cast<size_t>(got));
  }
  close(fds[0]);
  if (timed_out) kill(pid, SIGKILL);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (timed_out) return MakeError(argv[0] + " did not answer within " + FormatSeconds(timeout_s));
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    std::string first = out.substr(0, out.find('\n'));
    return MakeError(argv[0] + " failed" +
                     (WIFEXITED(status) ? " (exit " + std::to_string(WEXITSTATUS(status)) + ")"
                                        : " (" + SignalName(WTERMSIG(status)) + ")") +
                     (first.empty() ? "" : ": " + first));
  }
  return out;
}

std::unique_ptr<GpuProbe> MakeKfdProbe(std::string sysfs_root, std::string runs_cgroup) {
  return std::make_unique<KfdProbe>(std::move(sysfs_root), std::move(runs_cgroup));
}

std::unique_ptr<GpuProbe> MakeNvidiaSmiProbe(std::string nvidia_smi, std::string runs_cgroup) {
  return std::make_unique<NvidiaSmiProbe>(std::move(nvidia_smi), std::move(runs_cgroup));
}

std::unique_ptr<GpuProbe> MakeGpuProbe(const std::string& sysfs_root,
                                       const std::vector<std::string>& pin_env,
                                       const std::string& nvidia_smi,
                                       const std::string& runs_cgroup, std::string* note) {
  if (CountKfdGpus(sysfs_root) > 0) {
    auto probe = MakeKfdProbe(sysfs_root, runs_cgroup);
    *note = probe->Describe();
    return probe;
  }
  const bool cuda =
      std::find(pin_env.begin(), pin_env.end(), "CUDA_VISIBLE_DEVICES") != pin_env.end();
  if (!cuda) {
    *note = "no KFD topology under " + sysfs_root +
            " and the pin variable is not CUDA_VISIBLE_DEVICES: GPUs are not watched";
    return nullptr;
  }
  if (auto ok = RunAndCapture({nvidia_smi, "--query-gpu=index", "--format=csv,noheader"}, 10);
      !ok) {
    *note = ok.error() + ": GPUs are not watched";
    return nullptr;
  }
  auto probe = MakeNvidiaSmiProbe(nvidia_smi, runs_cgroup);
  *note = probe->Describe();
  return probe;
}

}  // namespace ckprof
