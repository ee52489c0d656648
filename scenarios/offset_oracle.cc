// The torn-offset check for actors sharing one open file description: every
// read must start where the previous one (in some order consistent with real
// time) ended, so each block is read exactly once per pass over the file, and
// an lseek(SEEK_CUR) must return a position consistent with the reads around it.

#include <algorithm>
#include <map>

#include "scenarios/oracle.h"

namespace leapfrog {
namespace {

struct Pass {
  std::vector<size_t> reads;  // indices into History::offsets
  std::vector<size_t> seeks;
  bool saw_eof = false;
};

std::string op_text(const OffsetRecord& r) {
  if (r.kind == OffsetRecord::Kind::Seek) return "actor " + std::to_string(r.actor) + " lseek -> " + std::to_string(r.offset);
  return "actor " + std::to_string(r.actor) + " read at " + std::to_string(r.offset);
}

class OffsetChecker {
 public:
  OffsetChecker(const History& h, CheckResult& out, const CheckOptions& opts) : h_(h), out_(out), opts_(opts) {}

  void run() {
    if (h_.offsets.empty()) return;
    const uint32_t bs = h_.header.block_size;
    if (bs == 0 || bs % 8 != 0) throw HistoryError("offset records need a header block_size that is a multiple of 8");
    std::map<uint32_t, Pass> passes;
    for (size_t i = 0; i < h_.offsets.size(); ++i) {
      const OffsetRecord& r = h_.offsets[i];
      if (r.complete < r.invoke) throw HistoryError("offset record " + std::to_string(i) + " completes before it is invoked");
      if (r.err != 0) {
        ++out_.unjudged;
        continue;
      }
      ++out_.offsets_checked;
      Pass& p = passes[r.epoch];
      if (r.kind == OffsetRecord::Kind::Seek) {
        p.seeks.push_back(i);
      } else if (r.offset < 0 && r.length == 0) {
        p.saw_eof = true;
      } else {
        p.reads.push_back(i);
      }
    }
    for (auto& [epoch, pass] : passes) check_pass(pass);
  }

 private:
  const OffsetRecord& rec(size_t i) const { return h_.offsets[i]; }

  void flag(size_t i, const std::string& observed, const std::string& expected, const OffsetRecord* other) {
    ++out_.violation_count;
    ++out_.by_kind[static_cast<size_t>(ViolationKind::TornOffset)];
    out_.first_violation_at = std::min(out_.first_violation_at, rec(i).complete);
    if (out_.violations.size() >= opts_.max_reported) return;
    const OffsetRecord& r = rec(i);
    Violation v;
    v.kind = ViolationKind::TornOffset;
    v.actor = r.actor;
    v.record = i;
    v.op = r.kind == OffsetRecord::Kind::Seek ? "lseek" : "read";
    v.path = "shared fd";
    v.invoke = r.invoke;
    v.complete = r.complete;
    v.epsilon = h_.header.epsilon_ns;
    v.object = "f_pos";
    v.observed = observed;
    v.expected = expected;
    if (other) v.versions.push_back(PossibleVersion{op_text(*other), other->invoke, other->complete});
    out_.violations.push_back(std::move(v));
  }

