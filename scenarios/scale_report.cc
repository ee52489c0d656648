#include "scenarios/scale_report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <sstream>

namespace leapfrog {
namespace {

std::vector<double> samples_of(const ScalePoint& p) {
  return p.samples.empty() ? std::vector<double>{p.ops_per_sec} : p.samples;
}

double rel_pct(double half, double mean) {
  return mean != 0 ? 100 * half / mean : 0;
}

}  // namespace

std::string wis_csv(const std::vector<ScalePoint>& points, const std::string& test) {
  struct Row {
    const ScalePoint* processes = nullptr;
    const ScalePoint* threads = nullptr;
  };
  std::map<uint32_t, Row> rows;
  for (const auto& p : points) {
    if (p.test != test || p.tasks == 0) continue;
    Row& r = rows[p.tasks];
    (p.mode == "threads" ? r.threads : r.processes) = &p;
  }
  double one = 0;
  if (auto it = rows.find(1); it != rows.end()) {
    if (it->second.processes) one = std::max(one, std::floor(it->second.processes->ops_per_sec));
    if (it->second.threads) one = std::max(one, std::floor(it->second.threads->ops_per_sec));
  }
  std::ostringstream out;
  out << "tasks,processes,processes_idle,threads,threads_idle,linear\n";
  out << "0,0,100,0,100,0\n";
  char buf[160];
  auto avg = [](const ScalePoint* p) {
    return p ? static_cast<long long>(std::floor(p->ops_per_sec)) : -1LL;
  };
  auto idle = [](const ScalePoint* p) { return p ? p->idle_pct : -1.0; };
  for (const auto& [tasks, r] : rows) {
    std::snprintf(buf, sizeof buf, "%u,%lld,%0.2f,%lld,%0.2f,%lld\n", tasks, avg(r.processes),
                  idle(r.processes), avg(r.threads), idle(r.threads),
                  static_cast<long long>(one) * tasks);
    out << buf;
  }
  return out.str();
}

bool loaded(const ScalePoint& p) {
  return p.other_load > kLoadedCpus || p.host_load > kLoadedCpus;
}

std::vector<PointChange> compare_points(const std::vector<ScalePoint>& before,
                                        const std::vector<ScalePoint>& after,
                                        const std::string& test) {
  std::vector<PointChange> out;
  for (const auto& a : after) {
    if (!test.empty() && a.test != test) continue;
    const auto b = std::find_if(before.begin(), before.end(), [&](const ScalePoint& p) {
      return p.test == a.test && p.mode == a.mode && p.tasks == a.tasks;
    });
    if (b == before.end()) continue;
    PointChange c{a.test, a.mode, a.tasks, stats::compare(samples_of(*b), samples_of(a))};
    if (c.change.significance != stats::Significance::TooFewSamples && (loaded(*b) || loaded(a)))
      c.change.significance = stats::Significance::Loaded;
    out.push_back(std::move(c));
  }
  return out;
}

std::string to_text(const std::vector<PointChange>& changes, const std::string& before_label,
                    const std::string& after_label) {
  std::ostringstream out;
  char buf[256];
  std::snprintf(buf, sizeof buf, "%-15s %-9s %5s %14s %7s %14s %7s %8s %19s  %s\n", "test", "mode",
                "tasks", before_label.substr(0, 14).c_str(), "±%",
                after_label.substr(0, 14).c_str(), "±%", "%change", "95% interval", "verdict");
  out << buf;
  for (const auto& c : changes) {
    const stats::Change& ch = c.change;
    std::snprintf(
        buf, sizeof buf,
        "%-15s %-9s %5u %14.0f %6.1f%% %14.0f %6.1f%% %+7.1f%% [%+7.1f%%, %+7.1f%%]  %s\n",
        c.test.c_str(), c.mode.c_str(), c.tasks, ch.before.mean,
        rel_pct(ch.before.ci_high - ch.before.mean, ch.before.mean), ch.after.mean,
        rel_pct(ch.after.ci_high - ch.after.mean, ch.after.mean), ch.change_pct, ch.ci_low_pct,
        ch.ci_high_pct, stats::to_string(ch.significance));
    out << buf;
  }
  return out.str();
}

}  // namespace leapfrog
