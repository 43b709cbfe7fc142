// Security of the socket on a shared server (issue 30 items 2 and 3, issue 31 item 10): a root
// ckprofd, real users of its socket group, and a hostile one among them. She may not hold every
// connection or stream (a per-user cap, slots kept for admins), nor send so many large frames at
// once that the daemon runs out of memory (byte budgets, refused as the bytes arrive); another
// user's `status` (VictimProbe) is served all along. And the client says what is wrong with a
// --socket that is no socket or has no daemon behind it. Root only (the tests skip otherwise).
#include <grp.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <iostream>
#include <random>
#include <thread>

#include "common/file_util.h"
#include "tests/util/commands.h"
#include "tests/util/daemon_fixture.h"
#include "tests/util/emulator.h"
#include "tests/util/files.h"
#include "tests/util/launched_daemon.h"
#include "tests/util/multi_user.h"
#include "tests/util/raw_client.h"
#include "tests/util/requests.h"
#include "tests/util/users.h"
#include "tests/util/victim_probe.h"

namespace ckprof {
namespace {

using json = nlohmann::json;
using testing::CommandResult;
using testing::RawClient;
using testing::SystemGroup;
using testing::SystemUser;
using testing::VictimFigures;
using testing::VictimProbe;

// `n` connections to `socket` made as `user` (in the socket's group `gid`): a child process
// takes the user's identity, connects (the daemon reads who it is from SO_PEERCRED, fixed at
// connect) and hands the sockets back over a socketpair. Empty when that fails.
std::vector<std::unique_ptr<RawClient>> ConnectAs(const SystemUser& user, gid_t gid,
                                                  const std::string& socket, int n) {
  std::vector<std::unique_ptr<RawClient>> out;
  int pair[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) != 0) return out;
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, socket.c_str(), sizeof addr.sun_path - 1);
  const pid_t pid = fork();
  if (pid == 0) {
    close(pair[0]);
    const gid_t groups[] = {gid};
    if (setgroups(1, groups) != 0 || setgid(user.gid()) != 0 || setuid(user.uid()) != 0) _exit(1);
    for (int i = 0; i < n; ++i) {
      int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
      if (fd < 0 || connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) _exit(2);
      char byte = 0;
      iovec iov{&byte, 1};
      alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
      msghdr msg{};
      msg.msg_iov = &iov;
      msg.msg_iovlen = 1;
      msg.msg_control = control;
      msg.msg_controllen = sizeof control;
      cmsghdr* cm = CMSG_FIRSTHDR(&msg);
      cm->cmsg_level = SOL_SOCKET;
      cm->cmsg_type = SCM_RIGHTS;
      cm->cmsg_len = CMSG_LEN(sizeof(int));
      std::memcpy(CMSG_DATA(cm), &fd, sizeof fd);
      if (sendmsg(pair[1], &msg, 0) != 1) _exit(3);
      close(fd);
    }
    _exit(0);
  }
  close(pair[1]);
  for (int i = 0; i < n; ++i) {
    char byte = 0;
    iovec iov{&byte, 1};
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof control;
    if (recvmsg(pair[0], &msg, MSG_CMSG_CLOEXEC) != 1) break;
    cmsghdr* cm = CMSG_FIRSTHDR(&msg);
    if (!cm || cm->cmsg_type != SCM_RIGHTS) break;
    int fd = -1;
    std::memcpy(&fd, CMSG_DATA(cm), sizeof fd);
    out.push_back(std::make_unique<RawClient>());
    out.back()->Adopt(fd);
  }
  close(pair[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) out.clear();
  return out;
}

class SecurityServerTest : public testing::MultiUserDaemonTest {
 protected:
  void SetUp() override {
    MultiUserDaemonTest::SetUp();
    if (IsSkipped()) return;
    lab_ = std::make_unique<SystemGroup>(testing::UniqueName("cks", "g"));
    ASSERT_TRUE(lab_->ok());
    attacker_ = std::make_unique<SystemUser>(testing::UniqueName("cks", "a"),
                                             std::vector<std::string>{lab_->name()});
    victim_ = std::make_unique<SystemUser>(testing::UniqueName("cks", "v"),
                                           std::vector<std::string>{lab_->name()});
    ASSERT_TRUE(attacker_->ok() && victim_->ok());
  }

