// libFuzzer target: `leapfrog-agent check` on arbitrary bytes. The parser
// either refuses the input (HistoryFormatError) or returns a history that the
// oracle judges or refuses (HistoryError); a history written back and read
// again gets the same verdict. The fast reader (simdjson) and the reference
// reader (nlohmann) give the same history or the same error message, and the
// streaming check (check_history_stream, lookups judged in batches) the same
// counts or the same error as reading and judging whole.

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>

#include "scenarios/history_io.h"
#include "scenarios/history_stream.h"
#include "scenarios/oracle.h"

using namespace leapfrog;

namespace {

void same(uint64_t a, uint64_t b, const char* what) {
  if (a == b) return;
  std::fprintf(stderr, "%s differs: %llu, then %llu\n", what, static_cast<unsigned long long>(a),
               static_cast<unsigned long long>(b));
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // The line limit is below -max_len (fuzz/run_fuzz.sh), so that a line too
  // long is reachable, and above the longest seed line (4.4 KB). The size
  // limit is the input's own: the readers then read it in one chunk of its
  // size, not of 128 KiB zero-filled on every execution (a fifth of the
  // time). The fast reader ends at the limit (the one-more-byte probe), the
  // reference one, a byte short of it, at the end of the stream: both ends
  // of LineReader::fill are run on every input, and must agree.
  ReadLimits limits;
  limits.max_line_bytes = 8192;
  limits.max_bytes = size;
  ReadLimits ref_limits = limits;
  ref_limits.max_bytes = size + 1;
  const std::string input(reinterpret_cast<const char*>(data), size);
  std::string ref_text;
  try {
    std::istringstream ref_in(input);
    std::stringstream out;
    write_history(read_history_reference(ref_in, ref_limits), out);
    ref_text = out.str();
  } catch (const HistoryFormatError& e) {
    ref_text = std::string("error: ") + e.what();
  }
  std::istringstream in(input);
  History h;
  try {
    h = read_history(in, limits);
  } catch (const HistoryFormatError& e) {
    const std::string fast = std::string("error: ") + e.what();
    if (fast != ref_text) {
      std::fprintf(stderr, "fast reader: %s\nreference: %s\n", fast.c_str(), ref_text.c_str());
      std::abort();
    }
    return 0;
  }
  {
    std::stringstream out;
    write_history(h, out);
    if (out.str() != ref_text) {
      std::fprintf(stderr, "fast reader:\n%s\nreference:\n%s\n", out.str().c_str(),
                   ref_text.c_str());
      std::abort();
    }
  }
  CheckOptions opts;
  opts.max_expansions = 1 << 12;
  CheckResult r;
  StreamOptions sopts;
  sopts.check = opts;
  sopts.batch = 2;
  sopts.chunk = 64;
  std::istringstream stream_in(input);
  try {
    r = check_history(h, opts);
  } catch (const HistoryError& e) {
    try {
      check_history_stream(stream_in, limits, sopts);
    } catch (const HistoryError& s) {
      if (std::string(s.what()) == e.what()) return 0;  // e.g. offset records without a block size
    }
    std::fprintf(stderr, "the streaming check does not refuse as the whole one: %s\n", e.what());
    std::abort();
  }
  const StreamCheck sc = check_history_stream(stream_in, limits, sopts);
  same(r.violation_count, sc.check.violation_count, "violation_count (streaming)");
  same(r.lookups_checked, sc.check.lookups_checked, "lookups_checked (streaming)");
  same(r.steps_checked, sc.check.steps_checked, "steps_checked (streaming)");
  same(r.unjudged, sc.check.unjudged, "unjudged (streaming)");
  same(r.offsets_checked, sc.check.offsets_checked, "offsets_checked (streaming)");
  same(r.notes.size(), sc.check.notes.size(), "notes (streaming)");
  (void)unearned_pass_reason(r);
  std::stringstream text;
  write_history(h, text);
  ReadLimits back_limits;  // what the agent's check accepts, but one chunk
  back_limits.max_bytes = text.str().size();
  History back;
  try {
    back = read_history(text, back_limits);
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
