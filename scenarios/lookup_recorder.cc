#include "scenarios/lookup_recorder.h"

#include <algorithm>
#include <ostream>

namespace leapfrog {
namespace {
constexpr size_t kRoundRing = size_t{1} << 17;
}

LookupRecorder::LookupRecorder(const History& templ, Shape shape, std::ostream* history,
                               RunProgress* progress, const WindowOptions& opts)
    : templ_(templ),
      shape_(std::move(shape)),
      progress_(progress),
      judge_(templ.header, templ.effects, templ.queries, opts) {
  const size_t n = templ.header.actors.size();
  queues_.resize(n);
  latest_.assign(n, kTimeMin);
  done_.assign(n, false);
  shape_.aligned_observer.resize(n, false);
  if (shape_.has_mutator) rounds_.resize(kRoundRing);
  if (history) writer_ = std::make_unique<HistoryWriter>(*history, templ.header, templ.effects,
                                                         templ.queries);
}

size_t LookupRecorder::take(uint32_t actor, const RawRecord* records, size_t n) {
  std::deque<RawRecord>& q = queues_.at(actor);
  const size_t took = std::min(n, kQueueCap > q.size() ? kQueueCap - q.size() : 0);
  const bool mutator = shape_.has_mutator && actor == 0;
  for (size_t i = 0; i < took; ++i) {
    const RawRecord& r = records[i];
    q.push_back(r);
    latest_[actor] = std::max(latest_[actor], r.invoke);
    if (mutator) {
      rounds_[r.round % kRoundRing] = RoundWindow{r.round, r.invoke, r.complete};
      mutator_round_ = std::max<int64_t>(mutator_round_, r.round);
    } else if (shape_.has_mutator && shape_.aligned_observer[actor]) {
      waiting_.push_back(Waiting{r.round, r.invoke, r.complete});
    }
  }
  if (took) settle_waiting();
  queued_ += took;
  peak_queued_ = std::max(peak_queued_, queued_);
  return took;
}

// An aligned lookup overlapped its round's mutation: counted once the
// mutator has been seen in that round or past it.
void LookupRecorder::settle_waiting() {
  size_t kept = 0;
  for (const Waiting& w : waiting_) {
    if (static_cast<int64_t>(w.round) > mutator_round_ && !done_[0]) {
      waiting_[kept++] = w;
      continue;
    }
    if (!rounds_.empty()) {
      const RoundWindow& m = rounds_[w.round % kRoundRing];
      if (m.round == w.round && m.complete >= m.invoke && w.invoke <= m.complete &&
          m.invoke <= w.complete)
        ++window_hits_;
    }
  }
  waiting_.resize(kept);
}

void LookupRecorder::done(uint32_t actor) {
  done_.at(actor) = true;
  if (shape_.has_mutator && actor == 0) settle_waiting();
}

void LookupRecorder::drained() {
  release(false);
  publish_progress(judge_.violations());
}

void LookupRecorder::publish_progress(uint64_t violations) {
  if (!progress_) return;
  progress_->operations.store(mutations_ + lookups_, std::memory_order_relaxed);
  progress_->lookups_judged.store(judge_.lookups_done(), std::memory_order_relaxed);
  progress_->violations.store(violations, std::memory_order_relaxed);
}

// Merges every record no running actor can still precede: those invoked
// before the earliest latest invoke of the actors still running (all of
// them once every actor is done). Of equal invokes the lower actor comes
// first: the mutator's record before the lookups it ties with.
void LookupRecorder::release(bool all) {
  TimeNs until = kTimeMax;
  if (!all)
    for (size_t a = 0; a < queues_.size(); ++a)
      if (!done_[a]) until = std::min(until, latest_[a]);
  ready_.clear();
  for (size_t a = 0; a < queues_.size(); ++a) {
    std::deque<RawRecord>& q = queues_[a];
    while (!q.empty() && (all || q.front().invoke < until)) {
      ready_.emplace_back(q.front(), static_cast<uint32_t>(a));
      q.pop_front();
    }
  }
  if (ready_.empty()) return;
  queued_ -= ready_.size();
  std::stable_sort(ready_.begin(), ready_.end(), [](const auto& x, const auto& y) {
    return x.first.invoke < y.first.invoke ||
           (x.first.invoke == y.first.invoke && x.second < y.second);
  });
  for (const auto& [r, actor] : ready_) emit(actor, r);
}

void LookupRecorder::emit(uint32_t actor, const RawRecord& r) {
  first_invoke_ = std::min(first_invoke_, r.invoke);
  if (shape_.has_mutator && actor == 0) {
    const MutationRecord m{actor, r.op, r.invoke, r.complete, r.err, r.round};
    ++mutations_;
    if (writer_) writer_->write(m);
    judge_.add(m);
    return;
  }
  LookupRecord l{actor, r.op, r.invoke, r.complete, r.err, r.round, r.a, r.b};
  if (r.err == 0 && r.op < shape_.reports_ids.size() && shape_.reports_ids[r.op]) {
    l.dev = l.ino = 0;  // a and b carried the ids, not an identity
    l.has_ids = true;
    l.euid = static_cast<uint32_t>(r.a);
    l.egid = static_cast<uint32_t>(r.b);
  }
  ++lookups_;
  if (writer_) writer_->write(l);
  judge_.add(l);
}

CheckResult LookupRecorder::finish() {
  release(true);
  settle_waiting();
  CheckResult r = judge_.finish();
  publish_progress(r.violation_count);
  return r;
}

}  // namespace leapfrog
