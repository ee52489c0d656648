#include "agent/widen.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <set>

#include "scenarios/scenario.h"

namespace leapfrog::widen {
namespace {

namespace sfs = std::filesystem;

const std::vector<std::string> kOffered = {
    "d_move",       "dotdot",      "lookup_found", "may_lookup_after", "may_lookup_before",
    "mount_attach", "mount_cross", "setattr_copy", "step_into"};

TEST(WidenChoose, IsAPureFunctionOfTheSeedAndTheOfferedPoints) {
  for (uint64_t seed = 0; seed < 50; ++seed) {
    auto shuffled = kOffered;
    std::reverse(shuffled.begin(), shuffled.end());
    const auto a = choose(seed, kOffered, 65534), b = choose(seed, shuffled, 65534);
    ASSERT_EQ(a.size(), b.size()) << seed;
    for (size_t i = 0; i < a.size(); ++i) {
      EXPECT_EQ(a[i].name, b[i].name);
      EXPECT_EQ(a[i].probability_ppm, b[i].probability_ppm);
      EXPECT_EQ(a[i].delay_ns, b[i].delay_ns);
      EXPECT_EQ(a[i].uid, b[i].uid);
    }
  }
}

TEST(WidenChoose, CoversOffAndEveryPointWithBoundedValues) {
  size_t off = 0;
  std::set<std::string> seen;
  std::set<size_t> sizes;
  for (uint64_t seed = 0; seed < 400; ++seed) {
    const auto points = choose(seed, kOffered, 65534);
    if (points.empty()) ++off;
    sizes.insert(points.size());
    std::set<std::string> names;
    for (const auto& p : points) {
      names.insert(p.name);
      seen.insert(p.name);
      EXPECT_GE(p.probability_ppm, 10'000u);
      EXPECT_LE(p.probability_ppm, 500'000u);
      EXPECT_GE(p.delay_ns, 1'000u);
      EXPECT_LE(p.delay_ns, 100'000u);
      const bool mutator =
          p.name == "setattr_copy" || p.name == "d_move" || p.name == "mount_attach";
      EXPECT_EQ(p.uid, mutator ? "0" : "65534") << p.name;
    }
    EXPECT_EQ(names.size(), points.size()) << "a point chosen twice, seed " << seed;
  }
  EXPECT_GT(off, 50u);  // about one seed in four runs without
  EXPECT_LT(off, 150u);
  EXPECT_EQ(seen.size(), kOffered.size());
  EXPECT_EQ(sizes, (std::set<size_t>{0, 1, 2, 3}));
  EXPECT_TRUE(choose(3, {}, 65534).empty());
}

TEST(WidenRequest, ParsesSeedOffAndExplicitLists) {
  EXPECT_EQ(parse_request("seed").mode, Request::Mode::Seed);
  EXPECT_EQ(parse_request("off").mode, Request::Mode::Off);
  const Request r = parse_request("d_move:1000000:50000:0,step_into:10:1000:any");
  ASSERT_EQ(r.mode, Request::Mode::Explicit);
  ASSERT_EQ(r.points.size(), 2u);
  EXPECT_EQ(r.points[0].name, "d_move");
  EXPECT_EQ(r.points[0].probability_ppm, 1'000'000u);
  EXPECT_EQ(r.points[1].uid, "any");
  EXPECT_THROW(parse_request("d_move:1:2"), UsageError);
  EXPECT_THROW(parse_request("d_move:x:2:any"), UsageError);
  EXPECT_THROW(parse_request("d_move:-1:2:any"), UsageError);
}

class WidenBegin : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/leapfrog-widen-test-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { sfs::remove_all(dir_); }
  sfs::path dir_;
};

TEST_F(WidenBegin, NoControlsMeansOffAndSaysWhy) {
  const Widening w = begin((dir_ / "none").string(), Request{}, 7, 65534);
  EXPECT_FALSE(w.on);
  EXPECT_NE(w.reason.find("not built with `leapfrog kernel build --widen`"), std::string::npos)
      << w.reason;
}

// In a VM image, the file /init leaves says why the kprobe module is missing.
TEST_F(WidenBegin, NoControlsSaysWhyTheKprobeModuleIsNotLoaded) {
  const sfs::path status = dir_ / "leapfrog-widen-kprobe";
  std::ofstream(status)
      << "insmod: can't insert 'leapfrog_widen_kprobe.ko': Key was rejected by service\n";
  const Widening w = begin((dir_ / "none").string(), Request{}, 7, 65534, status.string());
  EXPECT_FALSE(w.on);
  EXPECT_NE(
      w.reason.find("not built with `leapfrog kernel build --widen`) and the kprobe module is not "
                    "loaded: insmod: can't insert 'leapfrog_widen_kprobe.ko': Key was rejected by "
                    "service"),
      std::string::npos)
      << w.reason;
  EXPECT_EQ(w.reason.back(), 'e') << w.reason;  // the newline is trimmed
  // An empty status (the module loaded, then went away) adds nothing.
  std::ofstream(status, std::ios::trunc);
  EXPECT_EQ(
      begin((dir_ / "none").string(), Request{}, 7, 65534, status.string()).reason.find("kprobe"),
      std::string::npos);
}

TEST_F(WidenBegin, LockedControlsMeanOff) {
  std::ofstream(dir_ / "locked") << "1\n";
  const Widening w = begin(dir_.string(), Request{}, 7, 65534);
  EXPECT_FALSE(w.on);
  EXPECT_NE(w.reason.find("leapfrog_widen=off"), std::string::npos) << w.reason;
}

// Plain files take any value: a kernel whose controls behave so is not trusted.
TEST_F(WidenBegin, ControlsThatAcceptBadValuesAreNotTrusted) {
  std::ofstream(dir_ / "locked") << "0\n";
  std::ofstream(dir_ / "control");
  sfs::create_directories(dir_ / "d_move");
  for (const char* f : {"probability", "delay_ns", "uid", "hits"})
    std::ofstream(dir_ / "d_move" / f) << "0\n";
  const Widening w = begin(dir_.string(), Request{}, 7, 65534);
  EXPECT_FALSE(w.on);
  EXPECT_NE(w.reason.find("accepted a bad value"), std::string::npos) << w.reason;
  ASSERT_EQ(w.control_checks.size(), 6u);
  EXPECT_NE(w.control_checks[0].find("accepted"), std::string::npos) << w.control_checks[0];
}

// end() reads each point's hits and, where the kernel counts it, the time
// its delays took (spent_ns); a kernel without the count leaves it unset.
TEST_F(WidenBegin, EndReadsHitsAndTheDelaysLengthWhereTheKernelCountsIt) {
  std::ofstream(dir_ / "control");
  for (const char* p : {"step_into", "d_move"}) sfs::create_directories(dir_ / p);
  std::ofstream(dir_ / "step_into" / "hits") << "40\n";
  std::ofstream(dir_ / "step_into" / "spent_ns") << "4123456\n";
  std::ofstream(dir_ / "d_move" / "hits") << "3\n";
  Widening w;
  w.on = true;
  w.points = {{"step_into", 100000, 100000, "65534", 0, {}}, {"d_move", 100000, 5000, "0", 0, {}}};
  end(dir_.string(), w);
  EXPECT_EQ(w.points[0].hits, 40u);
  ASSERT_TRUE(w.points[0].spent_ns.has_value());
  EXPECT_EQ(*w.points[0].spent_ns, 4123456u);
  EXPECT_EQ(w.points[1].hits, 3u);
  EXPECT_FALSE(w.points[1].spent_ns.has_value());
  std::ifstream control(dir_ / "control");
  std::string line;
  std::getline(control, line);
  EXPECT_EQ(line, "off");
}

// A point whose delays fell short of hits × delay_ns (udelay on a CPU whose
// loops_per_jiffy is miscalibrated) gets a note naming it and the ratio;
// delays of the asked length, or no count at all, get none.
TEST(WidenShortDelays, ANoteForEachPointWhoseDelaysFellShort) {
  Widening w;
  w.on = true;
  w.points = {{"step_validated", 200000, 100000, "65534", 50, 1'000'000},  // 20 %
              {"d_move", 100000, 10000, "0", 10, 100'000},                 // as asked
              {"dotdot", 100000, 10000, "65534", 10, 95'000},              // 95 %: timer noise
              {"step_into", 100000, 10000, "65534", 10, {}},               // not counted
              {"lookup_found", 100000, 10000, "65534", 0, 0}};             // never fired
  const auto notes = short_delays(w);
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_NE(notes[0].find("step_validated's 50 delays took 20000 ns on average, not the 100000 ns "
                          "asked (20%)"),
            std::string::npos)
      << notes[0];
  w.points[0].spent_ns = 5'000'000;
  EXPECT_TRUE(short_delays(w).empty());
}

}  // namespace
}  // namespace leapfrog::widen
