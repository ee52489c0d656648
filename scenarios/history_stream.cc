#include "scenarios/history_stream.h"

#include <algorithm>
#include <future>
#include <map>
#include <tuple>
#include <utility>
#include <vector>

#include "scenarios/history_reader.h"

namespace leapfrog {
namespace {

using history_detail::ReaderState;

// Judging in batches cannot give the whole check's answer: read again.
struct Rewind {
  std::string why;
};

// Takes each record as the reader decodes it and judges the lookups in
// batches. A batch is judged as a history of its own: the header with, as
// initial values, each object's value before the mutations still held; the
// mutations held (every one that completes at or after the earliest window
// start still to judge, widened by epsilon); and the lookups whose windows
// have closed (no mutation invoked inside them can still come). The oracle
// uses a version only through "is it current at some time t in [a, b]",
// so a version that began before a, or ends after b, judges alike.
class StreamJudge final : public history_detail::LineSink {
 public:
  StreamJudge(const StreamOptions& opts, StreamCheck& out)
      : opts_(opts), out_(out), next_flush_(std::max<size_t>(opts.batch, 1)) {}

  void after_line(ReaderState& st, size_t /*lineno*/) override {
    st_ = &st;
    if (!started_) {
      if (!st.have_header) return;
      started_ = true;
      eps_ = st.h.header.epsilon_ns;
      for (const auto& s : st.h.header.initial) base_[object_id(s.key)] = s;
    }
    for (const MutationRecord& m : st.h.mutations) take(m);
    for (const LookupRecord& l : st.h.lookups) take(l);
    out_.offsets += st.h.offsets.size();
    offsets_.insert(offsets_.end(), st.h.offsets.begin(), st.h.offsets.end());
    st.h.mutations.clear();
    st.h.lookups.clear();
    st.h.offsets.clear();
    out_.stats.peak_retained =
        std::max<uint64_t>(out_.stats.peak_retained, mutations_.size() + pending_.size());
    if (pending_.size() >= next_flush_) flush(false);
  }

  // After the last line: judges the rest, then the offsets (whole).
  void finish(ReaderState& st) {
    st_ = &st;
    out_.header = st.h.header;
    flush(true);
    collect();
    History h;
    h.header = st.h.header;
    h.offsets = std::move(offsets_);
    CheckResult offsets;
    check_offsets(h, offsets, opts_.check);
    CheckResult& r = out_.check;
    r.offsets_checked += offsets.offsets_checked;
    r.unjudged += offsets.unjudged;
    r.violation_count += offsets.violation_count;
    r.first_violation_at = std::min(r.first_violation_at, offsets.first_violation_at);
    for (int k = 0; k < kViolationKinds; ++k) r.by_kind[k] += offsets.by_kind[k];
    for (auto& v : offsets.violations)
      if (r.violations.size() < opts_.check.max_reported) r.violations.push_back(std::move(v));
    for (auto& n : offsets.notes) r.notes.push_back(std::move(n));
  }

 private:
  using Key = std::tuple<ObjectKind, NodeId, std::string>;

  uint32_t object_id(const ObjectKey& k) {
    auto [it, inserted] =
        object_ids_.try_emplace(Key{k.kind, k.node, k.name}, static_cast<uint32_t>(last_.size()));
    if (inserted) last_.push_back(kTimeMin);
    return it->second;
  }

  // The objects each effect sets, by object_id.
  const std::vector<uint32_t>& effect_objects(uint32_t e) {
    const auto& effects = st_->h.effects;
    while (effect_objects_.size() < effects.size()) {
      std::vector<uint32_t> ids;
      bool mount = false;
      for (const auto& s : effects[effect_objects_.size()].sets) {
        ids.push_back(object_id(s.key));
        mount |= s.key.kind == ObjectKind::Mount;
      }
      effect_objects_.push_back(std::move(ids));
      effect_mounts_.push_back(mount);
    }
    return effect_objects_[e];
  }

  void take(const MutationRecord& m) {
    ++out_.mutations;
    // Judged windows and dropped versions must not see a mutation arrive late.
    if (m.invoke < last_invoke_ || m.invoke <= judged_until_ || m.invoke < horizon_)
      throw Rewind{"mutations are not in invoke order"};
    last_invoke_ = m.invoke;
    frontier_ = std::max(frontier_, m.invoke);
    if (m.err == 0) {
      // In invoke order, this finds every overlap the whole check finds.
      const auto& objects = effect_objects(m.effect);
      // Where a scoped openat2 walk may be, the oracle follows every mount
      // point a root is ever mounted on, over the whole history.
      if (effect_mounts_[m.effect]) throw Rewind{"a mount changes"};
      for (uint32_t obj : objects) {
        if (last_[obj] > m.invoke) throw Rewind{"mutations of one object overlap"};
        last_[obj] = std::max(last_[obj], m.complete);
      }
    }
    mutations_.push_back(m);
  }

  void take(const LookupRecord& l) {
    ++out_.lookups;
    if (l.invoke - eps_ < horizon_) throw Rewind{"lookups are not in invoke order"};
    frontier_ = std::max(frontier_, l.invoke);
    pending_.push_back(l);
  }

