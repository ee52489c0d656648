// Issue 19 §2: the oracle against a naive judge (oracle_brute.h) on random
// small histories. LEAPFROG_DIFF_HISTORIES sets how many (CI: the default),
// LEAPFROG_DIFF_FIRST the first seed (to run a long count in shards).

#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <sstream>

#include "scenarios/history_io.h"
#include "scenarios/oracle.h"
#include "scenarios/oracle_brute.h"

namespace leapfrog {
namespace {

uint64_t env_or(const char* name, uint64_t fallback) {
  const char* env = std::getenv(name);
  return env ? std::strtoull(env, nullptr, 10) : fallback;
}

TEST(OracleDifferential, AgreesWithTheBruteForceJudge) {
  CheckOptions opts;
  opts.max_reported = 1000;
  const uint64_t n = env_or("LEAPFROG_DIFF_HISTORIES", 20000);
  const uint64_t first = env_or("LEAPFROG_DIFF_FIRST", 1);
  uint64_t lookups = 0, legal = 0, illegal = 0, unjudged = 0, failures = 0, skipped = 0;
  using Clock = std::chrono::steady_clock;
  Clock::duration oracle_time{}, brute_time{};
  for (uint64_t seed = first; seed < first + n; ++seed) {
    const History h = brute::random_history(seed);
    const auto t0 = Clock::now();
    const CheckResult r = check_history(h, opts);
    const auto t1 = Clock::now();
    const auto want = brute::judge(h);
    brute_time += Clock::now() - t1;
    oracle_time += t1 - t0;
    if (!brute::comparable(r, want)) {
      ++skipped;  // a walk too big for one judge or the other
      continue;
    }
    const auto diff = brute::disagreements(h, r, want);
    for (auto v : want) {
      legal += v == brute::Verdict::Legal;
      illegal += v == brute::Verdict::Illegal;
      unjudged += v == brute::Verdict::Unjudged;
    }
    lookups += h.lookups.size();
    if (!diff.empty() && ++failures <= 5) {
      std::ostringstream text;
      write_history(h, text);
      ADD_FAILURE() << "seed " << seed << ":\n  " << diff[0]
                    << (diff.size() > 1 ? "\n  " + diff[1] : "") << "\n"
                    << text.str();
    }
  }
  std::printf("differential: oracle %.2f s, brute force %.2f s\n",
              std::chrono::duration<double>(oracle_time).count(),
              std::chrono::duration<double>(brute_time).count());
  std::printf(
      "differential: %llu histories compared, %llu skipped (over a budget), %llu lookups (%llu "
      "legal, "
      "%llu illegal, %llu unjudged), %llu disagree\n",
      static_cast<unsigned long long>(n - skipped), static_cast<unsigned long long>(skipped),
      static_cast<unsigned long long>(lookups), static_cast<unsigned long long>(legal),
      static_cast<unsigned long long>(illegal), static_cast<unsigned long long>(unjudged),
      static_cast<unsigned long long>(failures));
  EXPECT_EQ(failures, 0u);
  EXPECT_LE(skipped, n / 1000);
  // The generator makes both kinds in earnest, or agreeing would mean little.
  EXPECT_GT(legal, lookups / 20);
  EXPECT_GT(illegal, lookups / 20);
  EXPECT_GT(unjudged, 0u);
}

// The positive control: a verdict changed after the fact is a disagreement.
TEST(OracleDifferential, ADifferentVerdictIsCaught) {
  CheckOptions opts;
  opts.max_reported = 1000;
  const History h = brute::random_history(7);
  CheckResult r = check_history(h, opts);
  const auto verdicts = brute::judge(h);
  ASSERT_TRUE(brute::disagreements(h, r, verdicts).empty());
  size_t legal = 0;
  while (legal < verdicts.size() && verdicts[legal] != brute::Verdict::Legal) ++legal;
  ASSERT_LT(legal, verdicts.size());
  Violation fake;
  fake.record = legal;
  r.violations.push_back(fake);
  ++r.violation_count;
  const auto diff = brute::disagreements(h, r, verdicts);
  ASSERT_EQ(diff.size(), 1u);
  EXPECT_NE(diff[0].find("oracle flags it, brute force says legal"), std::string::npos) << diff[0];
  if (!r.violations.empty()) r.violations.erase(r.violations.begin());
  EXPECT_FALSE(brute::disagreements(h, r, verdicts).empty());
}

}  // namespace
}  // namespace leapfrog
