#pragma once
// JSON Lines serialisation of a History (docs/history-format.md).

#include <cstdint>
#include <iosfwd>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "scenarios/history.h"

namespace leapfrog {

// A history file that does not follow the format. The message names the line.
class HistoryFormatError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Writes the header line, then every record ordered by invoke time.
void write_history(const History& h, std::ostream& out);

// Writes a history as its records come (the caller keeps them in invoke
// order): the header line at construction, then one line per record.
// `effects` and `queries` may grow meanwhile; records refer to them by index.
class HistoryWriter {
 public:
  HistoryWriter(std::ostream& out, const HistoryHeader& header, const std::vector<Effect>& effects,
                const std::vector<Query>& queries);
  ~HistoryWriter();
  void write(const MutationRecord& m);
  void write(const LookupRecord& l);
  void write(const OffsetRecord& o);

 private:
  std::ostream& out_;
  const std::vector<Effect>& effects_;
  const std::vector<Query>& queries_;
  std::vector<nlohmann::json> effect_sets_;  // each effect's "sets", built once
};

// Bounds on what read_history accepts, so that input that never ends (a
// device, a pipe) is refused instead of filling memory.
struct ReadLimits {
  size_t max_line_bytes = size_t{64} << 20;  // one JSON line, newline excluded
  uint64_t max_bytes = uint64_t{64} << 30;   // the whole input
};

// Reads a history and checks what the oracle relies on (node and actor ids,
// initial values, time ranges, no overlapping mutations of one object);
// throws HistoryFormatError("line N: ...") on malformed input.
// Operation lines of the usual shape are decoded with simdjson; the first
// line of each effect or query template, anything unusual and every error
// take the reference path, so the result and every message are the same.
History read_history(std::istream& in, const ReadLimits& limits = {});

// read_history with nlohmann for every line: the reference the fast decoder
// is tested against (history_fast_test.cc, fuzz/history_fuzz.cc).
History read_history_reference(std::istream& in, const ReadLimits& limits = {});

// errno <-> portable name ("EACCES"); 0 <-> "ok". Unknown names map to -1.
std::string errno_name(int err);
int errno_from_name(std::string_view name);

}  // namespace leapfrog