  // The lab's daemon: its socket for the lab group (0660), and `extra` keys of its config.
  void StartLab(const std::string& extra = "") {
    Start(EmulatorOptions("0-3", R"({"socket_group": ")" + lab_->name() +
                                     R"(", "socket_mode": "0660")" +
                                     (extra.empty() ? "" : ", " + extra) + "}"));
  }

  std::vector<std::unique_ptr<RawClient>> Attack(int n) {
    return ConnectAs(*attacker_, lab_->gid(), daemon_.socket(), n);
  }

  std::unique_ptr<SystemGroup> lab_;
  std::unique_ptr<SystemUser> attacker_, victim_;
};

TEST_F(SecurityServerTest, OneUserCannotHoldEveryConnectionAndAdminsKeepTheirSlots) {
  StartLab(R"("max_clients": 28, "admin_reserved_clients": 4, "max_connections_per_user": 12)");
  VictimProbe probe(*victim_, daemon_.socket(), /*job=*/0, /*interval_ms=*/5);
  // She holds her 12 (greeted: the daemon has admitted each), then asks for one more.
  auto held = Attack(12);
  ASSERT_EQ(held.size(), 12u);
  for (auto& c : held) ASSERT_TRUE(c->Hello());
  auto more = Attack(1);
  ASSERT_EQ(more.size(), 1u);
  more[0]->Send("{\"type\":\"hello\",\"protocol\":1,\"id\":1}\n");
  auto refusal = more[0]->ReadJson(10);
  ASSERT_TRUE(refusal.has_value());
  EXPECT_EQ(refusal->value("error", ""),
            "you (" + attacker_->name() +
                ") already have 12 connections to ckprofd, the most one user may hold "
                "(max_connections_per_user in ckprofd's config): end some (watch, wait, log -f, "
                "scripts) and try again");
  EXPECT_TRUE(more[0]->WaitClosed(10));
  // The real client shows her the same.
  CommandResult mine = Ckprof(attacker_.get(), {"status"});
  EXPECT_EQ(mine.exit_code, 2);
  EXPECT_NE(mine.err.find("max_connections_per_user"), std::string::npos) << mine.err;
  // Everyone else is served (a few times: the probe asks meanwhile).
  for (int i = 0; i < 5; ++i) {
    CommandResult victim = Ckprof(victim_.get(), {"status"});
    EXPECT_EQ(victim.exit_code, 0) << victim.err;
  }
  CommandResult admin = Ckprof(nullptr, {"status"});
  EXPECT_EQ(admin.exit_code, 0) << admin.err;
  const VictimFigures f = probe.Stop();
  testing::ExpectVictimServed(f, "one user holding her connection cap");

  // An accomplice takes his 12 too: 24 of 28, the 4 left are the admins'.
  SystemUser accomplice(testing::UniqueName("cks", "c"), {lab_->name()});
  ASSERT_TRUE(accomplice.ok());
  auto his = ConnectAs(accomplice, lab_->gid(), daemon_.socket(), 12);
  ASSERT_EQ(his.size(), 12u);
  for (auto& c : his) ASSERT_TRUE(c->Hello());
  CommandResult shut_out = Ckprof(victim_.get(), {"status"});
  EXPECT_EQ(shut_out.exit_code, 2);
  EXPECT_NE(shut_out.err.find("serving too many clients (28)"), std::string::npos) << shut_out.err;
  admin = Ckprof(nullptr, {"status"});
  EXPECT_EQ(admin.exit_code, 0) << admin.err;
  // One of hers leaves: a slot frees for the others (once the daemon has seen it go).
  held.back()->Close();
  held.pop_back();
  bool served = false;
  for (int attempt = 0; attempt < 200 && !served; ++attempt) {
    served = Ckprof(victim_.get(), {"ping"}).exit_code == 0;
  }
  EXPECT_TRUE(served);
}

