#include "common/console/oom_kill.h"

#include <cstdlib>
#include <regex>
#include <string>

namespace leapfrog::console {

std::vector<OomKill> oom_kills_in(std::string_view text) {
  static const std::regex re(R"(Killed process (\d+) \(([^)]*)\))");
  std::vector<OomKill> out;
  size_t at = 0;
  while (at < text.size()) {
    size_t end = text.find('\n', at);
    if (end == std::string_view::npos) end = text.size();
    std::string line(text.substr(at, end - at));
    at = end + 1;
    if (line.find("Killed process ") == std::string::npos) continue;
    std::smatch m;
    if (!std::regex_search(line, m, re)) continue;
    // The message without the console's "[   12.345678] " or "<3>" before it.
    const size_t from = static_cast<size_t>(m.position(0));
    size_t start = from;
    for (const std::string prefix : {"Memory cgroup out of memory: ", "Out of memory: "}) {
      const size_t p = from >= prefix.size() ? from - prefix.size() : std::string::npos;
      if (p != std::string::npos && line.compare(p, prefix.size(), prefix) == 0) {
        start = p;
        break;
      }
    }
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.pop_back();
    out.push_back({static_cast<pid_t>(std::strtol(m[1].str().c_str(), nullptr, 10)), m[2].str(),
                   line.substr(start)});
  }
  return out;
}

}  // namespace leapfrog::console
