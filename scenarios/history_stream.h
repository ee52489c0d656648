#pragma once
// `leapfrog-agent check` in one pass with bounded memory (issue 19 §3): the
// history is read line by line and its lookups are judged in batches as
// their windows close (each batch on a second thread while the next is
// read), so that only the records whose windows are still open are held.
// The result is exactly check_history(read_history(in)): where judging in
// batches could differ, the input is read again and judged whole.

#include <cstdint>
#include <istream>
#include <string>

#include "scenarios/history_io.h"
#include "scenarios/oracle.h"

namespace leapfrog {

struct StreamOptions {
  CheckOptions check;
  // Lookups judged together, once each one's window has closed.
  size_t batch = size_t{1} << 16;
  // Bytes read at a time (tests make it small to split lines across reads).
  size_t chunk = size_t{1} << 17;
};

struct StreamStats {
  uint64_t batches = 0;  // batches of lookups judged
  // Most mutation and lookup records held at once (besides the copy of the
  // batch being judged on the second thread): bounded by the batch and the
  // records whose windows overlap, not by the history's length.
  uint64_t peak_retained = 0;
  // Judged whole instead (then `why` says why): the input cannot be read
  // twice, or it is not in invoke order, or it holds a violation, a note,
  // overlapping mutations or a mount that changes, which batches could
  // judge or report otherwise than the whole check.
  bool whole = false;
  std::string why;
};

struct StreamCheck {
  HistoryHeader header;
  uint64_t mutations = 0, lookups = 0, offsets = 0;
  CheckResult check;
  StreamStats stats;
};

// Reads and judges the history `in` holds; the result, and every error
// (HistoryFormatError, HistoryError), are those of
// check_history(read_history(in, limits), opts.check).
StreamCheck check_history_stream(std::istream& in, const ReadLimits& limits = {},
                                 const StreamOptions& opts = {});

}  // namespace leapfrog
