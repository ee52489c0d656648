#pragma once
// Tests: an exposition through `promtool check metrics` (Debian's prometheus
// package), and the value of one series in an exposition.

#include <stdlib.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>

namespace leapfrog::metrics::testing {

struct PromtoolResult {
  int exit = -1;       // 0: it parsed and passed the lint; 1: parse error; 3: lint problems
  std::string output;  // what promtool said (empty when it passed)
};

// Runs `promtool check metrics` on `text`.
inline PromtoolResult promtool_check(const std::string& text) {
  char path[] = "/tmp/leapfrog-exposition-XXXXXX";
  const int fd = mkstemp(path);
  if (fd < 0) return {-1, "mkstemp failed"};
  ::close(fd);
  std::ofstream(path) << text;
  PromtoolResult r;
  const std::string cmd = std::string("promtool check metrics < ") + path + " 2>&1";
  if (FILE* p = popen(cmd.c_str(), "r")) {
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof(buf), p)) > 0) r.output.append(buf, n);
    const int status = pclose(p);
    r.exit = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }
  ::unlink(path);
  return r;
}

// The value of `series` (name and labels exactly as exposed, e.g.
// `leapfrog_jobs{state="done"}`), or nullopt if no line has it.
inline std::optional<double> sample(const std::string& text, const std::string& series) {
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.size() > series.size() && line.compare(0, series.size(), series) == 0 &&
        line[series.size()] == ' ')
      return std::stod(line.substr(series.size() + 1));
  }
  return std::nullopt;
}

}  // namespace leapfrog::metrics::testing
