// Reuse's parts on their own: ProblemKey (what makes two configs the same problem), the
// profiler build's identity (ProfilerIdentities), and the Store's measurements (FindReusable,
// Best, and their removal with their jobs).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <fstream>

#include "common/ck_config.h"
#include "daemon/profiler_identity.h"
#include "daemon/store.h"
#include "tests/util/emulator.h"
#include "tests/util/files.h"

namespace ckprof {
namespace {

using testing::Conv3x3;
using testing::TempDir;

TEST(ProblemKey, NamesTheWorkAndIgnoresWhatDoesNotChangeIt) {
  CkConfig c = Conv3x3(ConvOp::kFwd, 32, 64, 64, 56);
  EXPECT_EQ(ProblemKey(c),
            "fwd fp16 NGCHW_GKCYX_NGKHW G=1 N=32 K=64 C=64 filter=3x3 input=56x56 stride=1x1 "
            "dilation=1x1 pad=1x1+1x1");
  CkConfig same = c;
  same.log = 1;  // prints more, measures the same
  same.metadata = {{"description", "another model's layer"}, {"priority_rank", 9}};
  EXPECT_EQ(ProblemKey(same), ProblemKey(c));
  // Every argument that changes the work changes the key.
  auto differs = [&](auto change) {
    CkConfig d = c;
    change(d);
    return ProblemKey(d) != ProblemKey(c);
  };
  EXPECT_TRUE(differs([](CkConfig& d) { d.data_type = 2; }));
  EXPECT_TRUE(differs([](CkConfig& d) { d.layout = 1; }));
  EXPECT_TRUE(differs([](CkConfig& d) { d.index_type = 1; }));
  EXPECT_TRUE(differs([](CkConfig& d) { d.verify = 1; }));
  EXPECT_TRUE(differs([](CkConfig& d) { d.init = 2; }));
  EXPECT_TRUE(differs([](CkConfig& d) { d.time = 0; }));
  EXPECT_TRUE(differs([](CkConfig& d) { d.G = 2; }));
  EXPECT_TRUE(differs([](CkConfig& d) { d.N = 31; }));
  EXPECT_TRUE(differs([](CkConfig& d) { d.strides = {2, 2}; }));
  EXPECT_TRUE(differs([](CkConfig& d) { d.dilations = {2, 2}; }));
  EXPECT_TRUE(differs([](CkConfig& d) { d.left_pads = {0, 0}; }));
  EXPECT_TRUE(differs([](CkConfig& d) { d.right_pads = {0, 0}; }));
  EXPECT_TRUE(differs([](CkConfig& d) { d.filter_spatial = {1, 1}; }));
  EXPECT_TRUE(differs([](CkConfig& d) { d.input_spatial = {28, 28}; }));
  // The operation, and a backward one's split_k.
  CkConfig bwd = Conv3x3(ConvOp::kBwdData, 32, 64, 64, 56);
  bwd.split_k = "all";
  EXPECT_NE(ProblemKey(bwd), ProblemKey(c));
  EXPECT_NE(ProblemKey(bwd).find(" split_k=all"), std::string::npos) << ProblemKey(bwd);
  CkConfig bwd4 = bwd;
  bwd4.split_k = "4";
  EXPECT_NE(ProblemKey(bwd4), ProblemKey(bwd));
}

TEST(ProfilerIdentities, ABuildIsItsPathSizeMtimeAndContent) {
  TempDir dir;
  const std::string exe = dir.File("ckProfiler");
  testing::WriteFile(exe, "build one");
  ProfilerIdentities ids;
  auto first = ids.Of(exe);
  ASSERT_TRUE(first.ok()) << first.error();
  EXPECT_EQ(first->rfind(exe + " size=9 mtime=", 0), 0u) << *first;
  EXPECT_NE(first->find(" hash="), std::string::npos);
  EXPECT_EQ(ids.Of(exe).value(), *first);  // cached
  // A symlink is the build it points to.
  ASSERT_EQ(symlink(exe.c_str(), dir.File("link").c_str()), 0);
  EXPECT_EQ(ids.Of(dir.File("link")).value(), *first);
  // A rebuild of the same size with the old mtime put back: the content tells them apart
  // (the cache is renewed because the inode changed).
  struct stat st {};
  ASSERT_EQ(stat(exe.c_str(), &st), 0);
  ASSERT_EQ(unlink(exe.c_str()), 0);
  testing::WriteFile(exe, "build two");
  struct timespec times[2] = {st.st_atim, st.st_mtim};
  ASSERT_EQ(utimensat(AT_FDCWD, exe.c_str(), times, 0), 0);
  auto second = ids.Of(exe);
  ASSERT_TRUE(second.ok());
  EXPECT_NE(*second, *first);
  EXPECT_NE(HashFileContent(exe).value(), 0u);
  // The same bytes elsewhere are another build (their path differs), with the same hash.
  testing::WriteFile(dir.File("copy"), "build two");
  EXPECT_EQ(HashFileContent(dir.File("copy")).value(), HashFileContent(exe).value());
  EXPECT_NE(ids.Of(dir.File("copy")).value(), *second);
  EXPECT_FALSE(ids.Of(dir.File("missing")).ok());
}

class MeasurementsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto s = Store::Open(dir_.path(), false);
    ASSERT_TRUE(s.ok()) << s.error();
    store_ = std::move(*s);
  }
  // A job of `uid` with one task of `problem`, which succeeded with `ms` on `model`.
  int64_t Measured(uint32_t uid, const std::string& problem, double ms, const std::string& model,
                   const std::string& profiler = "/ck/ckProfiler size=1 mtime=1.0 hash=1") {
    JobRecord j;
    j.uid = uid;
    j.owner = "u" + std::to_string(uid);
    std::vector<TaskRecord> tasks(1);
    tasks[0].position = 1;
    tasks[0].op = "profile_grouped_conv_fwd";
    tasks[0].config = "{}";
    tasks[0].problem = problem;
    EXPECT_TRUE(store_->InsertJob(&j, &tasks).ok());
    EXPECT_TRUE(store_->MarkRunning(tasks[0].id, 1, 0, 100).ok());
    MeasurementRecord m;
    m.profiler = profiler;
    m.gpu_model = model;
    m.gpu = 0;
    m.best_name = "kernel" + std::to_string(static_cast<int>(ms * 10));
    m.avg_ms = ms;
    m.tflops = 1 / ms;
    EXPECT_TRUE(store_
                    ->FinishAttempt(tasks[0].id, 1, Outcome::Kind::kSucceeded,
                                    TaskState::kSucceeded, 100 + ms, "{\"outcome\":\"succeeded\"}",
                                    nullptr, &m)
                    .ok());
    return j.id;
  }
  TempDir dir_;
  std::unique_ptr<Store> store_;
};

