#pragma once
// Internals of read_history shared by the reference reader (history_io.cc,
// nlohmann) and the fast line decoder (history_fast.cc, simdjson). Not an API.

#include <cstdint>
#include <istream>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "scenarios/history_io.h"

namespace leapfrog::history_detail {

// Reads lines of at most max_line_bytes from a stream of at most max_bytes.
class LineReader {
 public:
  LineReader(std::istream& in, const ReadLimits& limits)
      : in_(in), limits_(limits), buf_(1 << 16) {}

  // The next line without its newline; false at the end of the input.
  bool next(std::string& line, size_t lineno);

 private:
  bool fill();

  std::istream& in_;
  const ReadLimits& limits_;
  std::vector<char> buf_;
  size_t pos_ = 0, end_ = 0;
  uint64_t total_ = 0;
};

// What a reader has built so far.
struct ReaderState {
  History h;
  bool have_header = false;
  // Canonical keys of the effects and queries seen (reference reader).
  std::map<std::string, uint32_t> effect_ids, query_ids;
  std::set<std::tuple<ObjectKind, NodeId>> initial_attr_parent;
  std::vector<size_t> mutation_lines;  // the line of each of h.mutations
};

// Decodes one line with nlohmann, checking everything the format requires;
// throws HistoryFormatError("line N: ...").
void decode_line_reference(const std::string& line, size_t lineno, ReaderState& st);

// The checks that need the whole history (overlapping mutations).
void finish(ReaderState& st);

// Decodes the common shape of operation lines quickly. decode() either
// appends exactly what decode_line_reference would, or returns false having
// changed nothing, and the reference decodes the line (its first effect or
// query template, anything unusual, every error). After such a line,
// learn() lets the decoder recognise the same template next time.
class FastDecoder {
 public:
  virtual ~FastDecoder() = default;
  // `line` may be reallocated (padding) but keeps its content.
  virtual bool decode(std::string& line, size_t lineno, ReaderState& st) = 0;
  // Called after decode_line_reference succeeded on the line decode() refused.
  virtual void learn(ReaderState& st) = 0;
};

// The fast decoder, or nullptr in a build without it (the static VM agent:
// Debian ships simdjson as a shared library only).
std::unique_ptr<FastDecoder> make_fast_decoder();

}  // namespace leapfrog::history_detail
