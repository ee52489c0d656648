#pragma once
// The sink of foffset's race (run_race's RecordSink): takes the peers'
// records as the race runs, streams the history file when one is asked for,
// and judges each pass over the shared file (an epoch: the peers rewind it
// together at a barrier) once every peer has moved past it, then forgets
// it. A run of any length holds one pass or two (at most `blocks` reads and
// the seeks among them, per pass) plus the rounds not yet passed by every
// peer, never the whole run; the verdicts, counts and reported violations
// are those of check_history on the history file it writes.

#include <cstdint>
#include <iosfwd>
#include <map>
#include <memory>
#include <vector>

#include "scenarios/history.h"
#include "scenarios/history_io.h"
#include "scenarios/oracle.h"
#include "scenarios/progress.h"
#include "scenarios/race.h"

namespace leapfrog {

class OffsetRecorder final : public RecordSink {
 public:
  // `header` (block_size, blocks, actors and the run's fields) must outlive
  // the recorder; `history` (may be null) receives the history file.
  // `count_windows`: rounds in which two peers' calls overlapped are counted
  // (fuzzy alignment).
  OffsetRecorder(const HistoryHeader& header, size_t actors, bool count_windows,
                 std::ostream* history, RunProgress* progress, const CheckOptions& opts = {});
  ~OffsetRecorder() override;

  size_t take(uint32_t actor, const RawRecord* records, size_t n) override;
  void done(uint32_t actor) override;
  void drained() override;

  // After the race: judges the passes left and returns the whole result.
  CheckResult finish();

  uint64_t ops() const { return ops_; }
  uint64_t race_window_hits() const { return window_hits_; }
  // After finish(): ns from the first operation's invoke to the completion of
  // the first violating one, and the operations completed by then (-1, 0:
  // no violation).
  int64_t first_violation_ns() const;
  uint64_t ops_to_first_violation() const { return ops_to_first_; }
  // Most records held at once in open passes.
  uint64_t peak_held() const { return peak_held_; }

 private:
  struct Pass {
    std::vector<OffsetRecord> records;
    std::vector<uint64_t> index;  // each record's place in the history
  };
  struct Round {
    TimeNs invoke = 0, complete = -1;
    bool hit = false;
  };
  void judge_closed(bool all);
  void judge(Pass& pass);
  void count_window(uint32_t actor, const RawRecord& r);

  const HistoryHeader& header_;
  bool count_windows_;
  std::unique_ptr<HistoryWriter> writer_;
  RunProgress* progress_;
  CheckOptions opts_;
  CheckResult result_;
  std::map<uint32_t, Pass> open_;       // by epoch
  std::vector<uint32_t> latest_epoch_;  // by actor
  std::vector<uint32_t> latest_round_;  // by actor
  std::vector<bool> done_;
  std::map<uint32_t, Round> rounds_;  // rounds some peer may still add to
  uint64_t ops_ = 0, held_ = 0, peak_held_ = 0, window_hits_ = 0;
  uint64_t judged_ops_ = 0;  // operations of the passes judged so far
  uint64_t ops_to_first_ = 0;
  TimeNs first_invoke_ = kTimeMax;
};

}  // namespace leapfrog
