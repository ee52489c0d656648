#include "common/duration.h"

#include <cmath>

namespace leapfrog {

TimeNs parse_duration(const std::string& text) {
  size_t used = 0;
  double value = 0;
  try {
    value = std::stod(text, &used);
  } catch (const std::exception&) {
    throw UsageError("bad duration \"" + text + "\", want e.g. 5s, 500ms, 2m, 3h");
  }
  const std::string unit = text.substr(used);
  double scale;
  if (unit.empty() || unit == "s")
    scale = 1e9;
  else if (unit == "ms")
    scale = 1e6;
  else if (unit == "m")
    scale = 60e9;
  else if (unit == "h")
    scale = 3600e9;
  else
    throw UsageError("bad duration unit \"" + unit + "\", want ms, s, m or h");
  const double ns = value * scale;
  if (!std::isfinite(ns) || ns <= 0 || ns > static_cast<double>(kMaxDuration))
    throw UsageError("bad duration \"" + text + "\", want (0, 24h]");
  return static_cast<TimeNs>(ns);
}

}  // namespace leapfrog
