#include "coordinator/console/console_parser.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
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
