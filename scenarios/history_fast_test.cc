// read_history's fast decoder (simdjson) against the reference reader
// (nlohmann on every line): the same history, or the same error message, for
// the golden files, random histories, and lines with each field replaced by
// odd values.

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "scenarios/history_io.h"
#include "scenarios/history_reader.h"
#include "scenarios/oracle_brute.h"

namespace leapfrog {
namespace {

// What a reader makes of `text`: the history written back, or "error: ...".
std::string outcome(const std::string& text, bool fast) {
  std::istringstream in(text);
  try {
    const History h = fast ? read_history(in) : read_history_reference(in);
    std::ostringstream out;
    write_history(h, out);
    return out.str();
  } catch (const HistoryFormatError& e) {
    return std::string("error: ") + e.what();
  }
}

#define EXPECT_SAME_READ(text)                              \
  do {                                                      \
    const std::string t_ = (text);                          \
    EXPECT_EQ(outcome(t_, true), outcome(t_, false)) << t_; \
  } while (0)

std::string history_text(const History& h) {
  std::ostringstream out;
  write_history(h, out);
  return out.str();
}

TEST(HistoryFast, GoldenFilesReadAlike) {
  int files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(LEAPFROG_TESTDATA)) {
    if (entry.path().extension() != ".jsonl") continue;
    std::ifstream in(entry.path());
    std::stringstream text;
    text << in.rdbuf();
    EXPECT_EQ(outcome(text.str(), true).rfind("error", 0), std::string::npos) << entry.path();
    EXPECT_SAME_READ(text.str());
    ++files;
  }
  EXPECT_GE(files, 10);
}

TEST(HistoryFast, RandomHistoriesReadAlike) {
  for (uint64_t seed = 1; seed <= 500; ++seed) {
    const std::string text = history_text(brute::random_history(seed));
    // Every template twice, so the second copy takes the cached path.
    const auto nl = text.find('\n');
    EXPECT_SAME_READ(text + text.substr(nl + 1));
  }
}

// Every operation line of `base` with one field replaced by each odd value,
// removed, or given twice; each variant must read alike (mostly: the same
// error).
TEST(HistoryFast, OddFieldsReadAlike) {
  const std::string base = history_text(brute::random_history(7));
  std::vector<std::string> lines;
  std::istringstream in(base);
  for (std::string l; std::getline(in, l);) lines.push_back(l);
  ASSERT_GT(lines.size(), 3u);
  // A read and a seek line and an openat2 lookup, which random_history lacks.
  lines.push_back(
      R"({"type":"read","actor":0,"epoch":1,"invoke":5,"complete":9,"result":"ok","offset":64,"length":64})");
  lines.push_back(R"({"type":"seek","actor":0,"invoke":5,"complete":9,"result":"ok","offset":-1})");
  lines.push_back(
      R"({"type":"lookup","actor":0,"op":"openat2","start":0,"path":"a/../b","access":4,"follow":false,"resolve":["beneath","cached"],"invoke":1,"complete":2,"result":"EXDEV"})");
  const std::vector<std::string> odd = {"1.5",
                                        "-0",
                                        "1e3",
                                        "-1",
                                        "-3",
                                        "4294967296",
                                        "9223372036854775808",
                                        "18446744073709551615",
                                        "18446744073709551616",
                                        "1152921504606846977",
                                        "-1152921504606846977",
                                        "1152921504606846976",
                                        "null",
                                        "true",
                                        "\"x\"",
                                        "\"ok\"",
                                        "\"/a\"",
                                        "\"\"",
                                        "[]",
                                        "[\"beneath\",\"nope\"]",
                                        "[1]",
                                        "{}",
                                        "[{}]",
                                        "8",
                                        "7",
                                        "0"};
  size_t variants = 0;
  for (size_t i = 1; i < lines.size(); ++i) {
    const nlohmann::json j = nlohmann::json::parse(lines[i]);
    auto with = [&](const std::string& line) {
      std::string text = lines[0] + "\n";
      // The line twice: first through the reference, then (cached) fast.
      for (size_t k = 1; k < lines.size(); ++k) text += (k == i ? line : lines[k]) + "\n";
      text += line + "\n";
      EXPECT_SAME_READ(text);
      ++variants;
    };
    for (const auto& [key, value] : j.items()) {
      for (const auto& o : odd) {
        nlohmann::json v = j;
        v.erase(key);
        std::string line = v.dump();
        line.insert(line.size() - 1, std::string(v.empty() ? "" : ",") + "\"" + key + "\":" + o);
        with(line);
      }
      nlohmann::json v = j;
      v.erase(key);
      with(v.dump());
      std::string dup = j.dump();
      dup.insert(dup.size() - 1, ",\"" + key + "\":" + value.dump());
      with(dup);
    }
  }
  EXPECT_GT(variants, 1000u);
}

// What the fast reader makes of `text` read `chunk` bytes at a time.
std::string chunked(const std::string& text, size_t chunk, const ReadLimits& limits = {}) {
  std::istringstream in(text);
  try {
    history_detail::ReaderState st;
    history_detail::read_lines(in, limits, true, st, chunk);
    std::ostringstream out;
    write_history(st.h, out);
    return out.str();
  } catch (const HistoryFormatError& e) {
    return std::string("error: ") + e.what();
  }
}

// Lines split across the reader's chunks at every place read alike; so do
// the line and size limits.
TEST(HistoryFast, ChunkBoundariesReadAlike) {
  std::vector<std::string> texts;
  for (const auto& entry : std::filesystem::directory_iterator(LEAPFROG_TESTDATA)) {
    if (entry.path().extension() != ".jsonl") continue;
    std::ifstream in(entry.path());
    std::stringstream text;
    text << in.rdbuf();
    texts.push_back(text.str());
  }
  for (uint64_t seed = 1; seed <= 20; ++seed)
    texts.push_back(history_text(brute::random_history(seed)));
  // Blank lines, CRLF, no final newline, a bad line.
  texts.push_back(texts.back() + "\n  \r\n\t\n");
  texts.push_back(texts.back().substr(0, texts.back().size() - 1));
  texts.push_back(texts.back() + "{\"type\":\"lookup\"\n");
  ASSERT_GE(texts.size(), 30u);
  size_t compared = 0;
  for (const std::string& text : texts) {
    const std::string want = outcome(text, false);
    for (size_t chunk : {size_t{1}, size_t{2}, size_t{3}, size_t{17}, size_t{64}, size_t{4096}}) {
      EXPECT_EQ(chunked(text, chunk), want) << "chunk " << chunk << "\n" << text;
      ++compared;
    }
    // Limits that cut the text: the same error for every chunk size.
    const size_t longest = [&] {
      size_t best = 0, at = 0;
      for (size_t nl; (nl = text.find('\n', at)) != std::string::npos; at = nl + 1)
        best = std::max(best, nl - at);
      return best;
    }();
    for (const ReadLimits limits :
         {ReadLimits{longest - 1, uint64_t{1} << 30}, ReadLimits{longest, text.size() / 2},
          ReadLimits{longest, text.size()}}) {
      std::istringstream in(text);
      std::string ref;
      try {
        std::ostringstream out;
        write_history(read_history_reference(in, limits), out);
        ref = out.str();
      } catch (const HistoryFormatError& e) {
        ref = std::string("error: ") + e.what();
      }
      for (size_t chunk : {size_t{1}, size_t{5}, size_t{100}, size_t{1} << 20})
        EXPECT_EQ(chunked(text, chunk, limits), ref) << "chunk " << chunk;
    }
  }
  EXPECT_GT(compared, 150u);
}

// Strings with a raw control character, escapes where the fast decoder reads
// raw text, keys it does not know, and trailing content: the reference's answer.
TEST(HistoryFast, UnusualTextReadsAlike) {
  const std::string base = history_text(brute::random_history(11));
  const auto nl = base.find('\n');
  const std::string header = base.substr(0, nl + 1);
  std::string line = base.substr(nl + 1, base.find('\n', nl + 1) - nl - 1);
  ASSERT_NE(line.find("\"result\":\""), std::string::npos);
  auto swap = [&](const std::string& from, const std::string& to) {
    std::string l = line;
    const auto at = l.find(from);
    if (at != std::string::npos) l.replace(at, from.size(), to);
    return l;
  };
  const std::vector<std::string> variants = {
      swap("\"result\":\"", "\"result\":\"\t"),
      swap("\"result\":\"", "\"result\":\"\\u0045"),
      swap("\"type\":\"", "\"type\":\"\\u006c"),
      swap("\"type\"", "\"t\\u0079pe\""),
      swap("\"path\":\"", "\"path\":\"\\/"),
      swap("\"actor\"", "\"extra\":[1,,2],\"actor\""),
      swap("\"actor\"", "\"extra\":{\"a\":1},\"actor\""),
      swap("\"sets\":[", "\"sets\":[ "),
      line + " x",
      line + "}",
      line.substr(0, line.size() - 1),
      " " + line + " ",
  };
  for (const auto& v : variants) {
    // Twice each, and after the plain line, so that the template is known.
    EXPECT_SAME_READ(header + line + "\n" + v + "\n" + v + "\n");
    EXPECT_SAME_READ(header + v + "\n" + line + "\n" + v + "\n");
  }
}

}  // namespace
}  // namespace leapfrog
