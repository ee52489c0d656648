#include "scenarios/widen_request.h"

#include <sstream>

#include "scenarios/scenario.h"

namespace leapfrog::widen {

Request parse_request(const std::string& text) {
  Request r;
  r.text = text;
  if (text.empty() || text == "seed") return r;
  if (text == "off") {
    r.mode = Request::Mode::Off;
    return r;
  }
  r.mode = Request::Mode::Explicit;
  std::istringstream items(text);
  for (std::string item; std::getline(items, item, ',');) {
    std::vector<std::string> f;
    std::istringstream fields(item);
    for (std::string x; std::getline(fields, x, ':');) f.push_back(x);
    if (f.size() != 4 || f[0].empty())
      throw UsageError("bad --widen item \"" + item +
                       "\", want POINT:PROBABILITY_PPM:DELAY_NS:UID (or \"seed\", \"off\")");
    WidenPoint p;
    p.name = f[0];
    // The kernel checks the values; keep them as written so it sees them.
    try {
      p.probability_ppm = static_cast<uint32_t>(std::stoul(f[1]));
      p.delay_ns = static_cast<uint32_t>(std::stoul(f[2]));
    } catch (const std::exception&) {
      throw UsageError("bad --widen item \"" + item + "\": probability and delay must be numbers");
    }
    if (std::to_string(p.probability_ppm) != f[1] || std::to_string(p.delay_ns) != f[2])
      throw UsageError("bad --widen item \"" + item +
                       "\": probability and delay must be plain numbers");
    p.uid = f[3];
    r.points.push_back(p);
  }
  if (r.points.empty())
    throw UsageError("bad --widen \"\", want seed, off or POINT:PPM:NS:UID[,...]");
  return r;
}

std::string format_request(const std::vector<WidenPoint>& points) {
  if (points.empty()) return "off";
  std::string out;
  for (const auto& p : points) {
    if (!out.empty()) out += ',';
    out += p.name + ':' + std::to_string(p.probability_ppm) + ':' + std::to_string(p.delay_ns) + ':' +
           (p.uid.empty() ? "any" : p.uid);
  }
  return out;
}

}  // namespace leapfrog::widen
