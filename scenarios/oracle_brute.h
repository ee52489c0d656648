#pragma once
// A second, naive judge of lookups for differential tests of the oracle
// (issue 19 §2), and a generator of small random histories for it. Test and
// fuzz code only.
//
// The judge reads docs/history-format.md's definition literally: a lookup is
// legal iff some times a <= t1 <= ... <= tk <= b, one per step, each with a
// version possible at that time, explain the result. It tries every time at
// which the possible versions change (not only the earliest feasible one, as
// the oracle does), and its own permission check (mode bits, root's DAC
// override; no ACLs). It covers directories, files, relative symlinks, ".."
// through parent objects, the final access check and follow/nofollow; not
// mounts, magic links, openat2 or exec ids, which the generator never makes.

#include <cstdint>
#include <string>
#include <vector>

#include "scenarios/history.h"
#include "scenarios/oracle.h"

namespace leapfrog::brute {

// GaveUp: the walk has more distinct states than the judge explores
// (kStateBudget); symlinks that expand differently on each branch can make
// exponentially many component stacks.
enum class Verdict : uint8_t { Legal, Illegal, Unjudged, GaveUp };
inline constexpr size_t kStateBudget = 100000;

// One verdict per record of h.lookups.
std::vector<Verdict> judge(const History& h);

// A random history with one observer and one query, looked up several
// times, once with each result the query could give (every node's identity,
// EACCES, ENOENT, ENOTDIR, ELOOP), so that legal and illegal records mix.
History random_history(uint64_t seed);

// Disagreements between `oracle` (check_history's result on `h`, with every
// violation reported) and `want` (judge(h)), one line each; empty if they
// agree. Compare only histories where neither gave up (comparable()).
std::vector<std::string> disagreements(const History& h, const CheckResult& oracle,
                                       const std::vector<Verdict>& want);

// Whether both judges judged every record of `h` (no GaveUp, no oracle
// budget hit), so that disagreements() means something.
bool comparable(const CheckResult& oracle, const std::vector<Verdict>& want);

}  // namespace leapfrog::brute
