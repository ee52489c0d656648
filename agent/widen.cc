#include "agent/widen.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <stdexcept>

#include "scenarios/rng.h"
#include "scenarios/scenario.h"

namespace leapfrog::widen {

namespace sfs = std::filesystem;

namespace {

// Points inside the mutators' critical sections; the rest are on the lookup path.
const std::set<std::string> kMutatorPoints = {"setattr_copy", "d_move", "mount_attach"};

constexpr uint32_t kProbabilities[] = {10'000, 50'000, 200'000, 500'000};
constexpr uint32_t kDelays[] = {1'000, 5'000, 20'000, 100'000};

std::string read_text(const sfs::path& p) {
  std::ifstream in(p);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Writes `text` in one write(2); "" on success, else the error's text.
std::string write_text(const sfs::path& p, const std::string& text) {
  const int fd = ::open(p.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) return std::strerror(errno);
  const ssize_t n = ::write(fd, text.data(), text.size());
  const int err = errno;
  ::close(fd);
  if (n < 0) return std::strerror(err);
  if (static_cast<size_t>(n) != text.size()) return "short write";
  return "";
}

std::string line_of(const WidenPoint& p) {
  return p.name + " " + std::to_string(p.probability_ppm) + " " + std::to_string(p.delay_ns) + " " +
         p.uid;
}

// The kernel must refuse each of these with EINVAL; a kernel that accepts
// one is not trusted with the run. Returns "" when every one was refused.
std::string check_controls(const sfs::path& dir, const std::string& point,
                           std::vector<std::string>& report) {
  struct Bad {
    std::string what;  // for the report
    sfs::path file;
    std::string text;
  };
  const std::vector<Bad> bad = {
      {point + " probability \"-1\" (control)", dir / "control", point + " -1 1000 any"},
      {point + " probability \"1000001\" (control)", dir / "control", point + " 1000001 1000 any"},
      {point + " delay_ns \"abc\" (control)", dir / "control", point + " 1000 abc any"},
      {"unknown point \"no_such_point\" (control)", dir / "control", "no_such_point 0 0 any"},
      {point + " delay_ns \"2000000\"", dir / point / "delay_ns", "2000000"},
      {point + " uid \"-1\"", dir / point / "uid", "-1"},
  };
  std::string accepted;
  for (const auto& b : bad) {
    const std::string err = write_text(b.file, b.text);
    if (err == std::strerror(EINVAL)) {
      report.push_back(b.what + ": refused (" + err + ")");
    } else {
      report.push_back(b.what + ": " +
                       (err.empty() ? "accepted" : "refused with " + err + ", want EINVAL"));
      if (accepted.empty()) accepted = b.what;
    }
  }
  return accepted;
}

}  // namespace

std::vector<WidenPoint> choose(uint64_t seed, std::vector<std::string> offered,
                               uint32_t observer_uid) {
  std::sort(offered.begin(), offered.end());
  offered.erase(std::unique(offered.begin(), offered.end()), offered.end());
  Rng rng(seed ^ 0x7769'6465'6e69'6e67ULL);  // "widening": a stream of its own
  if (offered.empty() || rng.below(4) == 0) return {};
  const size_t n = 1 + rng.below(std::min<size_t>(3, offered.size()));
  std::vector<WidenPoint> out;
  for (size_t i = 0; i < n; ++i) {
    std::swap(offered[i], offered[i + rng.below(offered.size() - i)]);
    WidenPoint p;
    p.name = offered[i];
    p.probability_ppm = kProbabilities[rng.below(std::size(kProbabilities))];
    p.delay_ns = kDelays[rng.below(std::size(kDelays))];
    p.uid = kMutatorPoints.count(p.name) ? "0" : std::to_string(observer_uid);
    out.push_back(p);
  }
  std::sort(out.begin(), out.end(),
            [](const WidenPoint& a, const WidenPoint& b) { return a.name < b.name; });
  return out;
}

Widening begin(const std::string& dir_text, const Request& request, uint64_t seed,
               uint32_t observer_uid, const std::string& kprobe_status) {
  Widening w;
  const sfs::path dir(dir_text);
  std::error_code ec;
  if (!sfs::is_directory(dir, ec)) {
    w.reason =
        "the kernel has no " + dir_text + " (not built with `leapfrog kernel build --widen`)";
    std::string why = read_text(kprobe_status);
    while (!why.empty() && std::isspace(static_cast<unsigned char>(why.back()))) why.pop_back();
    std::replace(why.begin(), why.end(), '\n', ' ');
    if (!why.empty()) w.reason += " and the kprobe module is not loaded: " + why;
    return w;
  }
  if (read_text(dir / "locked").rfind('1', 0) == 0) {
    w.reason = "locked off by leapfrog_widen=off on the kernel command line";
    return w;
  }
  std::vector<std::string> offered;
  for (const auto& e : sfs::directory_iterator(dir, ec))
    if (e.is_directory() && sfs::exists(e.path() / "probability"))
      offered.push_back(e.path().filename().string());
  std::sort(offered.begin(), offered.end());
  if (offered.empty()) {
    w.reason = dir_text + " offers no delay point";
    return w;
  }
  if (const auto err = write_text(dir / "control", "off"); !err.empty()) {
    w.reason = "cannot turn the points off through " + (dir / "control").string() + ": " + err;
    return w;
  }
  if (const auto accepted = check_controls(dir, offered.front(), w.control_checks);
      !accepted.empty()) {
    write_text(dir / "control", "off");
    w.reason = "the kernel's controls accepted a bad value (" + accepted + "): not trusted";
    return w;
  }
  std::vector<WidenPoint> points;
  switch (request.mode) {
    case Request::Mode::Off:
      w.reason = "turned off by --widen off";
      return w;
    case Request::Mode::Explicit:
      points = request.points;
      w.reason = "--widen " + request.text;
      break;
    case Request::Mode::Seed:
      points = choose(seed, offered, observer_uid);
      if (points.empty()) {
        w.reason =
            "seed " + std::to_string(seed) + " chose no widening (one seed in four runs without)";
        return w;
      }
      w.reason = "chosen by seed " + std::to_string(seed);
      break;
  }
  for (const auto& p : points) {
    if (const auto err = write_text(dir / "control", line_of(p)); !err.empty()) {
      write_text(dir / "control", "off");
      throw std::runtime_error("widening: the kernel refused \"" + line_of(p) + "\": " + err +
                               " (the kernel log says why)");
    }
  }
  w.on = true;
  w.points = points;
  return w;
}

void end(const std::string& dir_text, Widening& w) {
  if (!w.on) return;
  const sfs::path dir(dir_text);
  for (auto& p : w.points) {
    const std::string hits = read_text(dir / p.name / "hits");
    p.hits = hits.empty() ? 0 : std::stoull(hits);
    // Kernels that count their delays' length have spent_ns (0001 core).
    const std::string spent = read_text(dir / p.name / "spent_ns");
    if (!spent.empty()) p.spent_ns = std::stoull(spent);
  }
  write_text(dir / "control", "off");
}

std::vector<std::string> short_delays(const Widening& w) {
  std::vector<std::string> notes;
  for (const auto& p : w.points) {
    if (!p.spent_ns || p.hits == 0) continue;
    const long double asked = static_cast<long double>(p.hits) * p.delay_ns;
    if (static_cast<long double>(*p.spent_ns) >= 0.9L * asked) continue;
    char buf[320];
    std::snprintf(
        buf, sizeof buf,
        "widening: %s's %llu delays took %.0f ns on average, not the %u ns asked (%.0f%%): "
        "the kernel's busy-wait falls short (a miscalibrated delay loop?), so this run's "
        "windows were narrower than its seed says",
        p.name.c_str(), static_cast<unsigned long long>(p.hits),
        static_cast<double>(*p.spent_ns) / static_cast<double>(p.hits), p.delay_ns,
        100.0 * static_cast<double>(*p.spent_ns / asked));
    notes.emplace_back(buf);
  }
  return notes;
}

}  // namespace leapfrog::widen
