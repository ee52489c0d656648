#pragma once
// The sink of a lookup race (run_race's RecordSink): merges the actors'
// records into invoke order while the race runs, judges them as their
// windows close (WindowJudge), streams the history file when one is asked
// for, and counts what the outcome reports. It holds the records no actor
// has yet passed in time (at most kQueueCap per actor: beyond that it
// refuses records and the actor waits) and what the judge holds, so a run
// of any length takes the same memory.

#include <cstdint>
#include <deque>
#include <iosfwd>
#include <memory>
#include <vector>

#include "scenarios/history.h"
#include "scenarios/history_io.h"
#include "scenarios/progress.h"
#include "scenarios/race.h"
#include "scenarios/window_judge.h"

namespace leapfrog {

class LookupRecorder final : public RecordSink {
 public:
  // Records held per actor before it waits for the others to pass them.
  static constexpr size_t kQueueCap = size_t{1} << 15;

  struct Shape {
    bool has_mutator = false;               // actor 0 is the mutator
    std::vector<bool> reports_ids;          // by query: a and b carry euid and egid
    std::vector<bool> aligned_observer;     // by actor: meets the mutator at the barrier
  };

  // `templ` gives the header, effects and queries (no records) and must
  // outlive the recorder; `history` (may be null) receives the history file.
  LookupRecorder(const History& templ, Shape shape, std::ostream* history, RunProgress* progress,
                 const WindowOptions& opts);

  size_t take(uint32_t actor, const RawRecord* records, size_t n) override;
  void done(uint32_t actor) override;
  void drained() override;

  // After the race: judges what is left and returns the whole result.
  CheckResult finish();

  uint64_t mutations() const { return mutations_; }
  uint64_t lookups() const { return lookups_; }
  uint64_t race_window_hits() const { return window_hits_; }
  TimeNs first_invoke() const { return first_invoke_; }
  // After finish(): lookups completed by the end of the first violating one.
  uint64_t lookups_to_first_violation() const { return judge_.lookups_to_first_violation(); }
  // Most records held at once: in the merge queues, and by the judge.
  uint64_t peak_queued() const { return peak_queued_; }
  uint64_t peak_judge() const { return judge_.peak_retained(); }

 private:
  struct RoundWindow {
    uint32_t round = UINT32_MAX;
    TimeNs invoke = 0, complete = -1;
  };
  struct Waiting {  // an aligned lookup whose round's mutation has not been taken yet
    uint32_t round;
    TimeNs invoke, complete;
  };

  void release(bool all);
  void emit(uint32_t actor, const RawRecord& r);
  void count_window_hit(uint32_t round, TimeNs invoke, TimeNs complete);
  void settle_waiting();
  // The live counts, for whoever reports progress (RunProgress).
  void publish_progress(uint64_t violations);

  const History& templ_;
  Shape shape_;
  std::unique_ptr<HistoryWriter> writer_;
  RunProgress* progress_;
  WindowJudge judge_;
  std::vector<std::deque<RawRecord>> queues_;  // by actor: taken, not yet merged
  std::vector<TimeNs> latest_;                 // by actor: invoke of its latest record taken
  std::vector<bool> done_;
  std::vector<std::pair<RawRecord, uint32_t>> ready_;  // one merge's records, with their actor
  uint64_t queued_ = 0, peak_queued_ = 0;
  uint64_t mutations_ = 0, lookups_ = 0;
  TimeNs first_invoke_ = kTimeMax;
  // Race-window hits: each round's mutation, in a ring by round (aligned
  // actors are never further apart than the buffers they fill); sized once
  // when there is a mutator.
  std::vector<RoundWindow> rounds_;
  std::vector<Waiting> waiting_;
  int64_t mutator_round_ = -1;  // latest round of a mutation taken
  uint64_t window_hits_ = 0;
};

}  // namespace leapfrog