// One user's heavy requests written at once on many connections (each a cancel naming 500 of
// her queued tasks, milliseconds of the io thread; a frame of 3 KB, read at once) are not all
// handled before another user's request that came right after them: past her share of the io
// thread hers wait on a timer (IoBudget), and his is handled in between. Before, the daemon
// read hers in one go and handled every one of them first (his waited for the whole batch).
TEST_F(SecurityServerTest, OneUsersHeavyRequestsAtOnceDoNotQueueAheadOfAnothersOne) {
  StartLab();
  constexpr int kHeavy = 60, kNamed = 500;  // (60 of her 64 connections)
  const std::vector<std::string> held = {"--not-before", "+2h"};
  const int64_t hers = SubmitAs(attacker_.get(), testing::FwdConfigsText(kHeavy * kNamed), held);
  const int64_t his = SubmitAs(victim_.get(), testing::FwdConfigsText(2), held);
  ASSERT_GT(hers, 0);
  ASSERT_GT(his, 0);
  auto attack = Attack(kHeavy);
  auto mine = ConnectAs(*victim_, lab_->gid(), daemon_.socket(), 1);
  ASSERT_EQ(attack.size(), static_cast<size_t>(kHeavy));
  ASSERT_EQ(mine.size(), 1u);
  for (auto& c : attack) ASSERT_TRUE(c->Hello());
  ASSERT_TRUE(mine[0]->Hello());
  auto cancel = [](int64_t job, int first, int count) {
    CancelRequest c;
    c.job_id = job;
    for (int p = first; p < first + count; ++p) c.tasks.push_back(p);
    Request r(std::move(c));
    r.id = 2;
    return Frame(RequestToJson(r));
  };
  std::vector<std::string> frames;
  for (int i = 0; i < kHeavy; ++i) frames.push_back(cancel(hers, 1 + i * kNamed, kNamed));
  const std::string his_frame = cancel(his, 1, 1);
  for (int i = 0; i < kHeavy; ++i) ASSERT_TRUE(attack[i]->Send(frames[i]));
  ASSERT_TRUE(mine[0]->Send(his_frame));
  auto answer = mine[0]->ReadJson(60);
  ASSERT_TRUE(answer.has_value());
  EXPECT_TRUE(answer->value("ok", false)) << answer->dump();
  for (auto& c : attack) {
    auto a = c->ReadJson(120);
    ASSERT_TRUE(a.has_value());
    EXPECT_TRUE(a->value("ok", false)) << a->dump();
  }
  // The order they were handled in, from the daemon's log: his is not after all of hers.
  const std::string log = testing::ReadFile(daemon_.log_path());
  const std::string her_line = "job " + std::to_string(hers) + ": " + std::to_string(kNamed) +
                               " queued and 0 running task(s) cancelled by " + attacker_->name();
  const size_t his_at =
      log.find("job " + std::to_string(his) + ": 1 queued and 0 running task(s) cancelled by " +
               victim_->name());
  ASSERT_NE(his_at, std::string::npos) << log;
  int before = 0, after = 0;
  for (size_t at = log.find(her_line); at != std::string::npos; at = log.find(her_line, at + 1)) {
    ++(at < his_at ? before : after);
  }
  EXPECT_EQ(before + after, kHeavy);
  std::cout << "her cancels handled before his: " << before << ", after: " << after << "\n";
  EXPECT_GE(after, 1) << "his request was handled after all of hers";
  EXPECT_NE(log.find("uid " + std::to_string(attacker_->uid()) + " (" + attacker_->name() +
                     ") is past its share of ckprofd's io thread"),
            std::string::npos);
  // And hers all took effect.
  auto status = testing::JobStatus(daemon_.socket(), hers);
  ASSERT_TRUE(status.ok()) << status.error();
  EXPECT_EQ(status->counts.of(TaskState::kCancelled), kHeavy * kNamed);
}

