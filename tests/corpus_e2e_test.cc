// The corpus of reverted real fixes (tests/corpus/), caught in VMs: each bug
// is a patch that brings a fixed Linux race back on Debian's
// linux-source-6.1, built with Leapfrog's delay points (`--widen`), and its
// twin is 6.1 as shipped with the same points. The agent sets the points
// from the seed; the test picks seeds whose choice includes the point that
// sits inside the bug's window, so both kernels are raced the same way.
//
// Shares the kernel suite's fixture and build cache (tests/kernel_fixture.h).
// The other corpus bugs, caught or not, are measured by bench/detect_bench.cc
// (docs/detection.md): their rates under TCG are too low for a test.

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "agent/widen.h"
#include "tests/kernel_fixture.h"

namespace {

using namespace leapfrog::testing;

const std::string kCorpus = std::string(LEAPFROG_SOURCE_DIR) + "/tests/corpus/";

// The points a --widen build of 6.1 offers (deploy/kernel/widen/).
const std::vector<std::string> kOffered = {
    "acl_fetched",  "d_move",       "dotdot",           "dotdot_mountpoint",
    "exec_setid",   "lookup_found", "may_lookup_after", "may_lookup_before",
    "mount_attach", "mount_cross",  "setattr_copy",     "step_into",    "step_validated"};

constexpr uint32_t kObserverUid = 65534;

// The first `count` seeds from `from` whose widening sets `point` for the
// observers with at least `min_ppm` and `min_delay_ns`.
std::vector<uint64_t> seeds_widening(const std::string& point, size_t count, uint32_t min_ppm,
                                     uint32_t min_delay_ns, uint64_t from = 1) {
  std::vector<uint64_t> out;
  for (uint64_t s = from; out.size() < count; ++s)
    for (const auto& p : leapfrog::widen::choose(s, kOffered, kObserverUid))
      if (p.name == point && p.probability_ppm >= min_ppm && p.delay_ns >= min_delay_ns) {
        out.push_back(s);
        break;
      }
  return out;
}

class CorpusE2E : public KernelE2E {
 protected:
  // A campaign of `scenario` on `fs` with `params`, `seeds` seeds from
  // `first`, on `label`, waited for; the campaign JSON. It races under the
  // fuzzy barrier, pinned, so that the bug and its twin race alike and the
  // seed picks only the widening.
  json campaign(const std::string& label, const std::string& scenario, const std::string& fs,
                const std::vector<std::string>& params, uint64_t first, int seeds,
                const std::string& iterations) {
    std::vector<std::string> args = {"campaign",      "run",     "--name",     "corpus-" + label,
                                     "--scenario",    scenario,  "--fs",       fs,
                                     "--kernel",      label,     "--iterations", iterations,
                                     "--first-seed",  std::to_string(first), "--seeds",
                                     std::to_string(seeds),      "--align", "fuzzy", "--pin", "on",
                                     "--wait"};
    for (const auto& p : params) args.insert(args.end(), {"--param", p});
    return cli_json(args, 1500s);
  }

