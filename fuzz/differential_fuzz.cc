// libFuzzer target: the oracle against the naive judge (scenarios/oracle_brute.h)
// on every small history the fuzzer writes that stays within the judge's
// model (no mounts, magic links, openat2, ACLs or exec ids). Any
// disagreement aborts.

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>

#include "scenarios/history_io.h"
#include "scenarios/oracle.h"
#include "scenarios/oracle_brute.h"

using namespace leapfrog;

namespace {

bool within_the_naive_model(const History& h) {
  if (h.header.nodes.size() > 8 || h.mutations.size() > 8 || h.lookups.size() > 32) return false;
  for (const auto& n : h.header.nodes) {
    if (n.magic_target != kNoNode || n.identity.any_other_dev) return false;
    if (!n.symlink_target.empty() && n.symlink_target[0] == '/') return false;
  }
  auto plain = [](const ObjectSet& s) {
    return s.key.kind != ObjectKind::Mount && s.value.attr.acl.empty();
  };
  for (const auto& s : h.header.initial)
    if (!plain(s)) return false;
  for (const auto& e : h.effects)
    for (const auto& s : e.sets)
      if (!plain(s)) return false;
  for (const auto& q : h.queries) {
    if (q.openat2 || q.path.size() > 8) return false;
  }
  for (const auto& r : h.lookups) {
    if (r.has_ids || (r.err == 0 && r.dev == 0 && r.ino == 0)) return false;
  }
  return !h.lookups.empty();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // The size limit is the input's own, so the reader takes it in one chunk
  // of its size rather than zero-filling 128 KiB per execution.
  ReadLimits limits;
  limits.max_line_bytes = 1 << 14;
  limits.max_bytes = size;
  std::istringstream in(std::string(reinterpret_cast<const char*>(data), size));
  History h;
  try {
    h = read_history(in, limits);
  } catch (const HistoryFormatError&) {
    return 0;
  }
  if (!within_the_naive_model(h)) return 0;
  CheckOptions opts;
  opts.max_reported = 1000;
  CheckResult r;
  try {
    r = check_history(h, opts);
  } catch (const HistoryError&) {
    return 0;
  }
  const auto want = brute::judge(h);
  if (!brute::comparable(r, want)) return 0;
  const auto diff = brute::disagreements(h, r, want);
  if (diff.empty()) return 0;
  std::fprintf(stderr, "oracle and naive judge disagree:\n");
  for (const auto& d : diff) std::fprintf(stderr, "  %s\n", d.c_str());
  std::abort();
}