TEST_F(SecurityServerTest, OneUserCannotFollowMoreThanHerCapOfStreams) {
  StartLab(R"("max_streams_per_user": 3)");
  // A job that waits an hour: a watch of it streams until the test ends.
  const std::string configs = ReadableFile(testing::FwdConfigsText(2), "configs.json");
  CommandResult submitted = Ckprof(attacker_.get(), {"submit", configs, "--not-before", "+1h"});
  ASSERT_EQ(submitted.exit_code, 0) << submitted.err;
  const std::string job = submitted.out.substr(0, submitted.out.find_first_of(" \n"));
  const std::string watch = "{\"type\":\"watch\",\"id\":2,\"job_id\":" + job + "}\n";
  VictimProbe probe(*victim_, daemon_.socket(), /*job=*/0, /*interval_ms=*/5);
  auto conns = Attack(4);
  ASSERT_EQ(conns.size(), 4u);
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(conns[i]->Hello());
    ASSERT_TRUE(conns[i]->Send(watch));
    auto first = conns[i]->ReadJson(10);
    ASSERT_TRUE(first.has_value());
    EXPECT_TRUE(first->value("ok", false)) << first->dump();
  }
  ASSERT_TRUE(conns[3]->Hello());
  ASSERT_TRUE(conns[3]->Send(watch));
  auto refused = conns[3]->ReadJson(10);
  ASSERT_TRUE(refused.has_value());
  EXPECT_FALSE(refused->value("ok", true));
  EXPECT_EQ(refused->value("error", ""),
            "you (" + attacker_->name() +
                ") already follow 3 jobs or logs at once (watch, wait, log -f), the most one "
                "user may (max_streams_per_user in ckprofd's config): end one and try again");
  // The connection stays usable for anything else.
  ASSERT_TRUE(conns[3]->Send("{\"type\":\"ping\",\"id\":3}\n"));
  auto pong = conns[3]->ReadJson(10);
  ASSERT_TRUE(pong.has_value());
  EXPECT_TRUE(pong->value("ok", false)) << pong->dump();
  // The real client: `ckprof wait` and `log -f` say so.
  CommandResult wait = Ckprof(attacker_.get(), {"wait", job});
  EXPECT_NE(wait.exit_code, 0);
  EXPECT_EQ(wait.err.find("ckprof wait: job " + job + ": you (" + attacker_->name() +
                          ") already follow 3 jobs"),
            0u)
      << wait.err;
  CommandResult follow = Ckprof(attacker_.get(), {"log", job + "#1", "-f"});
  EXPECT_NE(follow.exit_code, 0);
  EXPECT_NE(follow.err.find("max_streams_per_user"), std::string::npos) << follow.err;
  // Others may watch her job; the admin may too; everyone else is served.
  for (int i = 0; i < 5; ++i) {
    CommandResult victim = Ckprof(victim_.get(), {"status"});
    EXPECT_EQ(victim.exit_code, 0) << victim.err;
  }
  CommandResult admin = Ckprof(nullptr, {"status"});
  EXPECT_EQ(admin.exit_code, 0) << admin.err;
  for (const SystemUser* who : std::vector<const SystemUser*>{victim_.get(), nullptr}) {
    SCOPED_TRACE(who ? "victim" : "admin");
    auto theirs = who ? ConnectAs(*who, lab_->gid(), daemon_.socket(), 1)
                      : std::vector<std::unique_ptr<RawClient>>{};
    if (!who) {
      theirs.push_back(std::make_unique<RawClient>());
      ASSERT_TRUE(theirs.back()->Connect(daemon_.socket()));
    }
    ASSERT_EQ(theirs.size(), 1u);
    ASSERT_TRUE(theirs[0]->Hello());
    ASSERT_TRUE(theirs[0]->Send(watch));
    auto first = theirs[0]->ReadJson(10);
    ASSERT_TRUE(first.has_value());
    EXPECT_TRUE(first->value("ok", false)) << first->dump();
  }
  const VictimFigures f = probe.Stop();
  testing::ExpectVictimServed(f, "one user holding her stream cap");
  // One of her streams ends: she may follow another (once the daemon has seen it go).
  conns[0]->Close();
  bool followed = false;
  for (int attempt = 0; attempt < 200 && !followed; ++attempt) {
    auto again = Attack(1);
    ASSERT_EQ(again.size(), 1u);
    ASSERT_TRUE(again[0]->Hello());
    ASSERT_TRUE(again[0]->Send(watch));
    auto first = again[0]->ReadJson(10);
    followed = first.has_value() && first->value("ok", false);
  }
  EXPECT_TRUE(followed);
}

