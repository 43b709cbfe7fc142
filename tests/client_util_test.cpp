// The client's shared wording of a job's progress (client/client_util.h).
#include "client/client_util.h"

#include <gtest/gtest.h>

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

}  // namespace
}  // namespace ckprof
