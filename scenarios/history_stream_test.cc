// check_history_stream against check_history(read_history(...)): the same
// result and the same errors on random legal and illegal histories judged in
// batches of every size, and a number of records held that does not grow
// with the history's length when windows are bounded.

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <streambuf>

#include "bench/legal_history.h"
#include "scenarios/history_io.h"
#include "scenarios/history_stream.h"
#include "scenarios/oracle_brute.h"

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
    s << " history " << v.history.size();
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
// naive judge): nothing to report, so judged in batches to the end; and
// as they are, legal and illegal lookups mixed.
TEST(HistoryStream, RandomHistoriesJudgeAlike) {
  size_t in_batches = 0, rewound = 0;
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
      }
    }
  }
  // Both paths were taken, the batched one mostly.
  EXPECT_GT(in_batches, 1000u);
  EXPECT_GT(rewound, 100u);
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

// A violation, out-of-order lines, overlapping mutations and a bad line:
// judged (or refused) whole, so the report and the errors are the whole
// check's.
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
       {std::pair{violating, "violation"}, std::pair{out_of_order, "order"},
        std::pair{overlapping, ""}, std::pair{bad_line, ""}}) {
    StreamStats stats;
    const std::string want = whole(text);
    EXPECT_EQ(streamed(text, 64, &stats), want);
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

}  // namespace
}  // namespace leapfrog
