// The client's shared wording of a job's progress (client/client_util.h).
#include "client/client_util.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <string>

#include "common/file_util.h"
#include "tests/util/files.h"

namespace ckprof {
namespace {

// 10 tasks: 2 succeeded, 1 failed, 3 cancelled, 4 still queued.
JobSummary Job(JobState state) {
  JobSummary j;
  j.total = 10;
  j.state = state;
  j.counts.Add(TaskState::kSucceeded, 2);
  j.counts.Add(TaskState::kFailed, 1);
  j.counts.Add(TaskState::kCancelled, 3);
  j.counts.Add(TaskState::kQueued, 4);
  return j;
}

// A job being cancelled in steps is counted as a cancelled one is: by what ran, so that DONE
// does not climb to the total while the steps go on and fall back once the job has ended.
TEST(ClientUtil, ACancellingJobCountsWhatRanAsACancelledOneDoes) {
  EXPECT_EQ(JobDone(Job(JobState::kRunning)), 6);
  EXPECT_EQ(JobDone(Job(JobState::kCancelling)), 3);
  EXPECT_EQ(JobCountsText(Job(JobState::kCancelling)).rfind("3 of 10 ran: ", 0), 0u)
      << JobCountsText(Job(JobState::kCancelling));
  JobSummary ended = Job(JobState::kCancelled);
  ended.counts.Add(TaskState::kQueued, -4);
  ended.counts.Add(TaskState::kCancelled, 4);
  EXPECT_EQ(JobDone(ended), 3);
  EXPECT_EQ(JobCountsText(ended).rfind("3 of 10 ran: ", 0), 0u) << JobCountsText(ended);
}

// A mapped input cut short while it is read: the client's message and exit 1, not "Bus error".
TEST(SigbusExitDeathTest, AMappedFileCutShortEndsWithAMessage) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  testing::TempDir dir;
  const std::string path = dir.File("input.json");
  testing::WriteFile(path, std::string(2 << 20, 'x'));
  EXPECT_EXIT(
      {
        MappedFile mapped;
        if (!mapped.Map(path, 1)) _exit(3);
        SigbusExit guard("ckprof submit: input.json: the file was cut short\n");
        if (truncate(path.c_str(), 0) != 0) _exit(4);
        volatile char c = mapped.view()[1 << 20];  // past the file's end now: SIGBUS
        (void)c;
        _exit(5);
      },
      ::testing::ExitedWithCode(1), "input.json: the file was cut short");
}

}  // namespace
}  // namespace ckprof