  void check_pass(Pass& pass) {
    const int64_t bs = h_.header.block_size;
    const TimeNs eps = h_.header.epsilon_ns;
    auto& reads = pass.reads;
    std::sort(reads.begin(), reads.end(), [this](size_t a, size_t b) {
      return rec(a).offset != rec(b).offset ? rec(a).offset < rec(b).offset : rec(a).invoke < rec(b).invoke;
    });
    // Shape of each read, duplicates, and gaps.
    std::vector<size_t> unique_reads;
    int64_t expect = 0;
    for (size_t k = 0; k < reads.size(); ++k) {
      const OffsetRecord& r = rec(reads[k]);
      if (r.offset < 0 || r.offset % bs != 0 || r.length != static_cast<uint32_t>(bs)) {
        flag(reads[k], "read " + std::to_string(r.length) + " bytes starting at " + std::to_string(r.offset),
             "whole blocks of " + std::to_string(bs) + " bytes at block boundaries", nullptr);
        continue;
      }
      if (!unique_reads.empty() && rec(unique_reads.back()).offset == r.offset) {
        flag(reads[k], "block at " + std::to_string(r.offset) + " read again", "each block read once per pass",
             &rec(unique_reads.back()));
        continue;
      }
      if (r.offset > expect) {
        flag(reads[k], "read at " + std::to_string(r.offset) + " while the block at " + std::to_string(expect) +
                           " was never read", "no block skipped", nullptr);
      }
      expect = r.offset + bs;
      unique_reads.push_back(reads[k]);
    }
    const int64_t file_end = static_cast<int64_t>(h_.header.blocks) * bs;
    if (pass.saw_eof && expect < file_end && !reads.empty()) {
      flag(reads.back(), "end of file reached with blocks from " + std::to_string(expect) + " never read",
           "every block read once before end of file", nullptr);
    }
    // Real time: a read at a larger offset cannot complete before a read at a
    // smaller offset is invoked.
    const size_t n = unique_reads.size();
    size_t max_inv = SIZE_MAX;  // read with the largest invoke among smaller offsets
    for (size_t k = 0; k < n; ++k) {
      const OffsetRecord& r = rec(unique_reads[k]);
      if (max_inv != SIZE_MAX && r.complete + eps < rec(max_inv).invoke - eps) {
        flag(unique_reads[k], "read at " + std::to_string(r.offset) + " completed before the read at " +
                                  std::to_string(rec(max_inv).offset) + " was invoked",
             "offsets handed out in real-time order", &rec(max_inv));
      }
      if (max_inv == SIZE_MAX || r.invoke > rec(max_inv).invoke) max_inv = unique_reads[k];
    }
    // Seeks: reads below the returned position happened before it, reads at or
    // above it after it.
    std::vector<TimeNs> prefix_max_invoke(n + 1, kTimeMin), suffix_min_complete(n + 1, kTimeMax);
    std::vector<size_t> prefix_arg(n + 1, SIZE_MAX), suffix_arg(n + 1, SIZE_MAX);
    for (size_t k = 0; k < n; ++k) {
      const OffsetRecord& r = rec(unique_reads[k]);
      prefix_max_invoke[k + 1] = prefix_max_invoke[k];
      prefix_arg[k + 1] = prefix_arg[k];
      if (r.invoke > prefix_max_invoke[k]) {
        prefix_max_invoke[k + 1] = r.invoke;
        prefix_arg[k + 1] = unique_reads[k];
      }
    }
    for (size_t k = n; k-- > 0;) {
      const OffsetRecord& r = rec(unique_reads[k]);
      suffix_min_complete[k] = suffix_min_complete[k + 1];
      suffix_arg[k] = suffix_arg[k + 1];
      if (r.complete < suffix_min_complete[k + 1]) {
        suffix_min_complete[k] = r.complete;
        suffix_arg[k] = unique_reads[k];
      }
    }
    for (size_t si : pass.seeks) {
      const OffsetRecord& s = rec(si);
      if (s.offset < 0 || s.offset % bs != 0) {
        flag(si, "lseek returned " + std::to_string(s.offset), "a block boundary", nullptr);
        continue;
      }
      const size_t below = static_cast<size_t>(
          std::partition_point(unique_reads.begin(), unique_reads.end(),
                               [&](size_t r) { return rec(r).offset < s.offset; }) -
          unique_reads.begin());
      if (below > 0 && prefix_max_invoke[below] - eps > s.complete + eps) {
        const OffsetRecord& r = rec(prefix_arg[below]);
        flag(si, "lseek returned " + std::to_string(s.offset) + " before the read at " + std::to_string(r.offset) +
                     " began", "a position past every read that completed before it", &r);
      } else if (below < n && suffix_min_complete[below] + eps < s.invoke - eps) {
        const OffsetRecord& r = rec(suffix_arg[below]);
        flag(si, "lseek returned " + std::to_string(s.offset) + " after the read at " + std::to_string(r.offset) +
                     " had completed", "a position past every read that completed before it", &r);
      }
    }
  }

  const History& h_;
  CheckResult& out_;
  const CheckOptions& opts_;
};

}  // namespace

void check_offsets(const History& h, CheckResult& out, const CheckOptions& opts) {
  OffsetChecker(h, out, opts).run();
}

}  // namespace leapfrog
