#include "scenarios/window_judge.h"

#include <algorithm>
#include <utility>

namespace leapfrog {

WindowJudge::WindowJudge(const HistoryHeader& header, const std::vector<Effect>& effects,
                         const std::vector<Query>& queries, const WindowOptions& opts)
    : header_(header),
      effects_(effects),
      queries_(queries),
      opts_(opts),
      eps_(header.epsilon_ns),
      next_flush_(std::max<size_t>(opts.batch, 1)) {
  for (const auto& s : header.initial) base_[object_id(s.key)] = s.value;
}

WindowJudge::~WindowJudge() {
  if (judging_.valid()) judging_.wait();
}

uint32_t WindowJudge::object_id(const ObjectKey& k) {
  auto [it, inserted] =
      object_ids_.try_emplace(Key{k.kind, k.node, k.name}, static_cast<uint32_t>(keys_.size()));
  if (inserted) {
    keys_.push_back(k);
    last_complete_.push_back(kTimeMin);
  }
  return it->second;
}

const std::vector<uint32_t>& WindowJudge::effect_objects(uint32_t e) {
  if (e >= effects_.size())
    throw HistoryError("a mutation refers to unknown effect " + std::to_string(e));
  while (effect_objects_.size() < effects_.size()) {
    std::vector<uint32_t> ids;
    std::vector<std::string> names;
    for (const auto& s : effects_[effect_objects_.size()].sets) {
      ids.push_back(object_id(s.key));
      names.push_back(describe(s.key, header_.nodes));
    }
    effect_objects_.push_back(std::move(ids));
    effect_names_.push_back(std::move(names));
  }
  return effect_objects_[e];
}

void WindowJudge::add(const MutationRecord& m) {
  // Judged windows and forgotten versions must not see a mutation arrive late.
  if (m.invoke < last_mutation_invoke_ || m.invoke <= judged_until_ || m.invoke < horizon_)
    throw WindowOrderError("a mutation invoked at " + std::to_string(m.invoke) +
                           " arrived after records invoked at " + std::to_string(frontier_));
  last_mutation_invoke_ = m.invoke;
  frontier_ = std::max(frontier_, m.invoke);
  const auto& objects = effect_objects(m.effect);
  if (m.err == 0) {
    for (uint32_t obj : objects) {
      if (last_complete_[obj] > m.invoke)
        throw HistoryError("mutations of " + describe(keys_[obj], header_.nodes) +
                           " overlap in time; the mutations of one object must follow each other");
      last_complete_[obj] = std::max(last_complete_[obj], m.complete);
    }
  }
  mutations_.push_back(m);
  peak_retained_ = std::max<uint64_t>(peak_retained_, mutations_.size() + pending_.size());
  if (m.err == 0 && !open_objects_.empty()) {
    const auto& names = effect_names_[m.effect];
    if (std::any_of(names.begin(), names.end(),
                    [&](const std::string& n) { return open_objects_.count(n) > 0; })) {
      for (Violation& v : result_.violations) close_versions(v, m);
      find_open_objects();
    }
  }
}

void WindowJudge::find_open_objects() {
  open_objects_.clear();
  for (const Violation& v : result_.violations) {
    for (const auto& pv : v.versions)
      if (pv.to == kTimeMax) open_objects_.insert(v.object);
    for (const auto& st : v.steps)
      for (const auto& pv : st.versions)
        if (pv.to == kTimeMax) open_objects_.insert(st.object);
  }
}

void WindowJudge::close_versions(Violation& v, const MutationRecord& m) {
  const auto& names = effect_names_[m.effect];
  auto close = [&](const std::string& object, std::vector<PossibleVersion>& versions) {
    if (std::find(names.begin(), names.end(), object) == names.end()) return;
    for (PossibleVersion& pv : versions) {
      if (pv.to != kTimeMax || pv.from >= m.invoke) continue;
      pv.to = std::max(pv.from, m.complete);
    }
  };
  close(v.object, v.versions);
  for (StepTrace& st : v.steps) close(st.object, st.versions);
}

void WindowJudge::add(const LookupRecord& l) {
  if (l.invoke - eps_ < horizon_)
    throw WindowOrderError("a lookup invoked at " + std::to_string(l.invoke) +
                           " arrived after records invoked at " + std::to_string(frontier_));
  frontier_ = std::max(frontier_, l.invoke);
  pending_.push_back(l);
  pending_index_.push_back(next_index_++);
  peak_retained_ = std::max<uint64_t>(peak_retained_, mutations_.size() + pending_.size());
  if (pending_.size() >= next_flush_) flush(false);
}

CheckResult WindowJudge::finish() {
  flush(true);
  collect();
  CheckResult out = std::move(result_);
  result_ = CheckResult{};
  std::sort(out.violations.begin(), out.violations.end(),
            [](const Violation& a, const Violation& b) { return a.record < b.record; });
  add_lookup_notes(out, opts_.check);
  return out;
}

// Forgets `m` but for reports: each object it sets keeps it among its
// latest kMaxMutationTrace + 1, with the value before it.
void WindowJudge::fold(const MutationRecord& m) {
  const auto& sets = effects_[m.effect].sets;
  const auto& ids = effect_objects(m.effect);
  for (size_t s = 0; s < sets.size(); ++s) {
    const uint32_t obj = ids[s];
    auto base = base_.find(obj);
    std::deque<Folded>& q = folded_[obj];
    q.push_back(Folded{m, static_cast<uint32_t>(s),
                       base == base_.end() ? std::nullopt : std::optional<Value>(base->second)});
    if (q.size() > kMaxMutationTrace + 1) q.pop_front();
    if (m.err == 0) base_[obj] = sets[s].value;
  }
}

void WindowJudge::flush(bool all) {
  History h;
  Batch batch;
  std::vector<LookupRecord> open;
  std::vector<uint64_t> open_index;
  for (size_t i = 0; i < pending_.size(); ++i) {
    const LookupRecord& l = pending_[i];
    if (all || l.complete + eps_ < frontier_) {
      h.lookups.push_back(l);
      batch.index.push_back(pending_index_[i]);
    } else {
      open.push_back(l);
      open_index.push_back(pending_index_[i]);
    }
  }
  next_flush_ = open.size() + std::max<size_t>(opts_.batch, 1);
  if (!h.lookups.empty()) {
    h.header = header_;
    h.header.initial.clear();
    h.effects = effects_;
    h.queries = queries_;
    // Each folded mutation comes back as one of an effect that sets only
    // its object, so that versions and excerpts start where the whole
    // history's do; the object starts from the value before the oldest.
    std::map<std::pair<uint32_t, uint32_t>, uint32_t> single;  // (effect, set) -> its effect
    for (const auto& [obj, q] : folded_) {
      for (const Folded& f : q) {
        auto [it, added] =
            single.try_emplace({f.m.effect, f.set}, static_cast<uint32_t>(h.effects.size()));
        if (added) {
          const Effect& e = effects_[f.m.effect];
          h.effects.push_back(Effect{e.op, {e.sets[f.set]}});
        }
        MutationRecord m = f.m;
        m.effect = it->second;
        h.mutations.push_back(m);
      }
    }
    for (uint32_t obj = 0; obj < keys_.size(); ++obj) {
      auto q = folded_.find(obj);
      if (q != folded_.end() && !q->second.empty()) {
        const std::optional<Value>& before = q->second.front().before;
        if (before) h.header.initial.push_back(ObjectSet{keys_[obj], *before});
        continue;
      }
      auto base = base_.find(obj);
      if (base != base_.end()) h.header.initial.push_back(ObjectSet{keys_[obj], base->second});
    }
    h.mutations.insert(h.mutations.end(), mutations_.begin(), mutations_.end());
    for (const LookupRecord& l : h.lookups)
      judged_until_ = std::max(judged_until_, l.complete + eps_);
    collect();
    auto judge = [h = std::move(h), batch = std::move(batch), opts = opts_.check]() mutable {
      batch.result = check_history(h, opts);
      if (batch.result.violation_count)
        for (const LookupRecord& l : h.lookups)
          batch.completed_by_first += l.complete <= batch.result.first_violation_at;
      return std::move(batch);
    };
    if (opts_.async) {
      judging_ = std::async(std::launch::async, std::move(judge));
    } else {
      std::promise<Batch> p;
      try {
        p.set_value(judge());
      } catch (...) {
        p.set_exception(std::current_exception());
      }
      judging_ = p.get_future();
    }
  }
  pending_ = std::move(open);
  pending_index_ = std::move(open_index);
  // Every window still to judge starts at or after the horizon: a mutation
  // complete before it can only be the value some window starts from.
  TimeNs horizon = frontier_ - eps_;
  for (const LookupRecord& l : pending_) horizon = std::min(horizon, l.invoke - eps_);
  horizon_ = std::max(horizon_, horizon);
  size_t kept = 0;
  for (const MutationRecord& m : mutations_) {
    if (m.complete >= horizon_)
      mutations_[kept++] = m;
    else
      fold(m);
  }
  mutations_.resize(kept);
}

// Waits for the batch being judged, if any, and adds it to the result.
void WindowJudge::collect() {
  if (!judging_.valid()) return;
  Batch b = judging_.get();
  CheckResult& r = b.result;
  CheckResult& out = result_;
  ++batches_;
  done_ += b.index.size();
  out.lookups_checked += r.lookups_checked;
  out.steps_checked += r.steps_checked;
  out.unjudged += r.unjudged;
  out.over_budget += r.over_budget;
  out.violation_count += r.violation_count;
  out.cached_violations += r.cached_violations;
  out.foreign_eagain += r.foreign_eagain;
  for (int k = 0; k < kViolationKinds; ++k) out.by_kind[k] += r.by_kind[k];
  // Windows close in order of completion: every lookup of an earlier batch
  // completed before this batch's first violation, every later one after.
  if (r.violation_count && !seen_violation_) {
    seen_violation_ = true;
    to_first_violation_ = done_ - b.index.size() + b.completed_by_first;
  }
  out.first_violation_at = std::min(out.first_violation_at, r.first_violation_at);
  for (Violation& v : r.violations) {
    v.record = b.index[v.record];
    // The mutations that came since the batch was formed.
    for (const MutationRecord& m : mutations_)
      if (m.err == 0) close_versions(v, m);
    out.violations.push_back(std::move(v));
  }
  // The whole check reports the first max_reported by index.
  if (out.violations.size() > opts_.check.max_reported) {
    std::sort(out.violations.begin(), out.violations.end(),
              [](const Violation& a, const Violation& b) { return a.record < b.record; });
    out.violations.resize(opts_.check.max_reported);
  }
  if (!r.violations.empty()) find_open_objects();
}

}  // namespace leapfrog
