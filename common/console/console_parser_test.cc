#include "common/console/console_parser.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <random>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

namespace leapfrog::console {
namespace {

namespace fs = std::filesystem;

const fs::path kTestdata = LEAPFROG_CONSOLE_TESTDATA;

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in) << "cannot open " << path;
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// The golden form of a parse: one block per report, blank line between blocks.
std::string describe(const std::vector<KernelReport>& reports) {
  std::string out;
  for (const KernelReport& r : reports) {
    if (!out.empty()) out += "\n";
    out += "kind: " + r.kind + "\n";
    out += "title: " + r.title + "\n";
    out += "lines: " + std::to_string(r.first_line) + "-" + std::to_string(r.last_line) + "\n";
    out += std::string("fatal: ") + (report_is_fatal(r) ? "yes" : "no") + "\n";
  }
  return out;
}

std::vector<fs::path> golden_inputs() {
  std::vector<fs::path> inputs;
  for (const auto& entry : fs::directory_iterator(kTestdata)) {
    if (entry.path().extension() == ".txt") inputs.push_back(entry.path());
  }
  std::sort(inputs.begin(), inputs.end());
  return inputs;
}

class GoldenTest : public testing::TestWithParam<fs::path> {};

TEST_P(GoldenTest, MatchesExpected) {
  const fs::path input = GetParam();
  fs::path expected_path = input;
  expected_path.replace_extension(".expected");
  ASSERT_TRUE(fs::exists(expected_path)) << "no " << expected_path;
  std::string text = read_file(input);
  std::vector<KernelReport> reports = parse_console(text);
  EXPECT_EQ(describe(reports), read_file(expected_path)) << "golden file " << input;

  // The excerpt is exactly the report's lines of the input.
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    line.erase(std::remove(line.begin(), line.end(), '\r'), line.end());
    lines.push_back(line);
  }
  for (const KernelReport& r : reports) {
    ASSERT_LE(r.first_line, r.last_line);
    ASSERT_LT(r.last_line, lines.size());
    EXPECT_NE(r.excerpt.find(lines[r.first_line]), std::string::npos) << r.title;
    EXPECT_NE(r.excerpt.find(lines[r.last_line]), std::string::npos) << r.title;
    EXPECT_EQ(static_cast<size_t>(std::count(r.excerpt.begin(), r.excerpt.end(), '\n')),
              r.last_line - r.first_line + 1)
        << r.title;
  }
}

INSTANTIATE_TEST_SUITE_P(Testdata, GoldenTest, testing::ValuesIn(golden_inputs()),
                         [](const testing::TestParamInfo<fs::path>& info) {
                           std::string name = info.param.stem().string();
                           std::replace_if(
                               name.begin(), name.end(),
                               [](char c) { return !std::isalnum(static_cast<unsigned char>(c)); },
                               '_');
                           return name;
                         });

TEST(ConsoleParser, EveryKindHasAGoldenFile) {
  std::string all;
  for (const fs::path& input : golden_inputs()) {
    fs::path expected = input;
    expected.replace_extension(".expected");
    all += read_file(expected);
  }
  for (const char* kind : {"oops", "bug", "panic", "kasan", "ubsan", "lockdep", "warning",
                           "hung-task", "rcu-stall", "soft-lockup", "hard-lockup"}) {
    EXPECT_NE(all.find(std::string("kind: ") + kind + "\n"), std::string::npos) << kind;
  }
}

