// Campaign normalisation and expansion against the real scenario catalogue.
// Pure functions: no database, no clock.

#include "coordinator/campaign.h"

#include <gmock/gmock.h>
#include <google/protobuf/util/message_differencer.h>
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <tuple>

#include "common/bounds.h"

namespace leapfrog::coord {
namespace {

using ::testing::HasSubstr;

v1::CampaignSpec spec_of(std::initializer_list<const char*> scenarios) {
  v1::CampaignSpec s;
  s.set_name("test");
  for (const char* name : scenarios) s.add_scenarios(name);
  return s;
}

// The SpecError message normalize throws for `spec`, or "" if it throws none.
std::string spec_error(const v1::CampaignSpec& spec) {
  try {
    normalize(spec);
  } catch (const SpecError& e) {
    return e.what();
  }
  return "";
}

TEST(CampaignNormalizeTest, FillsDefaults) {
  const v1::CampaignSpec spec = normalize(spec_of({"setattr-lookup"}));
  EXPECT_THAT(spec.kernels(), ::testing::ElementsAre("host"));
  EXPECT_THAT(spec.filesystems(), ::testing::ElementsAre("tmpfs"));
  EXPECT_EQ(spec.seeds(), 1u);
  EXPECT_EQ(spec.first_seed(), 0u);
  EXPECT_EQ(spec.max_attempts(), 3u);
  EXPECT_EQ(spec.max_attempts(), kDefaultMaxAttempts);
  ASSERT_TRUE(spec.has_duration());
  EXPECT_EQ(spec.duration().seconds(), 2);
  EXPECT_EQ(spec.duration().nanos(), 0);
  EXPECT_EQ(spec.iterations(), 0u);
  EXPECT_EQ(spec.name(), "test");
  EXPECT_THAT(spec.scenarios(), ::testing::ElementsAre("setattr-lookup"));
}

TEST(CampaignNormalizeTest, KeepsWhatWasGiven) {
  v1::CampaignSpec in = spec_of({"rename-lookup", "foffset"});
  in.add_kernels("6.1-test");
  in.add_kernels("host");
  in.add_filesystems("ext4");
  in.add_filesystems("fuse-cached");
  in.set_seeds(7);
  in.set_first_seed(1000);
  in.set_max_attempts(5);
  in.set_observers(3);
  in.mutable_duration()->set_seconds(30);
  (*in.mutable_params())["exchange"] = 0;
  const v1::CampaignSpec out = normalize(in);
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(in, out)) << out.DebugString();
}

TEST(CampaignNormalizeTest, IterationsNeedNoDuration) {
  v1::CampaignSpec in = spec_of({"setattr-lookup"});
  in.set_iterations(5000);
  const v1::CampaignSpec out = normalize(in);
  EXPECT_FALSE(out.has_duration())
      << "iterations win over duration, so no default duration is added";
  EXPECT_EQ(out.iterations(), 5000u);
}

TEST(CampaignNormalizeTest, IsIdempotent) {
  v1::CampaignSpec in = spec_of({"setattr-lookup", "foffset"});
  (*in.mutable_params())["depth"] = 4;
  (*in.mutable_params())["block_size"] = 16;
  const v1::CampaignSpec once = normalize(in);
  const v1::CampaignSpec twice = normalize(once);
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(once, twice))
      << twice.DebugString();
}

TEST(CampaignNormalizeTest, AcceptsLimitsInclusive) {
  v1::CampaignSpec in = spec_of({"setattr-lookup"});
  (*in.mutable_params())["depth"] = 8;  // max of [3, 8]
  in.set_max_attempts(20);
  in.mutable_duration()->set_seconds(3600);
  in.set_seeds(kMaxJobsPerCampaign);
  EXPECT_EQ(spec_error(in), "");
  (*in.mutable_params())["depth"] = 3;  // min
  EXPECT_EQ(spec_error(in), "");
}

TEST(CampaignNormalizeTest, NoScenarios) {
  EXPECT_EQ(spec_error(spec_of({})), "campaign has no scenarios");
}

TEST(CampaignNormalizeTest, UnknownScenario) {
  const std::string msg = spec_error(spec_of({"setattr-lookup", "no-such-scenario"}));
  EXPECT_THAT(msg, HasSubstr("unknown scenario \"no-such-scenario\""));
  EXPECT_THAT(msg, HasSubstr("setattr-lookup"));  // lists the known ones
}

