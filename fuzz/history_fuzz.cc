// libFuzzer target: `leapfrog-agent check` on arbitrary bytes. The parser
// either refuses the input (HistoryFormatError) or returns a history that the
// oracle judges or refuses (HistoryError); a history written back and read
// again gets the same verdict.

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>

#include "scenarios/history_io.h"
#include "scenarios/oracle.h"

using namespace leapfrog;

namespace {

void same(uint64_t a, uint64_t b, const char* what) {
  if (a == b) return;
  std::fprintf(stderr, "round trip changed %s: %llu -> %llu\n", what,
               static_cast<unsigned long long>(a), static_cast<unsigned long long>(b));
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  ReadLimits limits;
  limits.max_line_bytes = 1 << 16;
  limits.max_bytes = 1 << 20;
  std::istringstream in(std::string(reinterpret_cast<const char*>(data), size));
  History h;
  try {
    h = read_history(in, limits);
  } catch (const HistoryFormatError&) {
    return 0;
  }
  CheckOptions opts;
  opts.max_expansions = 1 << 12;
  CheckResult r;
  try {
    r = check_history(h, opts);
  } catch (const HistoryError&) {
    return 0;  // e.g. offset records without a block size
  }
  (void)unearned_pass_reason(r);
  std::stringstream text;
  write_history(h, text);
  History back;
  try {
    back = read_history(text);
  } catch (const HistoryFormatError& e) {
    std::fprintf(stderr, "a history written back is refused: %s\n", e.what());
    std::abort();
  }
  const CheckResult again = check_history(back, opts);
  same(r.violation_count, again.violation_count, "violation_count");
  same(r.lookups_checked, again.lookups_checked, "lookups_checked");
  same(r.unjudged, again.unjudged, "unjudged");
  same(r.offsets_checked, again.offsets_checked, "offsets_checked");
  return 0;
}
