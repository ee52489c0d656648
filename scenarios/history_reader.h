#pragma once
// Internals of read_history shared by the reference reader (history_io.cc,
// nlohmann), the fast line decoder (history_fast.cc, simdjson On-Demand) and
// the streaming check (history_stream.cc). Not an API.

#include <cstdint>
#include <istream>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "scenarios/history_io.h"

namespace leapfrog::history_detail {

// Readable bytes that follow every line LineReader hands out (simdjson's
// SIMDJSON_PADDING), so the fast decoder parses lines where they lie.
inline constexpr size_t kLinePadding = 64;
// Bytes LineReader asks the stream for at a time.
inline constexpr size_t kDefaultChunk = size_t{1} << 17;

// Reads lines of at most max_line_bytes from a stream of at most max_bytes,
// in large chunks, without copying a line out of its chunk.
class LineReader {
 public:
  LineReader(std::istream& in, const ReadLimits& limits, size_t chunk = kDefaultChunk)
      : in_(in), limits_(limits), chunk_(chunk ? chunk : 1) {}

  // The next line without its newline, followed in memory by kLinePadding
  // readable bytes and valid until the next call; false at the end of the input.
  bool next(std::string_view& line, size_t lineno);

 private:
  // Appends the next chunk after end_; false at the end of the input.
  bool fill();

  std::istream& in_;
  const ReadLimits& limits_;
  size_t chunk_;
  std::vector<char> buf_;
  size_t pos_ = 0;   // start of the unread part
  size_t scan_ = 0;  // where the search for the next newline resumes
  size_t end_ = 0;   // end of the data read
  uint64_t total_ = 0;
  bool eof_ = false;
};

// What a reader has built so far.
struct ReaderState {
  History h;
  bool have_header = false;
  // Canonical keys of the effects and queries seen (reference reader).
  std::map<std::string, uint32_t> effect_ids, query_ids;
  std::set<std::tuple<ObjectKind, NodeId>> initial_attr_parent;
  // The line of each of h.mutations (whole reads; the streaming check keeps
  // none and checks overlaps as the mutations come).
  std::vector<size_t> mutation_lines;
  bool keep_mutation_lines = true;
};

// Decodes one line with nlohmann, checking everything the format requires;
// throws HistoryFormatError("line N: ...").
void decode_line_reference(std::string_view line, size_t lineno, ReaderState& st);

// The checks at the end of the input: a header was read, and (when
// keep_mutation_lines) no two mutations of one object overlap.
void finish(ReaderState& st);

// Decodes the common shape of operation lines quickly. decode() either
// appends exactly what decode_line_reference would, or returns false having
// changed nothing, and the reference decodes the line (its first effect or
// query template, anything unusual, every error). After such a line,
// learn() lets the decoder recognise the same template next time.
class FastDecoder {
 public:
  virtual ~FastDecoder() = default;
  // `line` is followed in memory by kLinePadding readable bytes.
  virtual bool decode(std::string_view line, size_t lineno, ReaderState& st) = 0;
  // Called after decode_line_reference succeeded on the line decode() refused.
  virtual void learn(ReaderState& st) = 0;
};

// The fast decoder, or nullptr in a build without it (the static VM agent:
// Debian ships simdjson as a shared library only).
std::unique_ptr<FastDecoder> make_fast_decoder();

// Told after each line read_lines decoded (header and operations alike).
class LineSink {
 public:
  virtual ~LineSink() = default;
  // The line numbered `lineno` is decoded into `st` (its records appended).
  virtual void after_line(ReaderState& st, size_t lineno) = 0;
};

// The reading loop of read_history: every line of `in` into `st` (fast:
// through the fast decoder where it can), `sink` (if any) told after each,
// then finish(st).
void read_lines(std::istream& in, const ReadLimits& limits, bool fast, ReaderState& st,
                size_t chunk = kDefaultChunk, LineSink* sink = nullptr);

}  // namespace leapfrog::history_detail