TEST(CampaignNormalizeTest, ParameterOutOfLimits) {
  v1::CampaignSpec in = spec_of({"setattr-lookup"});
  (*in.mutable_params())["depth"] = 9;
  EXPECT_EQ(spec_error(in), "parameter \"depth\" = 9 is out of limits, want [3, 8]");
  (*in.mutable_params())["depth"] = 2;
  EXPECT_EQ(spec_error(in), "parameter \"depth\" = 2 is out of limits, want [3, 8]");
}

TEST(CampaignNormalizeTest, ParameterOutOfLimitsForOneOfTwoScenarios) {
  // foffset does not take depth: setattr-lookup's limits still apply.
  v1::CampaignSpec in = spec_of({"foffset", "setattr-lookup"});
  (*in.mutable_params())["depth"] = 99;
  EXPECT_THAT(spec_error(in), HasSubstr("parameter \"depth\" = 99 is out of limits"));
}

TEST(CampaignNormalizeTest, UnknownParameter) {
  v1::CampaignSpec in = spec_of({"setattr-lookup", "foffset"});
  (*in.mutable_params())["no_such_param"] = 1;
  EXPECT_EQ(spec_error(in), "no scenario of the campaign has a parameter \"no_such_param\"");
}

TEST(CampaignNormalizeTest, ParameterOfAnotherScenarioOnly) {
  // block_size belongs to foffset, which is not in this campaign.
  v1::CampaignSpec in = spec_of({"setattr-lookup"});
  (*in.mutable_params())["block_size"] = 64;
  EXPECT_EQ(spec_error(in), "no scenario of the campaign has a parameter \"block_size\"");
}

TEST(CampaignNormalizeTest, UnknownFileSystem) {
  v1::CampaignSpec in = spec_of({"setattr-lookup"});
  in.add_filesystems("tmpfs");
  in.add_filesystems("zfs");
  const std::string msg = spec_error(in);
  EXPECT_THAT(msg, HasSubstr("unknown file system kind 'zfs'"));
  EXPECT_THAT(msg, HasSubstr("tmpfs"));  // lists the known ones
}

TEST(CampaignNormalizeTest, UserDirIsNotForCampaigns) {
  v1::CampaignSpec in = spec_of({"setattr-lookup"});
  in.add_filesystems("dir");
  EXPECT_EQ(spec_error(in), "file system \"dir\" cannot be used in a campaign");
}