TEST_F(SecurityServerTest, LargeFramesAtOnceAreRefusedAsTheyArriveAndMemoryStaysBounded) {
  StartLab();  // the defaults: 64 MiB frames, 128 MiB in flight per user
  constexpr int kFrames = 8;
  constexpr size_t kContent = size_t{40} << 20;
  // A submit of 40 MiB, all but its newline: the daemon holds what it has read of each, as
  // long as it wants, and must refuse those that take her over her budget.
  std::string frame = "{\"type\":\"submit\",\"id\":2,\"content\":\"[";
  frame.append(kContent, ' ');
  frame += "]\"}";
  VictimProbe probe(*victim_, daemon_.socket(), /*job=*/0, /*interval_ms=*/5);
  const int64_t peak_before = daemon_.PeakRssBytes();
  auto conns = Attack(kFrames);
  ASSERT_EQ(conns.size(), static_cast<size_t>(kFrames));
  for (auto& c : conns) ASSERT_TRUE(c->Hello());
  std::vector<size_t> sent(kFrames, 0);
  std::vector<std::thread> senders;
  for (int i = 0; i < kFrames; ++i) {
    senders.emplace_back([&, i] {
      const int fd = conns[i]->fd();
      while (sent[i] < frame.size()) {
        ssize_t n = ::send(fd, frame.data() + sent[i], frame.size() - sent[i], MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return;  // refused: the daemon closed it
        sent[i] += static_cast<size_t>(n);
      }
    });
  }
  for (auto& t : senders) t.join();
  // Meanwhile another user's small submit goes through.
  const std::string configs = ReadableFile(testing::FwdConfigsText(2), "victim.json");
  CommandResult victim_submit = Ckprof(victim_.get(), {"submit", configs});
  EXPECT_EQ(victim_submit.exit_code, 0) << victim_submit.err;
  int refused = 0, served = 0;
  size_t least_sent = frame.size();
  for (int i = 0; i < kFrames; ++i) {
    SCOPED_TRACE("frame " + std::to_string(i) + ", " + std::to_string(sent[i]) + " bytes sent");
    if (sent[i] == frame.size()) conns[i]->Send("\n");
    auto answer = conns[i]->ReadJson(120);
    ASSERT_TRUE(answer.has_value());
    const std::string error = answer->value("error", "");
    if (error.find("max_request_bytes_per_user") != std::string::npos) {
      ++refused;
      least_sent = std::min(least_sent, sent[i]);
      EXPECT_NE(error.find("over the 128 MiB one user may have at once"), std::string::npos)
          << error;
      EXPECT_TRUE(conns[i]->WaitClosed(10));
    } else {
      ++served;  // converted: nothing to profile in a list of spaces
      EXPECT_NE(error.find("no convolution"), std::string::npos) << answer->dump();
    }
  }
  const int64_t growth = daemon_.PeakRssBytes() - peak_before;
  const VictimFigures f = probe.Stop();
  std::cout << "[ info ] " << kFrames << " frames of " << (kContent >> 20)
            << " MiB at once: " << served << " served, " << refused
            << " refused (the earliest after " << (least_sent >> 20) << " MiB); daemon peak +"
            << (growth >> 20) << " MiB\n";
  RecordProperty("daemon_peak_growth_mib", std::to_string(growth >> 20));
  testing::ExpectVictimServed(f, "8 large frames at once");
  // Her budget holds three at most: the rest were refused, before they were all there.
  EXPECT_GE(refused, kFrames - 3);
  EXPECT_GE(served, 1);
  EXPECT_LT(least_sent, frame.size());
  if (testing::kMemoryIsMeasurable) {
    // The budget and what the frames it let in cost while parsed: less than her 8 frames alone
    // (without the budget: +450 MiB).
    EXPECT_LT(growth, static_cast<int64_t>(kFrames * kContent));
  }
  EXPECT_TRUE(testing::Ping(daemon_.socket()));
}

// Users each within their budget may still take the daemon over its own: the frame that
// crosses max_request_bytes is refused, whoever sent it; small requests are served all along.
TEST_F(SecurityServerTest, TheGlobalBudgetRefusesTheFrameThatCrossesIt) {
  StartLab(R"("max_request_bytes": 50331648)");  // 48 MiB; 128 MiB per user
  SystemUser accomplice(testing::UniqueName("cks", "c"), {lab_->name()});
  ASSERT_TRUE(accomplice.ok());
  std::string frame = "{\"type\":\"submit\",\"id\":2,\"content\":\"[";
  frame.append(size_t{32} << 20, ' ');
  frame += "]\"}";
  auto hers = Attack(1);
  auto his = ConnectAs(accomplice, lab_->gid(), daemon_.socket(), 1);
  ASSERT_EQ(hers.size() + his.size(), 2u);
  RawClient* senders[] = {hers[0].get(), his[0].get()};
  // Each sends 32 MiB but its newline: together over 48 MiB.
  bool sent[2];
  for (int i = 0; i < 2; ++i) {
    ASSERT_TRUE(senders[i]->Hello());
    sent[i] = senders[i]->Send(frame);
  }
  // Meanwhile another user is served.
  const std::string configs = ReadableFile(testing::FwdConfigsText(2), "victim.json");
  CommandResult victim_submit = Ckprof(victim_.get(), {"submit", configs});
  EXPECT_EQ(victim_submit.exit_code, 0) << victim_submit.err;
  int refused = 0;
  for (int i = 0; i < 2; ++i) {
    SCOPED_TRACE(i == 0 ? "hers" : "his");
    if (sent[i]) senders[i]->Send("\n");
    auto answer = senders[i]->ReadJson(60);
    ASSERT_TRUE(answer.has_value());
    const std::string error = answer->value("error", "");
    if (error.find("max_request_bytes in its config") != std::string::npos) {
      ++refused;
      EXPECT_NE(error.find("of requests in flight from all users, over the 48 MiB it takes at "
                           "once"),
                std::string::npos)
          << error;
    } else {
      EXPECT_NE(error.find("no convolution"), std::string::npos) << answer->dump();
    }
  }
  EXPECT_EQ(refused, 1);
}

TEST_F(SecurityServerTest, AnOversizedSubmitIsRefusedNamingTheLimitAndItsKey) {
  StartLab(R"("max_frame_bytes": 1048576)");
  // A gzip of random bytes travels as its base64: 1.4 MB, over the 1 MiB limit.
  std::string noise(1 << 20, '\0');
  std::mt19937 random(7);
  for (char& c : noise) c = static_cast<char>(random());
  const std::string big = ReadableFile(*Gzip(noise, 1), "big.json.gz");
  CommandResult r = Ckprof(attacker_.get(), {"submit", big});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("frame too large: over the limit of 1048576 bytes (1 MiB, "
                       "max_frame_bytes in ckprofd's config; a submit carries a gzipped input "
                       "as base64, 4/3 of the .gz file's size)"),
            std::string::npos)
      << r.err;
  // A real gzipped trace fits.
  const std::string vit =
      ReadableFile(testing::ReadFile(testing::DataPath("vit_h100_trace.json.gz")), "vit.json.gz");
  CommandResult trace = Ckprof(victim_.get(), {"submit", vit});
  EXPECT_EQ(trace.exit_code, 0) << trace.err;
}

