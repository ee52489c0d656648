#pragma once
// Judging a history as it comes, in bounded memory: records arrive in invoke
// order, and each lookup is judged once its window has closed (no mutation
// that could fall inside it can still come), in batches, and then forgotten.
// A batch is judged as a history of its own: the header with each object's
// value before the mutations still held as its initial value, the mutations
// still held, and the batch's lookups. What is held besides the open windows
// and the batch is bounded by the number of objects (each object's latest
// kMaxMutationTrace + 1 mutations, so that a violation's report names the same
// versions and mutations as the whole check's) and by the limits (the first
// max_reported violations in full).
//
// The result equals check_history() of all the records (lookups only: the
// caller judges offsets), given the records in invoke order: the same counts,
// the same first max_reported violations with the same indexes, kinds, walks
// and versions, and the same notes (history_stream_test.cc). A violation's
// excerpt holds the mutations known when its window closed (the whole check
// may also list mutations that came after, near the window).

#include <cstdint>
#include <deque>
#include <future>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <stdexcept>
#include <tuple>
#include <vector>

#include "scenarios/history.h"
#include "scenarios/oracle.h"

namespace leapfrog {

struct WindowOptions {
  CheckOptions check;
  // Lookups judged together once each one's window has closed.
  size_t batch = size_t{1} << 16;
  // Judge each batch on a second thread while the next one gathers.
  bool async = true;
};

// A record arrived out of invoke order: judged windows or forgotten versions
// could have needed it. Says which.
class WindowOrderError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class WindowJudge {
 public:
  // `effects` and `queries` are the caller's and may grow while the judge
  // runs (a history file names each template on its first use); records
  // refer to them by index. The header's initial values are copied.
  WindowJudge(const HistoryHeader& header, const std::vector<Effect>& effects,
              const std::vector<Query>& queries, const WindowOptions& opts = {});
  ~WindowJudge();
  WindowJudge(const WindowJudge&) = delete;
  WindowJudge& operator=(const WindowJudge&) = delete;

  // The next record in invoke order (of equal invokes, mutations first).
  // Throws WindowOrderError when it is out of order, and HistoryError when
  // two mutations of one object overlap or a batch cannot be judged.
  void add(const MutationRecord& m);
  void add(const LookupRecord& l);
  // Judges every lookup still held and returns the result of the whole.
  CheckResult finish();

  // Live counts: lookups judged (or unjudged) and violations so far.
  uint64_t lookups_done() const { return done_; }
  uint64_t violations() const { return result_.violation_count; }
  uint64_t batches() const { return batches_; }
  // Most mutation and lookup records held at once (besides the batch being
  // judged on the second thread).
  uint64_t peak_retained() const { return peak_retained_; }
  // After finish(): lookups completed by the end of the first violating one
  // (note_detection's ops_to_first_violation); 0 without violations.
  uint64_t lookups_to_first_violation() const { return to_first_violation_; }

 private:
  using Key = std::tuple<ObjectKind, NodeId, std::string>;
  // A mutation no open window can see any more, kept for reports.
  struct Folded {
    MutationRecord m;
    uint32_t set = 0;  // which of its effect's sets is this object's
    // The object's value before it; none while no initial value or
    // successful mutation has given it one (then, as in the whole check,
    // it has no initial value: an entry absent, nothing mounted).
    std::optional<Value> before;
  };
  struct Batch {
    CheckResult result;
    std::vector<uint64_t> index;  // global index of each of the batch's lookups
    uint64_t completed_by_first = 0;  // batch lookups complete by result.first_violation_at
  };

  uint32_t object_id(const ObjectKey& k);
  // A version still current when its lookup was judged ends where the whole
  // history says: at the next successful mutation of its object.
  void close_versions(Violation& v, const MutationRecord& m);
  const std::vector<uint32_t>& effect_objects(uint32_t e);
  void flush(bool all);
  void collect();
  void fold(const MutationRecord& m);

  const HistoryHeader& header_;
  const std::vector<Effect>& effects_;
  const std::vector<Query>& queries_;
  WindowOptions opts_;
  TimeNs eps_ = 0;

  std::map<Key, uint32_t> object_ids_;
  std::vector<ObjectKey> keys_;                       // by object id
  std::vector<TimeNs> last_complete_;                 // by object: latest successful mutation's
  std::map<uint32_t, Value> base_;                    // by object: its value before mutations_
  std::map<uint32_t, std::deque<Folded>> folded_;     // by object: its latest folded mutations
  std::vector<std::vector<uint32_t>> effect_objects_;  // by effect: object id of each set
  std::vector<std::vector<std::string>> effect_names_;  // by effect: each set's object, described
  // Objects of which a reported violation shows a version still current.
  std::set<std::string> open_objects_;
  void find_open_objects();

  std::vector<MutationRecord> mutations_;  // every one that completes at or after horizon_
  std::vector<LookupRecord> pending_;      // lookups not yet judged
  std::vector<uint64_t> pending_index_;    // their global indexes
  uint64_t next_index_ = 0;
  size_t next_flush_ = 0;
  TimeNs last_mutation_invoke_ = kTimeMin;
  TimeNs frontier_ = kTimeMin;      // latest invoke of any record
  TimeNs judged_until_ = kTimeMin;  // latest window end judged
  TimeNs horizon_ = kTimeMin;       // every window still to judge starts at or after it

  std::future<Batch> judging_;  // the batch on the second thread, if any
  CheckResult result_;
  uint64_t done_ = 0;
  uint64_t batches_ = 0;
  uint64_t peak_retained_ = 0;
  bool seen_violation_ = false;
  uint64_t to_first_violation_ = 0;
};

}  // namespace leapfrog
