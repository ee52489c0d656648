// check_history_stream against check_history(read_history(...)): the same
// result and the same errors on random legal and illegal histories judged in
// batches of every size, and a number of records held that does not grow
// with the history's length when windows are bounded.

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <streambuf>

#include "bench/legal_history.h"
#include "scenarios/history_io.h"
#include "scenarios/history_stream.h"
#include "scenarios/oracle_brute.h"
#include "scenarios/window_judge.h"

namespace leapfrog {
namespace {

std::string text_of(const History& h) {
  std::ostringstream out;
  write_history(h, out);
  return out.str();
}

// Everything a check says, as text.
std::string summary(const CheckResult& r) {
  std::ostringstream s;
  s << "checked " << r.lookups_checked << " steps " << r.steps_checked << " offsets "
    << r.offsets_checked << " unjudged " << r.unjudged << " over " << r.over_budget
    << " violations " << r.violation_count << " first " << r.first_violation_at << " kinds";
  for (uint64_t k : r.by_kind) s << ' ' << k;
  for (const auto& v : r.violations) {
    s << '\n'
      << to_string(v.kind) << " record " << v.record << " step " << v.step << ' ' << v.object
      << " observed " << v.observed << " expected " << v.expected << " versions";
    for (const auto& pv : v.versions)
      s << " [" << pv.value << ' ' << pv.from << ' ' << pv.to << ']';
    // The excerpt up to the window's end: mutations after it are listed as
    // far as they were known when the window closed (window_judge.h).
    s << " history";
    for (const auto& m : v.history)
      if (m.invoke <= v.complete + v.epsilon)
        s << " {" << m.actor << ' ' << m.op << ' ' << m.value << ' ' << m.invoke << ' ' << m.complete
        << ' ' << m.err << '}';
    s << " steps";
    for (const auto& st : v.steps) {
      s << " (" << st.step << ' ' << st.object;
      for (const auto& pv : st.versions) s << " [" << pv.value << ' ' << pv.from << ' ' << pv.to << ']';
      s << ')';
    }
  }
  for (const auto& n : r.notes) s << "\nnote " << n;
  return s.str();
}

std::string whole(const std::string& text) {
  std::istringstream in(text);
  try {
    const History h = read_history(in);
    return "ops " + std::to_string(h.mutations.size() + h.lookups.size() + h.offsets.size()) +
           '\n' + summary(check_history(h));
  } catch (const HistoryFormatError& e) {
    return std::string("format error: ") + e.what();
  } catch (const HistoryError& e) {
    return std::string("history error: ") + e.what();
  }
}

std::string streamed(std::istream& in, const StreamOptions& opts, StreamStats* stats = nullptr) {
  try {
    const StreamCheck sc = check_history_stream(in, {}, opts);
    if (stats) *stats = sc.stats;
    return "ops " + std::to_string(sc.mutations + sc.lookups + sc.offsets) + '\n' +
           summary(sc.check);
  } catch (const HistoryFormatError& e) {
    return std::string("format error: ") + e.what();
  } catch (const HistoryError& e) {
    return std::string("history error: ") + e.what();
  }
}

std::string streamed(const std::string& text, size_t batch, StreamStats* stats = nullptr,
                     size_t chunk = size_t{1} << 20) {
  std::istringstream in(text);
  StreamOptions opts;
  opts.batch = batch;
  opts.chunk = chunk;
  return streamed(in, opts, stats);
}

// The random histories with only their legal lookups (judged so by the
// naive judge), and as they are, legal and illegal lookups mixed: the
// violations, their versions, walks and excerpts are reported from batches
// as the whole check reports them.
TEST(HistoryStream, RandomHistoriesJudgeAlike) {
  size_t in_batches = 0, rewound = 0, violations_in_batches = 0;
  for (uint64_t seed = 1; seed <= 300; ++seed) {
    const History mixed = brute::random_history(seed);
    History legal = mixed;
    const std::vector<brute::Verdict> verdicts = brute::judge(mixed);
    legal.lookups.clear();
    for (size_t i = 0; i < mixed.lookups.size(); ++i)
      if (verdicts[i] == brute::Verdict::Legal) legal.lookups.push_back(mixed.lookups[i]);
    for (const History* h : {static_cast<const History*>(&legal), &mixed}) {
      const std::string text = text_of(*h);
      const std::string want = whole(text);
      for (size_t batch : {size_t{1}, size_t{2}, size_t{5}, size_t{1000}}) {
        StreamStats stats;
        EXPECT_EQ(streamed(text, batch, &stats, batch == 2 ? 7 : size_t{1} << 20), want)
            << "seed " << seed << " batch " << batch << "\n"
            << text;
        (stats.whole ? rewound : in_batches) += 1;
        if (!stats.whole && want.find("violations 0 ") == std::string::npos)
          ++violations_in_batches;
      }
    }
  }
  // The batched path was taken nearly always, also for violations.
  EXPECT_GT(in_batches, 2000u) << rewound;
  EXPECT_GT(violations_in_batches, 500u);
}

// A long legal history: judged in batches, holding at most about one batch
// of records however long it is.
TEST(HistoryStream, RecordsHeldDoNotGrowWithLength) {
  constexpr size_t kBatch = 256;
  for (int64_t ops : {4'000, 40'000, 400'000}) {
    const std::unique_ptr<History> h = bench::make_history(ops);
    const std::string text = text_of(*h);
    StreamStats stats;
    const std::string got = streamed(text, kBatch, &stats);
    EXPECT_EQ(got, whole(text)) << ops;
    EXPECT_FALSE(stats.whole) << stats.why;
    EXPECT_GE(stats.batches, h->lookups.size() / (2 * kBatch)) << ops;
    EXPECT_LE(stats.peak_retained, 2 * kBatch + 16) << ops;
  }
}

// Positive control of the counter: one lookup whose window spans the whole
// history keeps every mutation after its start, and the counter shows it.
TEST(HistoryStream, AnEndlessWindowHoldsEverything) {
  const std::unique_ptr<History> h = bench::make_history(40'000);
  const TimeNs end = h->lookups.back().complete;
  h->lookups.insert(h->lookups.begin(), LookupRecord{1, 0, 0, end, EACCES, 0, 0, 0});
  const std::string text = text_of(*h);
  StreamStats stats;
  EXPECT_EQ(streamed(text, 256, &stats), whole(text));
  EXPECT_FALSE(stats.whole) << stats.why;
  EXPECT_GT(stats.peak_retained, 9'000u);  // of 10,000 mutations
}

// A violation is judged in batches and reported as the whole check reports
// it; out-of-order lines, overlapping mutations and a bad line are judged
// (or refused) whole, so the errors are the whole check's.
TEST(HistoryStream, WhatBatchesCannotJudgeIsJudgedWhole) {
  const std::unique_ptr<History> h = bench::make_history(8'000);
  const std::string legal = text_of(*h);

  History bad = *h;
  bad.lookups[3001].err = bad.lookups[3001].err ? 0 : EACCES;
  bad.lookups[3001].dev = bad.lookups[3001].err ? 0 : 1;
  bad.lookups[3001].ino = bad.lookups[3001].err ? 0 : 104;
  const std::string violating = text_of(bad);

  std::vector<std::string> lines;
  std::istringstream in(legal);
  for (std::string l; std::getline(in, l);) lines.push_back(l);
  std::string out_of_order;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (i == 100) continue;
    out_of_order += lines[i] + '\n';
    if (i == 5000) out_of_order += lines[100] + '\n';  // a mutation or lookup, far too late
  }

  History overlap = *h;
  overlap.mutations[1500].complete = overlap.mutations[1501].invoke + 1;
  const std::string overlapping = text_of(overlap);

  const std::string bad_line = legal + "{\"type\":\"lookup\",\"actor\":7}\n";

  for (const auto& [text, why] :
       {std::pair{violating, "-"}, std::pair{out_of_order, "order"},
        std::pair{overlapping, ""}, std::pair{bad_line, ""}}) {
    StreamStats stats;
    const std::string want = whole(text);
    EXPECT_EQ(streamed(text, 64, &stats), want);
    if (std::string(why) == "-")
      EXPECT_FALSE(stats.whole) << stats.why;
    else
      EXPECT_NE(stats.why.find(why), std::string::npos) << stats.why;
  }
  EXPECT_NE(whole(violating).find("violations 1 "), std::string::npos);
  EXPECT_NE(whole(overlapping).find("format error: line "), std::string::npos);
  EXPECT_NE(whole(bad_line).find("format error: line " + std::to_string(lines.size() + 1)),
            std::string::npos);
}

// The golden files (mounts, openat2, exec ids, violations) and shared-offset
// histories (judged at the end, with unjudged results and a torn read):
// the same answer in batches of every size.
TEST(HistoryStream, GoldenAndOffsetHistoriesJudgeAlike) {
  std::vector<std::string> texts;
  for (const auto& entry : std::filesystem::directory_iterator(LEAPFROG_TESTDATA)) {
    if (entry.path().extension() != ".jsonl") continue;
    std::ifstream in(entry.path());
    std::stringstream text;
    text << in.rdbuf();
    texts.push_back(text.str());
  }
  ASSERT_GE(texts.size(), 10u);
  const std::string header =
      R"({"format":"leapfrog-history","version":1,"nodes":[],"actors":[{"id":0,"uid":0,"gid":0},)"
      R"({"id":1,"uid":0,"gid":0}],"block_size":64,"blocks":4})"
      "\n";
  const std::string reads =
      R"({"type":"read","actor":0,"epoch":0,"invoke":100,"complete":200,"result":"ok","offset":0,"length":64})"
      "\n"
      R"({"type":"read","actor":1,"epoch":0,"invoke":150,"complete":250,"result":"EWHAT","offset":64,"length":64})"
      "\n"
      R"({"type":"seek","actor":1,"epoch":0,"invoke":300,"complete":310,"result":"ok","offset":64})"
      "\n";
  texts.push_back(header + reads);
  texts.push_back(
      header + reads +
      R"({"type":"read","actor":0,"epoch":0,"invoke":400,"complete":410,"result":"ok","offset":0,"length":64})"
      "\n");
  for (const std::string& text : texts) {
    const std::string want = whole(text);
    for (size_t batch : {size_t{1}, size_t{3}, size_t{1} << 16})
      EXPECT_EQ(streamed(text, batch), want) << "batch " << batch << "\n" << text;
  }
  EXPECT_NE(whole(texts.back()).find("torn"), std::string::npos) << whole(texts.back());
  EXPECT_NE(whole(texts[texts.size() - 2]).find("unjudged 1"), std::string::npos);
}

// A stream that cannot seek (a pipe) is judged whole from the start.
TEST(HistoryStream, UnseekableInputIsJudgedWhole) {
  struct NoSeek : std::streambuf {
    explicit NoSeek(std::string& s) { setg(s.data(), s.data(), s.data() + s.size()); }
  };
  std::string text = text_of(*bench::make_history(2'000));
  NoSeek buf(text);
  std::istream in(&buf);
  StreamStats stats;
  EXPECT_EQ(streamed(in, StreamOptions{}, &stats), whole(text));
  EXPECT_TRUE(stats.whole);
  EXPECT_NE(stats.why.find("twice"), std::string::npos);
}

// The records of `h` in invoke order, as a live run hands them to the judge:
// of equal invokes, mutations first, then by actor, each in its order.
History in_invoke_order(const History& h) {
  History out = h;
  auto by_invoke = [](const auto& a, const auto& b) {
    return a.invoke < b.invoke || (a.invoke == b.invoke && a.actor < b.actor);
  };
  std::stable_sort(out.mutations.begin(), out.mutations.end(), by_invoke);
  std::stable_sort(out.lookups.begin(), out.lookups.end(), by_invoke);
  return out;
}

// What a WindowJudge makes of `h`'s records, fed one by one in invoke order.
std::string judged_live(const History& h, size_t batch, bool async, uint64_t* peak = nullptr) {
  WindowOptions opts;
  opts.batch = batch;
  opts.async = async;
  try {
    WindowJudge judge(h.header, h.effects, h.queries, opts);
    size_t m = 0;
    for (const LookupRecord& l : h.lookups) {
      while (m < h.mutations.size() && h.mutations[m].invoke <= l.invoke) judge.add(h.mutations[m++]);
      judge.add(l);
    }
    while (m < h.mutations.size()) judge.add(h.mutations[m++]);
    const CheckResult r = judge.finish();
    if (peak) *peak = judge.peak_retained();
    return "ops " + std::to_string(h.mutations.size() + h.lookups.size()) + '\n' + summary(r);
  } catch (const HistoryError&) {
    return "history error";
  }
}

std::string judged_whole(const History& h) {
  try {
    return "ops " + std::to_string(h.mutations.size() + h.lookups.size()) + '\n' +
           summary(check_history(h));
  } catch (const HistoryError&) {
    return "history error";
  }
}

// The differential generator's histories (legal and illegal lookups, mounts,
// openat2, renames), fed as a live run feeds them: the judge's result is the
// whole check's, in batches of every size, on one thread or two.
TEST(WindowJudge, AgreesWithTheWholeCheckOnTheDifferentialGenerator) {
  size_t with_violations = 0;
  for (uint64_t seed = 1; seed <= 3000; ++seed) {
    const History h = in_invoke_order(brute::random_history(seed));
    const std::string want = judged_whole(h);
    with_violations += want.find("violations 0 ") == std::string::npos &&
                       want != "history error";
    for (size_t batch : {size_t{1}, size_t{4}, size_t{1} << 16})
      ASSERT_EQ(judged_live(h, batch, seed % 2 == 0), want) << "seed " << seed << " batch " << batch;
  }
  EXPECT_GT(with_violations, 500u);
}

// Many violations in a long run: the records held stay the same whatever
// the run's length, and the report is the whole check's (the first 50 in
// full, every one counted).
TEST(WindowJudge, ViolationsDoNotMakeItHoldMore) {
  uint64_t peaks[2] = {};
  int i = 0;
  for (int64_t ops : {40'000, 400'000}) {
    std::unique_ptr<History> h = bench::make_history(ops);
    for (size_t l = 7; l < h->lookups.size(); l += 50) {
      LookupRecord& r = h->lookups[l];
      r.err = r.err ? 0 : EACCES;  // a stale grant or a stale deny, depending on the state
      r.dev = r.err ? 0 : 1;
      r.ino = r.err ? 0 : 104;
    }
    const std::string want = judged_whole(*h);
    ASSERT_EQ(want.find("violations 0 "), std::string::npos);
    EXPECT_EQ(judged_live(*h, 256, true, &peaks[i]), want) << ops;
    ++i;
  }
  EXPECT_LE(peaks[1], peaks[0] + 16);
  EXPECT_LE(peaks[1], 2 * 256 + 16);
}

}  // namespace
}  // namespace leapfrog