TEST_F(SecurityServerTest, SocketErrorsSayWhatIsWrongWithThePath) {
  StartLab();
  SystemUser outsider(testing::UniqueName("cks", "o"));
  ASSERT_TRUE(outsider.ok());
  const std::string file = ReadableFile("not a socket\n", "plain-file");
  const std::string directory = dir_.File("a-directory");
  ASSERT_EQ(mkdir(directory.c_str(), 0755), 0);
  // A socket its daemon left behind: bound, never listened on, closed.
  const std::string dead = dir_.File("dead.sock");
  {
    int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, dead.c_str(), sizeof addr.sun_path - 1);
    ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
    close(fd);
    ASSERT_EQ(chown(dead.c_str(), 0, lab_->gid()), 0);
    ASSERT_EQ(chmod(dead.c_str(), 0660), 0);
  }
  struct Case {
    std::string what, socket;
    const SystemUser* user;
    std::vector<std::string> expected;  // in the error, in this order
  } cases[] = {
      {"a regular file, as a member",
       file,
       attacker_.get(),
       {file + " is not a socket (it is a regular file)", "point --socket or CKPROF_SOCKET"}},
      {"a regular file, as root", file, nullptr, {file + " is not a socket (it is a regular"}},
      {"a directory",
       directory,
       attacker_.get(),
       {directory + " is not a socket (it is a directory)"}},
      {"a dead socket, as a member",
       dead,
       attacker_.get(),
       {"no ckprofd listening on " + dead, "start it with 'ckprofd --socket " + dead}},
      {"a dead socket, as root", dead, nullptr, {"no ckprofd listening on " + dead}},
      {"a dead socket closed to the user",
       dead,
       &outsider,
       {"no ckprofd listening on " + dead,
        "once it runs, you may not use it either: ask to join group " + lab_->name()}},
      {"a live daemon closed to the user",
       daemon_.socket(),
       &outsider,
       {"Permission denied: ckprofd runs, but you may not use it: ask to join group " +
        lab_->name()}},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.what);
    CommandResult r = Ckprof(c.user, {"status"}, Where::Socket(c.socket));
    EXPECT_EQ(r.exit_code, 2) << r.err;
    size_t at = 0;
    for (const auto& part : c.expected) {
      at = r.err.find(part, at);
      EXPECT_NE(at, std::string::npos) << "missing: " << part << "\nin: " << r.err;
      if (at == std::string::npos) break;
    }
    if (c.socket != daemon_.socket()) {
      EXPECT_EQ(r.err.find("ckprofd runs"), std::string::npos) << r.err;
    }
  }
}

}  // namespace
}  // namespace ckprof
