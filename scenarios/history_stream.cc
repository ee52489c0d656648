#include "scenarios/history_stream.h"

#include <algorithm>
#include <memory>
#include <utility>
#include <vector>

#include "scenarios/history_reader.h"
#include "scenarios/window_judge.h"

namespace leapfrog {
namespace {

using history_detail::ReaderState;

// Judging in batches cannot give the whole check's answer: read again.
struct Rewind {
  std::string why;
};

// Takes each record as the reader decodes it and hands it to a WindowJudge,
// which judges the lookups in batches as their windows close. Offsets are
// few (one pass over a file per epoch) and judged whole at the end.
class StreamJudge final : public history_detail::LineSink {
 public:
  StreamJudge(const StreamOptions& opts, StreamCheck& out) : opts_(opts), out_(out) {}

  void after_line(ReaderState& st, size_t /*lineno*/) override {
    if (!judge_) {
      if (!st.have_header) return;
      WindowOptions w;
      w.check = opts_.check;
      w.batch = opts_.batch;
      judge_ = std::make_unique<WindowJudge>(st.h.header, st.h.effects, st.h.queries, w);
    }
    try {
      for (const MutationRecord& m : st.h.mutations) {
        ++out_.mutations;
        judge_->add(m);
      }
      for (const LookupRecord& l : st.h.lookups) {
        ++out_.lookups;
        judge_->add(l);
      }
    } catch (const WindowOrderError& e) {
      throw Rewind{std::string("records are not in invoke order: ") + e.what()};
    } catch (const HistoryError&) {
      // The whole check says it with the record's index.
      throw Rewind{"the oracle refused a batch"};
    }
    out_.offsets += st.h.offsets.size();
    offsets_.insert(offsets_.end(), st.h.offsets.begin(), st.h.offsets.end());
    st.h.mutations.clear();
    st.h.lookups.clear();
    st.h.offsets.clear();
    out_.stats.peak_retained = std::max(out_.stats.peak_retained, judge_->peak_retained());
  }

  // After the last line: judges the rest, then the offsets (whole).
  void finish(ReaderState& st) {
    out_.header = st.h.header;
    if (!judge_) return;
    try {
      out_.check = judge_->finish();
    } catch (const HistoryError&) {
      throw Rewind{"the oracle refused a batch"};
    }
    out_.stats.batches = judge_->batches();
    out_.stats.peak_retained = std::max(out_.stats.peak_retained, judge_->peak_retained());
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
  const StreamOptions& opts_;
  StreamCheck& out_;
  std::unique_ptr<WindowJudge> judge_;
  std::vector<OffsetRecord> offsets_;
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