  // Waits for the batch being judged, if any, and adds up its counts.
  void collect() {
    if (!judging_.valid()) return;
    CheckResult r;
    try {
      r = judging_.get();
    } catch (const HistoryError&) {
      throw Rewind{"the oracle refused a batch"};
    }
    if (r.violation_count) throw Rewind{"a violation, reported from the whole history"};
    if (!r.notes.empty()) throw Rewind{"a note about the whole history"};
    ++out_.stats.batches;
    out_.check.lookups_checked += r.lookups_checked;
    out_.check.steps_checked += r.steps_checked;
    out_.check.unjudged += r.unjudged;
  }

  // Judges the pending lookups whose windows have closed (all at the end).
  // The order they are judged in changes no count, and a violation is
  // reported from the whole history.
  void flush(bool all) {
    std::vector<LookupRecord> open;
    History h;
    h.lookups.reserve(pending_.size());
    for (const LookupRecord& l : pending_)
      (all || l.complete + eps_ < frontier_ ? h.lookups : open).push_back(l);
    next_flush_ = open.size() + opts_.batch;
    if (h.lookups.empty()) return;
    h.header = st_->h.header;
    h.header.initial.clear();
    for (const auto& [id, set] : base_) h.header.initial.push_back(set);
    h.effects = st_->h.effects;
    h.queries = st_->h.queries;
    h.mutations = mutations_;
    for (const LookupRecord& l : h.lookups)
      judged_until_ = std::max(judged_until_, l.complete + eps_);
    // One batch is judged on a second thread while the next is read: the
    // batch is a history of its own, so the two share nothing.
    collect();
    judging_ = std::async(std::launch::async, [h = std::move(h), opts = opts_.check] {
      return check_history(h, opts);
    });
    pending_.assign(open.begin(), open.end());  // keeping its capacity
    // Every window still to judge starts at or after the horizon: a mutation
    // complete before it only gives its value to the next batch's initial.
    TimeNs horizon = frontier_ - eps_;
    for (const LookupRecord& l : pending_) horizon = std::min(horizon, l.invoke - eps_);
    horizon_ = std::max(horizon_, horizon);
    size_t kept = 0;
    for (const MutationRecord& m : mutations_) {
      if (m.complete >= horizon_) {
        mutations_[kept++] = m;
        continue;
      }
      if (m.err != 0) continue;
      const auto& sets = st_->h.effects[m.effect].sets;
      const auto& ids = effect_objects(m.effect);
      for (size_t s = 0; s < sets.size(); ++s) base_[ids[s]] = sets[s];
    }
    mutations_.resize(kept);
  }

  const StreamOptions& opts_;
  StreamCheck& out_;
  ReaderState* st_ = nullptr;
  bool started_ = false;
  TimeNs eps_ = 0;
  std::map<Key, uint32_t> object_ids_;
  std::vector<TimeNs> last_;  // by object: the latest complete of a successful mutation
  std::vector<std::vector<uint32_t>> effect_objects_;
  std::vector<bool> effect_mounts_;     // by effect: it sets a mount object
  std::map<uint32_t, ObjectSet> base_;  // by object: its value before mutations_
  std::vector<MutationRecord> mutations_;
  std::vector<LookupRecord> pending_;  // lookups not yet judged
  size_t next_flush_ = 0;              // judge when pending_ holds this many
  std::vector<OffsetRecord> offsets_;
  TimeNs last_invoke_ = kTimeMin;     // of the latest mutation
  TimeNs frontier_ = kTimeMin;        // latest invoke of any record
  TimeNs judged_until_ = kTimeMin;    // latest window end judged
  TimeNs horizon_ = kTimeMin;         // mutations completed before it are in base_
  std::future<CheckResult> judging_;  // the batch being judged, if any
};

StreamCheck check_whole(std::istream& in, const ReadLimits& limits, const StreamOptions& opts,
                        std::string why) {
  StreamCheck out;
  History h = read_history(in, limits);
  out.header = h.header;
  out.mutations = h.mutations.size();
  out.lookups = h.lookups.size();
  out.offsets = h.offsets.size();
  out.check = check_history(h, opts.check);
  out.stats.whole = true;
  out.stats.why = std::move(why);
  return out;
}

}  // namespace

StreamCheck check_history_stream(std::istream& in, const ReadLimits& limits,
                                 const StreamOptions& opts) {
  const std::streampos start = in.tellg();
  if (start == std::streampos(-1))
    return check_whole(in, limits, opts, "the input cannot be read twice");
  StreamCheck out;
  ReaderState st;
  st.keep_mutation_lines = false;
  StreamJudge judge(opts, out);
  try {
    history_detail::read_lines(in, limits, true, st, opts.chunk, &judge);
    judge.finish(st);
  } catch (const Rewind& r) {
    in.clear();
    in.seekg(start);
    const StreamStats seen = out.stats;
    out = check_whole(in, limits, opts, r.why);
    out.stats.batches = seen.batches;
    out.stats.peak_retained = seen.peak_retained;
  }
  return out;
}

}  // namespace leapfrog