// Rewrites what differs between two runs of the same bug: timestamps, addresses,
// offsets, CPU ids, pids, task comm names and durations.
std::string perturb(const std::string& text, unsigned seed) {
  std::mt19937 rng(seed);
  auto hex = [&](size_t n) {
    std::string out;
    for (size_t i = 0; i < n; ++i) out += "0123456789abcdef"[rng() % 16];
    return out;
  };
  auto number = [&](int lo, int hi) {
    return std::to_string(lo + static_cast<int>(rng() % (hi - lo)));
  };
  auto replace_all = [](const std::string& in, const std::regex& re, auto&& make) {
    std::string out;
    auto begin = std::sregex_iterator(in.begin(), in.end(), re);
    size_t pos = 0;
    for (auto it = begin; it != std::sregex_iterator(); ++it) {
      out.append(in, pos, it->position() - pos);
      out += make(*it);
      pos = it->position() + it->length();
    }
    out.append(in, pos, std::string::npos);
    return out;
  };
  std::string t = text;
  t = replace_all(t, std::regex(R"(\[\s*\d+\.\d+\])"), [&](const std::smatch&) {
    return "[" + std::string(4, ' ') + number(1, 9999) + "." +
           hex(0).append(number(100000, 999999)) + "]";
  });
  t = replace_all(t, std::regex(R"(\b(ffff|0000)[0-9a-f]{12}\b)"),
                  [&](const std::smatch& m) { return m.str().substr(0, 4) + hex(12); });
  t = replace_all(t, std::regex(R"(\+0x[0-9a-f]+/0x[0-9a-f]+)"),
                  [&](const std::smatch&) { return "+0x" + hex(2) + "/0x" + hex(3); });
  t = replace_all(t, std::regex(R"((CPU: |CPU#|cpu |CPUs |CPU )\d+)"),
                  [&](const std::smatch& m) { return m.str(1) + number(0, 64); });
  t = replace_all(t, std::regex(R"((PID: |pid:|task )(\S*?)(\d+))"),
                  [&](const std::smatch& m) { return m.str(1) + m.str(2) + number(2, 40000); });
  t = replace_all(
      t, std::regex(R"((Comm: |\[|task:|task )(racer-\d+|touch|init|racer|swapper/\d+)\b)"),
      [&](const std::smatch& m) { return m.str(1) + "worker-" + number(0, 99); });
  t = replace_all(t, std::regex(R"((more than |stuck for )\d+)"),
                  [&](const std::smatch& m) { return m.str(1) + number(2, 999); });
  return t;
}

TEST(ConsoleParser, SameBugGivesSameTitleAcrossRuns) {
  size_t compared = 0;
  for (const fs::path& input : golden_inputs()) {
    std::string text = read_file(input);
    std::vector<KernelReport> base = parse_console(text);
    for (unsigned seed = 1; seed <= 3; ++seed) {
      std::string other = perturb(text, seed);
      ASSERT_NE(other, text) << input << " was not perturbed";
      std::vector<KernelReport> run = parse_console(other);
      ASSERT_EQ(run.size(), base.size()) << input << " seed " << seed;
      for (size_t i = 0; i < base.size(); ++i) {
        EXPECT_EQ(run[i].title, base[i].title) << input << " seed " << seed;
        EXPECT_EQ(run[i].kind, base[i].kind) << input << " seed " << seed;
        EXPECT_EQ(run[i].first_line, base[i].first_line) << input << " seed " << seed;
        EXPECT_EQ(run[i].last_line, base[i].last_line) << input << " seed " << seed;
        ++compared;
      }
    }
  }
  EXPECT_GT(compared, 30u);
}

// The perturbation must reach what a careless title would keep, or the test
// above proves nothing.
TEST(ConsoleParser, PerturbationChangesVolatileFields) {
  std::string line =
      "[   17.403113] WARNING: CPU: 1 PID: 231 at fs/namei.c:1742 walk_component+0x1a3/0x1b0\n"
      "[   17.405320] CPU: 1 PID: 231 Comm: racer-3 Not tainted\n"
      "[   17.405320] RBX: ffff9a3c41e2f0c0\n"
      "[   12.533967] INFO: task touch:101 blocked for more than 2 seconds.\n";
  std::string other = perturb(line, 7);
  for (const char* gone : {"17.403113", "PID: 231", "0x1a3/0x1b0", "racer-3", "ffff9a3c41e2f0c0",
                           "touch:101", "more than 2 "}) {
    EXPECT_EQ(other.find(gone), std::string::npos) << gone << " survived in " << other;
  }
  EXPECT_NE(other.find("walk_component+0x"), std::string::npos);
  EXPECT_NE(other.find("fs/namei.c:1742"), std::string::npos);
}

TEST(ConsoleParser, TitlesCarryNoVolatileFields) {
  std::regex volatile_field(R"(0x|\b[0-9a-f]{8,}\b|\bCPU|racer|touch|\d+s\b|\[\d+\])");
  for (const char* bad : {"WARNING in foo+0x1a", "BUG at ffff9a3c41e2f0c0", "soft lockup on CPU",
                          "task racer-1 hung", "stuck for 22s", "pid [123]"}) {
    EXPECT_TRUE(std::regex_search(bad, volatile_field)) << bad;  // the check can fire
  }
  for (const fs::path& input : golden_inputs()) {
    for (const KernelReport& r : parse_console(read_file(input))) {
      EXPECT_FALSE(std::regex_search(r.title, volatile_field)) << r.title << " in " << input;
      EXPECT_FALSE(r.title.empty()) << input;
    }
  }
}