TEST_F(MeasurementsTest, FindReusableTakesTheNewestOfTheSameBuildAndModel) {
  Measured(1000, "p1", 2.0, "MI300X");
  const int64_t newer = Measured(1000, "p1", 3.0, "MI300X");
  Measured(1000, "p1", 1.0, "MI250X");
  const std::string build = "/ck/ckProfiler size=1 mtime=1.0 hash=1";
  auto hit = store_->FindReusable("p1", build, "MI300X", 0, -1);
  ASSERT_TRUE(hit.ok()) << hit.error();
  ASSERT_TRUE(hit->has_value());
  EXPECT_EQ((*hit)->job_id, newer);
  EXPECT_DOUBLE_EQ((*hit)->measured_at, 103.0);
  EXPECT_EQ((*hit)->result, "{\"outcome\":\"succeeded\"}");
  // Too old, another build, another model, another problem, another user (not shared).
  EXPECT_FALSE(store_->FindReusable("p1", build, "MI300X", 104, -1)->has_value());
  EXPECT_FALSE(store_->FindReusable("p1", "/ck/other", "MI300X", 0, -1)->has_value());
  EXPECT_FALSE(store_->FindReusable("p1", build, "H100", 0, -1)->has_value());
  EXPECT_FALSE(store_->FindReusable("p2", build, "MI300X", 0, -1)->has_value());
  EXPECT_FALSE(store_->FindReusable("p1", build, "MI300X", 0, 2000)->has_value());
  EXPECT_TRUE(store_->FindReusable("p1", build, "MI300X", 0, 1000)->has_value());
  // A removed job's measurements go with it.
  ASSERT_TRUE(store_->DeleteJobs({newer}).ok());
  auto older = store_->FindReusable("p1", build, "MI300X", 0, -1);
  ASSERT_TRUE(older->has_value());
  EXPECT_NE((*older)->job_id, newer);
}

TEST_F(MeasurementsTest, BestIsTheFastestPerProblemBuildAndModelWithItsCount) {
  Measured(1000, "p1", 2.0, "AMD Instinct MI300X");
  Measured(1000, "p1", 1.5, "AMD Instinct MI300X");
  Measured(2000, "p1", 1.8, "AMD Instinct MI300X");
  Measured(1000, "p1", 0.5, "AMD Instinct MI250X");
  Measured(1000, "p2", 4.0, "AMD Instinct MI300X", "/other/ckProfiler size=2 mtime=2.0 hash=2");
  auto all = store_->Best({});
  ASSERT_TRUE(all.ok()) << all.error();
  ASSERT_EQ(all->size(), 3u);
  const BestRecord* mi300 = nullptr;
  for (const auto& b : *all) {
    if (b.problem == "p1" && b.gpu_model == "AMD Instinct MI300X") mi300 = &b;
  }
  ASSERT_NE(mi300, nullptr);
  EXPECT_DOUBLE_EQ(mi300->avg_ms, 1.5);
  EXPECT_EQ(mi300->best_name, "kernel15");
  EXPECT_EQ(mi300->measured, 3);
  EXPECT_DOUBLE_EQ(mi300->first_at, 101.5);  // (every end here is 100 + its ms)
  EXPECT_DOUBLE_EQ(mi300->last_at, 102.0);
  EXPECT_DOUBLE_EQ(mi300->best_at, 101.5);
  // Filters: a part of the model's name in any case, the profiler's path, the user, the op.
  BestFilter f;
  f.gpu_model = "mi250";
  EXPECT_EQ(store_->Best(f)->size(), 1u);
  f = {};
  f.profiler = "/other/ckProfiler";
  ASSERT_EQ(store_->Best(f)->size(), 1u);
  EXPECT_EQ(store_->Best(f)->front().problem, "p2");
  f.profiler = "/other";  // the directory of per-operation executables
  EXPECT_EQ(store_->Best(f)->size(), 1u);
  f.profiler = "/oth";
  EXPECT_TRUE(store_->Best(f)->empty());
  f = {};
  f.uid = 2000;
  ASSERT_EQ(store_->Best(f)->size(), 1u);
  EXPECT_EQ(store_->Best(f)->front().measured, 1);
  f = {};
  f.op = "profile_grouped_conv_bwd_data";
  EXPECT_TRUE(store_->Best(f)->empty());
}

}  // namespace
}  // namespace ckprof