TEST(CampaignNormalizeTest, TooManyJobs) {
  v1::CampaignSpec in = spec_of({"setattr-lookup", "rename-lookup"});
  in.add_filesystems("tmpfs");
  in.add_filesystems("ext4");
  in.set_seeds(25'001);  // 2 x 2 x 25001 = 100004
  EXPECT_EQ(spec_error(in), "campaign expands to 100004 jobs, want at most 100000");
  // Large factors must not overflow into a small product.
  in.set_seeds(4'294'967'295u);
  EXPECT_THAT(spec_error(in), HasSubstr("campaign expands to 17179869180 jobs"));
}

TEST(CampaignNormalizeTest, BadMaxAttempts) {
  v1::CampaignSpec in = spec_of({"setattr-lookup"});
  in.set_max_attempts(21);
  EXPECT_EQ(spec_error(in), "bad max_attempts 21, want [1, 20]");
}

TEST(CampaignNormalizeTest, BadDuration) {
  v1::CampaignSpec in = spec_of({"setattr-lookup"});
  in.mutable_duration()->set_seconds(0);  // present but zero
  EXPECT_EQ(spec_error(in), "bad duration: want (0, 86400] seconds (24 h)");
  in.mutable_duration()->set_seconds(86401);
  EXPECT_EQ(spec_error(in), "bad duration: want (0, 86400] seconds (24 h)");
  in.mutable_duration()->set_seconds(3 * 3600);  // a job of hours (issue 47)
  EXPECT_EQ(spec_error(in), "");
  in.mutable_duration()->set_seconds(-1);
  EXPECT_EQ(spec_error(in), "bad duration: want (0, 86400] seconds (24 h)");
  // 2^55 + 1 seconds: in nanoseconds it wraps around int64 to about 1.5 s.
  in.mutable_duration()->set_seconds((int64_t{1} << 55) + 1);
  EXPECT_EQ(spec_error(in), "bad duration: want (0, 86400] seconds (24 h)");
  in.mutable_duration()->set_seconds(1);
  in.mutable_duration()->set_nanos(-5);
  EXPECT_EQ(spec_error(in), "bad duration: want (0, 86400] seconds (24 h)");
}

TEST(CampaignNormalizeTest, BadIterations) {
  v1::CampaignSpec in = spec_of({"setattr-lookup"});
  in.set_iterations(50'000'001);
  EXPECT_EQ(spec_error(in), "bad iterations 50000001, want [1, 50000000]");
}

TEST(CampaignNormalizeTest, BadObservers) {
  v1::CampaignSpec in = spec_of({"setattr-lookup"});
  in.set_observers(33);
  EXPECT_THAT(spec_error(in), HasSubstr("bad observers: 33"));
}

// The delay points are checked before the campaign is stored and reach
// every job as written.
TEST(CampaignNormalizeTest, WideningMustParseAndReachesEveryJob) {
  v1::CampaignSpec in = spec_of({"setattr-lookup"});
  for (const char* bad : {"sometimes", "step_into:1", "step_into:x:1000:any", ",", "step_into:-1:5:any"}) {
    in.set_widen(bad);
    EXPECT_THAT(spec_error(in), HasSubstr("--widen")) << bad;
  }
  for (const char* good : {"", "seed", "off", "step_into:200000:20000:65534,d_move:10000:1000:any"}) {
    in.set_widen(good);
    EXPECT_EQ(spec_error(in), "") << good;
  }
  in.set_seeds(2);
  for (const auto& job : expand(in)) EXPECT_EQ(job.spec.widen(), in.widen());
}

TEST(CampaignNormalizeTest, AlignmentMustBeKnownAndPossible) {
  v1::CampaignSpec in = spec_of({"setattr-lookup"});
  in.set_align("sometimes");
  EXPECT_THAT(spec_error(in), HasSubstr("bad align \"sometimes\""));
  in.set_align("both");
  EXPECT_EQ(spec_error(in), "");
  in.set_observers(1);
  EXPECT_THAT(spec_error(in), HasSubstr("\"both\" needs at least 2 observers"));
  v1::CampaignSpec peers = spec_of({"foffset"});
  peers.set_align("both");
  EXPECT_THAT(spec_error(peers), HasSubstr("cannot run aligned and free actors together"));
}

TEST(CampaignExpandTest, JobsCarryTheFixedStrategyOrLeaveItToTheSeed) {
  v1::CampaignSpec open = spec_of({"setattr-lookup"});
  open.set_seeds(2);
  for (const auto& job : expand(normalize(open))) {
    EXPECT_EQ(job.spec.align(), "");
    EXPECT_EQ(job.spec.observers(), 0u);
    EXPECT_EQ(job.spec.pin(), v1::CPU_PINNING_UNSPECIFIED);
  }
  v1::CampaignSpec fixed = open;
  fixed.set_align("free");
  fixed.set_pin(v1::CPU_PINNING_OFF);
  fixed.set_observers(2);
  for (const auto& job : expand(normalize(fixed))) {
    EXPECT_EQ(job.spec.align(), "free");
    EXPECT_EQ(job.spec.observers(), 2u);
    EXPECT_EQ(job.spec.pin(), v1::CPU_PINNING_OFF);
  }
}

TEST(CampaignNormalizeTest, EmptyKernelLabel) {
  v1::CampaignSpec in = spec_of({"setattr-lookup"});
  in.add_kernels("host");
  in.add_kernels("");
  EXPECT_EQ(spec_error(in), "empty kernel label");
}

TEST(CampaignExpandTest, IsTheFullMatrix) {
  v1::CampaignSpec in = spec_of({"setattr-lookup", "foffset"});
  in.add_kernels("host");
  in.add_kernels("6.1-test");
  in.add_filesystems("tmpfs");
  in.add_filesystems("ext4");
  in.set_seeds(3);
  in.set_first_seed(100);
  in.set_observers(2);
  in.mutable_duration()->set_seconds(5);
  (*in.mutable_params())["depth"] = 5;        // setattr-lookup only
  (*in.mutable_params())["block_size"] = 16;  // foffset only
  const auto jobs = expand(normalize(in));
  ASSERT_EQ(jobs.size(), 2u * 2u * 2u * 3u);

  std::set<std::tuple<std::string, std::string, std::string, uint64_t>> cells;
  for (const auto& job : jobs) {
    const v1::ScenarioSpec& js = job.spec;
    cells.emplace(job.kernel_label, js.scenario(), js.fs(), js.seed());
    EXPECT_EQ(js.duration().seconds(), 5);
    EXPECT_EQ(js.iterations(), 0u);
    EXPECT_EQ(js.observers(), 2u);
    const std::map<std::string, int64_t> params(js.params().begin(), js.params().end());
    if (js.scenario() == "setattr-lookup") {
      EXPECT_EQ(params, (std::map<std::string, int64_t>{{"depth", 5}}));
    } else {
      EXPECT_EQ(params, (std::map<std::string, int64_t>{{"block_size", 16}}));
    }
  }
  std::set<std::tuple<std::string, std::string, std::string, uint64_t>> want;
  for (const char* k : {"host", "6.1-test"})
    for (const char* s : {"setattr-lookup", "foffset"})
      for (const char* f : {"tmpfs", "ext4"})
        for (uint64_t seed : {100u, 101u, 102u}) want.emplace(k, s, f, seed);
  EXPECT_EQ(cells, want);
}

TEST(CampaignExpandTest, SeedsAreConsecutiveWithinACell) {
  v1::CampaignSpec in = spec_of({"rename-lookup"});
  in.set_seeds(5);
  in.set_first_seed(42);
  const auto jobs = expand(normalize(in));
  ASSERT_EQ(jobs.size(), 5u);
  for (size_t i = 0; i < jobs.size(); ++i) {
    EXPECT_EQ(jobs[i].spec.seed(), 42 + i);
    EXPECT_EQ(jobs[i].kernel_label, "host");
    EXPECT_EQ(jobs[i].spec.fs(), "tmpfs");
    EXPECT_EQ(jobs[i].spec.duration().seconds(), 2);
    EXPECT_TRUE(jobs[i].spec.params().empty());
  }
}

TEST(CampaignExpandTest, OrderIsStable) {
  v1::CampaignSpec in = spec_of({"setattr-lookup", "dotdot-lookup"});
  in.add_filesystems("tmpfs");
  in.add_filesystems("xfs");
  in.set_seeds(2);
  const v1::CampaignSpec spec = normalize(in);
  const auto a = expand(spec);
  const auto b = expand(spec);
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].kernel_label, b[i].kernel_label);
    EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(a[i].spec, b[i].spec)) << i;
  }
}

}  // namespace
}  // namespace leapfrog::coord