  // "verdict kinds | checked" per outcome, for messages and the log.
  std::string describe(const Rows& rows) {
    std::string t;
    for (const auto& r : rows) t += r[0] + " [" + r[1] + "] " + r[2] + " (" + r[3] + ")\n";
    return t;
  }
};

// 766c4cbfacd8 re-created: step_into() decides that the step's dentry is
// negative from its flags read after the d_seq check, not from the inode
// that check validated. typeflip-lookup on ext4 turns the name "n" from
// file to directory to symlink (rename over it, unlink+mkdir reusing the
// negative dentry); the step_validated point, which the corpus patch puts
// in the window, holds an observer there. The walk then either fails with
// ENOENT for a name that never went away (rename over is atomic) or walks
// on with a NULL inode and oopses in inode_permission(). The twin, raced
// with the same seeds and points, stays clean.
TEST_F(CorpusE2E, TheNegativeDentryRaceIsCaughtWithWideningAndItsTwinIsClean) {
  const json bug = build("corpus-negative", {kCorpus + "negative-dentry-766c4cbfacd8.patch"}, {"--widen"});
  ASSERT_EQ(bug["status"], "ready") << bug.dump();
  const json twin = build("corpus-twin", {}, {"--widen"});
  ASSERT_EQ(twin["status"], "ready") << twin.dump();
  const auto seeds = seeds_widening("step_validated", 5, 200000, 100000);

  boot("corpus-negative");
  boot("corpus-twin");
  int caught = 0;
  std::string bad_text, good_text;
  for (const uint64_t seed : seeds) {
    const json bad = campaign("corpus-negative", "typeflip-lookup", "ext4", {}, seed, 1, "2000");
    const json good = campaign("corpus-twin", "typeflip-lookup", "ext4", {}, seed, 1, "2000");
    const Rows bad_rows = results(bad.at("campaign").get<int64_t>());
    const Rows good_rows = results(good.at("campaign").get<int64_t>());
    ASSERT_EQ(bad_rows.size(), 1u) << logs();
    ASSERT_EQ(good_rows.size(), 1u) << logs();
    bad_text += "seed " + std::to_string(seed) + ": " + describe(bad_rows);
    good_text += "seed " + std::to_string(seed) + ": " + describe(good_rows);
    // VERDICT_VIOLATION with the stray ENOENT, or VERDICT_KERNEL_CRASH with
    // the oops (an observer the oops killed leaves VERDICT_ERROR).
    const std::string& v = bad_rows[0][0];
    if (v == "2") {
      ++caught;
      EXPECT_NE(bad_rows[0][1].find("stale-entry"), std::string::npos) << bad_rows[0][1];
    } else if (v == "5") {
      ++caught;
      EXPECT_NE(bad_rows[0][2].find("NULL pointer dereference"), std::string::npos) << bad_rows[0][2];
    }
    EXPECT_EQ(good_rows[0][0], "1") << describe(good_rows);  // VERDICT_PASS
  }
  std::printf("negative-dentry bug:\n%stwin:\n%s", bad_text.c_str(), good_text.c_str());
  EXPECT_GE(caught, 1) << bad_text << logs();
}

// aed434ada685 brought back (its 6.1 form): follow_dotdot_rcu() no longer
// checks mount_lock after choose_mountpoint_rcu() read a mount's mountpoint
// and parent mount, which mount --move changes together. mount-move-dotdot
// moves a bind mount between two directories that are each the root of
// their own tmpfs (parents=0), so a move changes the parent mount too; the
// dotdot_mountpoint point holds an observer between the two reads, and `..`
// out of the moved root lands where no ref-walk could (a stale entry or a
// trap's EACCES). The twin, raced with the same seeds and points, is clean.
TEST_F(CorpusE2E, TheDotdotAcrossMountMoveRaceIsCaughtWithWideningAndItsTwinIsClean) {
  const json bug = build("corpus-dotdot", {kCorpus + "dotdot-mount-aed434ada685.patch"}, {"--widen"});
  ASSERT_EQ(bug["status"], "ready") << bug.dump();
  const json twin = build("corpus-twin", {}, {"--widen"});
  ASSERT_EQ(twin["status"], "ready") << twin.dump();
  const auto seeds = seeds_widening("dotdot_mountpoint", 2, 200000, 20000);

  boot("corpus-dotdot");
  boot("corpus-twin");
  const std::vector<std::string> params = {"parents=0", "moved=0"};
  int caught = 0;
  std::string bad_text, good_text;
  for (const uint64_t seed : seeds) {
    const json bad = campaign("corpus-dotdot", "mount-move-dotdot", "ext4", params, seed, 1, "2000");
    const json good = campaign("corpus-twin", "mount-move-dotdot", "ext4", params, seed, 1, "2000");
    const Rows bad_rows = results(bad.at("campaign").get<int64_t>());
    const Rows good_rows = results(good.at("campaign").get<int64_t>());
    ASSERT_EQ(bad_rows.size(), 1u) << logs();
    ASSERT_EQ(good_rows.size(), 1u) << logs();
    bad_text += "seed " + std::to_string(seed) + ": " + describe(bad_rows);
    good_text += "seed " + std::to_string(seed) + ": " + describe(good_rows);
    EXPECT_NE(bad_rows[0][0], "3") << bad_rows[0][2];  // never VERDICT_ERROR
    if (bad_rows[0][0] == "2") ++caught;
    EXPECT_EQ(good_rows[0][0], "1") << describe(good_rows);  // VERDICT_PASS
  }
  std::printf("dotdot-mount bug:\n%stwin:\n%s", bad_text.c_str(), good_text.c_str());
  EXPECT_GE(caught, 1) << bad_text << logs();
}

}  // namespace
