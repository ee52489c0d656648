#include "scenarios/offset_recorder.h"

#include <algorithm>

namespace leapfrog {

OffsetRecorder::OffsetRecorder(const HistoryHeader& header, size_t actors, bool count_windows,
                               std::ostream* history, RunProgress* progress,
                               const CheckOptions& opts)
    : header_(header),
      count_windows_(count_windows),
      progress_(progress),
      opts_(opts),
      latest_epoch_(actors, 0),
      latest_round_(actors, 0),
      done_(actors, false) {
  static const std::vector<Effect> no_effects;
  static const std::vector<Query> no_queries;
  if (history) writer_ = std::make_unique<HistoryWriter>(*history, header_, no_effects, no_queries);
}

OffsetRecorder::~OffsetRecorder() = default;

size_t OffsetRecorder::take(uint32_t actor, const RawRecord* records, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    const RawRecord& r = records[i];
    OffsetRecord o;
    o.kind = (r.aux & 1) ? OffsetRecord::Kind::Seek : OffsetRecord::Kind::Read;
    o.actor = actor;
    o.epoch = r.aux >> 1;
    o.invoke = r.invoke;
    o.complete = r.complete;
    o.err = r.err;
    o.offset = static_cast<int64_t>(r.a);
    o.length = static_cast<uint32_t>(r.b);
    if (writer_) writer_->write(o);
    first_invoke_ = std::min(first_invoke_, o.invoke);
    Pass& p = open_[o.epoch];
    p.records.push_back(o);
    p.index.push_back(ops_++);
    latest_epoch_[actor] = std::max(latest_epoch_[actor], o.epoch);
    if (count_windows_) count_window(actor, r);
  }
  held_ += n;
  peak_held_ = std::max(peak_held_, held_);
  if (progress_) progress_->operations.store(ops_, std::memory_order_relaxed);
  return n;
}

// A round counts as a race-window hit when two peers' calls overlapped in it
// (the first call of the round against each later one, as the whole-history
// count did). A round is forgotten once every peer has passed it.
void OffsetRecorder::count_window(uint32_t actor, const RawRecord& r) {
  latest_round_[actor] = std::max(latest_round_[actor], r.round);
  Round& w = rounds_[r.round];
  if (w.complete < w.invoke) {
    w.invoke = r.invoke;
    w.complete = r.complete;
  } else if (!w.hit && r.invoke <= w.complete && w.invoke <= r.complete) {
    w.hit = true;
    ++window_hits_;
  }
}

void OffsetRecorder::done(uint32_t actor) { done_[actor] = true; }

void OffsetRecorder::drained() { judge_closed(false); }

void OffsetRecorder::judge_closed(bool all) {
  // The epoch and round every running peer has passed: nothing more comes
  // below them.
  uint32_t epoch = UINT32_MAX, round = UINT32_MAX;
  for (size_t a = 0; a < done_.size(); ++a) {
    if (done_[a]) continue;
    epoch = std::min(epoch, latest_epoch_[a]);
    round = std::min(round, latest_round_[a]);
  }
  while (!open_.empty() && (all || open_.begin()->first < epoch)) {
    judge(open_.begin()->second);
    open_.erase(open_.begin());
  }
  if (all) {
    rounds_.clear();
  } else {
    while (!rounds_.empty() && rounds_.begin()->first < round) rounds_.erase(rounds_.begin());
  }
}

void OffsetRecorder::judge(Pass& pass) {
  History h;
  h.header = header_;
  h.offsets = std::move(pass.records);
  const TimeNs first_before = result_.first_violation_at;
  const size_t reported = result_.violations.size();
  check_offsets(h, result_, opts_);
  // The pass's violations name records by their place in the history file.
  for (size_t i = reported; i < result_.violations.size(); ++i)
    result_.violations[i].record = pass.index.at(result_.violations[i].record);
  if (result_.first_violation_at < first_before && first_before == kTimeMax) {
    // The first violating pass: the peers rewind at a barrier, so every
    // operation of the passes before it completed before this pass began,
    // and none after it began before it ended.
    uint64_t n = judged_ops_;
    for (const auto& r : h.offsets) n += r.complete <= result_.first_violation_at;
    ops_to_first_ = n;
  }
  judged_ops_ += h.offsets.size();
  held_ -= h.offsets.size();
  if (progress_) {
    progress_->lookups_judged.store(result_.offsets_checked, std::memory_order_relaxed);
    progress_->violations.store(result_.violation_count, std::memory_order_relaxed);
  }
}

CheckResult OffsetRecorder::finish() {
  judge_closed(true);
  return result_;
}

int64_t OffsetRecorder::first_violation_ns() const {
  if (result_.first_violation_at >= kTimeMax) return -1;
  return result_.first_violation_at - first_invoke_;
}

}  // namespace leapfrog