TEST(ConsoleParser, TruncatedInputNeverBreaksTheParser) {
  // A VM killed mid-report leaves any prefix of a report behind. Once the call
  // trace has started, the title no longer changes.
  std::string text = read_file(kTestdata / "oops_null_deref.txt");
  const std::string full_title = parse_console(text).at(0).title;
  const size_t trace_start = text.find("Call Trace:");
  size_t stable = 0;
  for (size_t cut = 0; cut <= text.size(); cut += 7) {
    std::string_view prefix(text.data(), cut);
    size_t lines = static_cast<size_t>(std::count(prefix.begin(), prefix.end(), '\n')) + 1;
    std::vector<KernelReport> reports = parse_console(prefix);
    for (const KernelReport& r : reports) {
      ASSERT_LE(r.first_line, r.last_line);
      ASSERT_LT(r.last_line, lines);
    }
    if (cut > trace_start) {
      ASSERT_FALSE(reports.empty()) << "cut at " << cut;
      EXPECT_EQ(reports[0].title, full_title) << "cut at " << cut;
      ++stable;
    }
  }
  EXPECT_GT(stable, 100u);
}

TEST(ConsoleParser, DistantFatalExceptionIsAReportOfItsOwn) {
  std::string text = read_file(kTestdata / "warning_walk_component.txt");
  for (int i = 0; i < 400; ++i) text += "[  103.000000] leapfrog: round ok\n";
  text += "[  150.000000] Kernel panic - not syncing: Fatal exception\n";
  std::vector<KernelReport> reports = parse_console(text);
  ASSERT_EQ(reports.size(), 2u);
  EXPECT_EQ(reports[0].title, "WARNING in walk_component");
  EXPECT_FALSE(report_is_fatal(reports[0]));
  EXPECT_EQ(reports[1].kind, "panic");
  EXPECT_EQ(reports[1].title, "panic: Fatal exception");
}

TEST(ConsoleParser, NearbyFollowOnPanicFoldsIntoThePrimaryReport) {
  const std::pair<const char*, const char*> cases[] = {
      {"warning_walk_component.txt", "Fatal exception"},
      {"hard_lockup.txt", "Hard LOCKUP"},
      {"rcu_stall_detected.txt", "RCU Stall"},
      {"soft_lockup.txt", "softlockup: hung tasks"},
      {"kasan_use_after_free.txt", "KASAN: panic_on_warn set ..."},
  };
  for (const auto& [file, message] : cases) {
    std::string text = read_file(kTestdata / file);
    std::vector<KernelReport> alone = parse_console(text);
    ASSERT_EQ(alone.size(), 1u) << file;
    EXPECT_FALSE(report_is_fatal(alone[0])) << file;
    text += "[  999.000000] Kernel panic - not syncing: " + std::string(message) + "\n";
    std::vector<KernelReport> reports = parse_console(text);
    ASSERT_EQ(reports.size(), 1u) << file;
    EXPECT_EQ(reports[0].title, alone[0].title) << file;
    EXPECT_EQ(reports[0].first_line, alone[0].first_line) << file;
    EXPECT_TRUE(report_is_fatal(reports[0])) << file;
    EXPECT_NE(reports[0].excerpt.find(message), std::string::npos) << file;
  }
}

TEST(ConsoleParser, NormalisesTheSameBugFromDifferentKernelsAlike) {
  // Old and new kernels print a NULL dereference and a UBSAN report differently;
  // the title is the same.
  for (auto [old_file, new_file] :
       {std::pair{"oops_old_format_3_16.txt", "oops_null_deref.txt"},
        std::pair{"ubsan_old_format_4_19.txt", "ubsan_array_index.txt"}}) {
    std::vector<KernelReport> old_format = parse_console(read_file(kTestdata / old_file));
    std::vector<KernelReport> new_format = parse_console(read_file(kTestdata / new_file));
    ASSERT_EQ(old_format.size(), 1u) << old_file;
    ASSERT_EQ(new_format.size(), 1u) << new_file;
    EXPECT_EQ(old_format[0].title, new_format[0].title) << old_file;
  }
}

TEST(ConsoleParser, StripsPrintkPrefixes) {
  EXPECT_EQ(strip_console_prefix("<4>[   12.345678][  T123] foo bar\r"), "foo bar");
  EXPECT_EQ(strip_console_prefix("[    0.000000][    C1]  walk_component+0x1a/0x2b0"),
            "walk_component+0x1a/0x2b0");
  EXPECT_EQ(strip_console_prefix("plain"), "plain");
  EXPECT_EQ(strip_console_prefix("[ not a timestamp ] x"), "[ not a timestamp ] x");
}

TEST(ConsoleParser, EmptyInputGivesNoReport) {
  EXPECT_TRUE(parse_console("").empty());
  EXPECT_TRUE(parse_console("\n\n\r\n").empty());
}

}  // namespace
}  // namespace leapfrog::console