namespace leapfrog::coord {
namespace {

TEST(CampaignDedupeTest, RepeatedEntriesMakeNoDuplicateJobs) {
  v1::CampaignSpec spec;
  spec.add_scenarios("setattr-lookup");
  spec.add_scenarios("setattr-lookup");
  spec.add_filesystems("tmpfs");
  spec.add_filesystems("tmpfs");
  spec.add_kernels("host");
  spec.add_kernels("host");
  const v1::CampaignSpec n = normalize(spec);
  EXPECT_EQ(n.scenarios_size(), 1);
  EXPECT_EQ(n.filesystems_size(), 1);
  EXPECT_EQ(n.kernels_size(), 1);
  EXPECT_EQ(expand(n).size(), 1u);
}

// Kernel builds: checked against the campaign's kernels, one build job each,
// after the test jobs.
TEST(CampaignBuildsTest, RejectsBadBuildsWithTheReason) {
  auto with_build = [](const char* label, const char* source) {
    v1::CampaignSpec s = spec_of({"setattr-lookup"});
    s.add_kernels("nightly");
    auto* b = s.add_builds();
    b->set_label(label);
    b->set_source(source);
    return s;
  };
  EXPECT_EQ(spec_error(with_build("nightly", "linux-source-6.1.tar.xz")), "");  // positive control
  EXPECT_EQ(spec_error(with_build("nightly", "trees/linux")), "");
  EXPECT_THAT(spec_error(with_build("", "linux")), HasSubstr("has no label"));
  EXPECT_THAT(spec_error(with_build("other", "linux")), HasSubstr("not among the campaign's kernels"));
  EXPECT_THAT(spec_error(with_build("nightly", "")), HasSubstr("no source"));
  // The source is named inside a builder's source roots, never anywhere else.
  EXPECT_THAT(spec_error(with_build("nightly", "/etc")), HasSubstr("is an absolute path"));
  EXPECT_THAT(spec_error(with_build("nightly", "../../etc")), HasSubstr("\"..\" component"));
  EXPECT_THAT(spec_error(with_build("nightly", "linux/../../etc")), HasSubstr("\"..\" component"));
  EXPECT_THAT(spec_error(with_build("nightly", "linux//x")), HasSubstr("\"\" component"));
  v1::CampaignSpec host = with_build("host", "linux");
  host.add_kernels("host");
  EXPECT_THAT(spec_error(host), HasSubstr("cannot be built"));
  v1::CampaignSpec twice = with_build("nightly", "linux");
  *twice.add_builds() = twice.builds(0);
  EXPECT_THAT(spec_error(twice), HasSubstr("built twice"));
  // A path for the builder to read (issue 41: /etc/shadow as a patch) is refused.
  v1::CampaignSpec patch = with_build("nightly", "linux");
  patch.mutable_builds(0)->add_patches("/etc/shadow");
  EXPECT_THAT(spec_error(patch), HasSubstr("sent as content"));
  v1::CampaignSpec fragment = with_build("nightly", "linux");
  fragment.mutable_builds(0)->add_config_fragments("/etc/shadow");
  EXPECT_THAT(spec_error(fragment), HasSubstr("sent as content"));
  // Files carried: plain names, bounded sizes.
  v1::CampaignSpec named = with_build("nightly", "linux");
  named.mutable_builds(0)->add_patch_files()->set_name("../fix.patch");
  EXPECT_THAT(spec_error(named), HasSubstr("not a plain file name"));
  v1::CampaignSpec big = with_build("nightly", "linux");
  auto* f = big.mutable_builds(0)->add_patch_files();
  f->set_name("big.patch");
  f->set_content(std::string(kMaxBuildFileBytes + 1, 'x'));
  EXPECT_THAT(spec_error(big), HasSubstr("too long"));
  v1::CampaignSpec many = with_build("nightly", "linux");
  for (int i = 0; i < 5; ++i) {
    auto* part = many.mutable_builds(0)->add_config_files();
    part->set_name("part" + std::to_string(i) + ".config");
    part->set_content(std::string(kMaxBuildFileBytes, 'x'));
  }
  EXPECT_THAT(spec_error(many), HasSubstr("bytes of files, want at most"));
}

TEST(CampaignBuildsTest, TheCoordinatorSetsEachFilesSha256FromItsBytes) {
  v1::CampaignSpec s = spec_of({"setattr-lookup"});
  s.add_kernels("nightly");
  auto* b = s.add_builds();
  b->set_label("nightly");
  b->set_source("linux");
  auto* f = b->add_patch_files();
  f->set_name("0001.patch");
  f->set_content("abc");
  f->set_sha256("a lie");
  const v1::CampaignSpec n = normalize(s);
  EXPECT_EQ(n.builds(0).patch_files(0).sha256(),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST(CampaignBuildsTest, ExpandsOneBuildJobPerBuildAfterTheTests) {
  v1::CampaignSpec s = spec_of({"setattr-lookup"});
  s.add_kernels("nightly");
  s.add_kernels("host");
  s.set_seeds(2);
  auto* b = s.add_builds();
  b->set_label("nightly");
  b->set_source("linux");
  auto* f = b->add_patch_files();
  f->set_name("0001.patch");
  f->set_content("--- a/x\n");
  const auto jobs = expand(normalize(s));
  ASSERT_EQ(jobs.size(), 5u);
  for (size_t i = 0; i < 4; ++i) EXPECT_FALSE(jobs[i].build.has_value()) << i;
  ASSERT_TRUE(jobs[4].build.has_value());
  EXPECT_EQ(jobs[4].kernel_label, "nightly");
  EXPECT_EQ(jobs[4].spec.scenario(), kBuildJobScenario);
  EXPECT_EQ(jobs[4].spec.fs(), kBuildJobScenario);
  EXPECT_EQ(jobs[4].build->patch_files(0).content(), "--- a/x\n");
}

// ---- unserved: why jobs would wait with no agent to run them ----

v1::AgentInfo agent(const std::string& name, const std::string& label,
                    std::initializer_list<const char*> filesystems, bool online = true) {
  v1::AgentInfo a;
  a.set_name(name);
  a.set_online(online);
  a.mutable_capabilities()->set_kernel_label(label);
  for (const char* fs : filesystems) a.mutable_capabilities()->add_filesystems(fs);
  return a;
}

v1::Kernel kernel(const std::string& label, v1::KernelStatus status = v1::KERNEL_STATUS_READY) {
  v1::Kernel k;
  k.set_label(label);
  k.set_status(status);
  return k;
}

v1::CampaignSpec on(std::initializer_list<const char*> kernels,
                    std::initializer_list<const char*> filesystems) {
  v1::CampaignSpec s = spec_of({"setattr-lookup"});
  for (const char* k : kernels) s.add_kernels(k);
  for (const char* fs : filesystems) s.add_filesystems(fs);
  return normalize(s);
}

TEST(CampaignUnservedTest, QuietWhenEveryKernelAndFileSystemHasAnAgent) {
  const std::vector<v1::AgentInfo> agents = {agent("a", "host", {"tmpfs"}),
                                             agent("b", "host", {"ext4"}),
                                             agent("vm", "6.1-test", {"tmpfs", "ext4"})};
  EXPECT_THAT(unserved(on({"host", "6.1-test"}, {"tmpfs", "ext4"}), agents, {kernel("6.1-test")}),
              ::testing::IsEmpty());
}

TEST(CampaignUnservedTest, NamesTheLabelNoAgentRunsAndSaysWhatToDo) {
  const std::vector<v1::AgentInfo> agents = {agent("a", "host", {"tmpfs"})};
  const auto typo = unserved(on({"6.1-tset"}, {"tmpfs"}), agents, {kernel("6.1-test")});
  ASSERT_EQ(typo.size(), 1u);
  EXPECT_THAT(typo[0], HasSubstr("kernel \"6.1-tset\""));
  EXPECT_THAT(typo[0], HasSubstr("no kernel of that label is registered"));
  EXPECT_THAT(typo[0], HasSubstr("check the label"));

  const auto no_vm = unserved(on({"6.1-test"}, {"tmpfs"}), agents, {kernel("6.1-test")});
  ASSERT_EQ(no_vm.size(), 1u);
  EXPECT_THAT(no_vm[0], HasSubstr("leapfrog vm run --kernel 6.1-test"));

  const auto failed = unserved(on({"6.1-test"}, {"tmpfs"}), agents,
                               {kernel("6.1-test", v1::KERNEL_STATUS_BUILD_FAILURE)});
  ASSERT_EQ(failed.size(), 1u);
  EXPECT_THAT(failed[0], HasSubstr("last build failed"));

  const auto no_host = unserved(on({"host"}, {"tmpfs"}), {}, {});
  ASSERT_EQ(no_host.size(), 1u);
  EXPECT_THAT(no_host[0], HasSubstr("leapfrog-agent connect"));
}

TEST(CampaignUnservedTest, NamesTheFileSystemNoAgentOfTheLabelOffers) {
  // xfs is offered, but only by an agent of another kernel.
  const std::vector<v1::AgentInfo> agents = {agent("a", "host", {"tmpfs", "ext4"}),
                                             agent("vm", "6.1-test", {"xfs"})};
  const auto w = unserved(on({"host"}, {"tmpfs", "xfs"}), agents, {});
  ASSERT_EQ(w.size(), 1u);
  EXPECT_THAT(w[0], HasSubstr("kernel \"host\""));
  EXPECT_THAT(w[0], HasSubstr("file system \"xfs\""));
  EXPECT_THAT(w[0], HasSubstr("they offer: ext4, tmpfs"));
}

TEST(CampaignUnservedTest, SaysWhenEveryAgentOfTheLabelIsOffline) {
  const std::vector<v1::AgentInfo> agents = {agent("a", "host", {"tmpfs"}, false),
                                             agent("b", "host", {"tmpfs"}, false)};
  const auto w = unserved(on({"host"}, {"tmpfs"}), agents, {});
  ASSERT_EQ(w.size(), 1u);
  EXPECT_THAT(w[0], HasSubstr("its agents (a, b) are all offline"));
  auto one_back = agents;
  one_back[1].set_online(true);
  EXPECT_THAT(unserved(on({"host"}, {"tmpfs"}), one_back, {}), ::testing::IsEmpty());
}

TEST(CampaignUnservedTest, SkipsTheLabelsTheCampaignBuilds) {
  v1::CampaignSpec s = spec_of({"setattr-lookup"});
  s.add_kernels("nightly");
  auto* b = s.add_builds();
  b->set_label("nightly");
  b->set_source("linux");
  EXPECT_THAT(unserved(normalize(s), {}, {}), ::testing::IsEmpty());
}

}  // namespace
}  // namespace leapfrog::coord
