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

// Two points of the same testcase, mode and task count: one row of a table.
bool same_point(const ScalePoint& a, const ScalePoint& b) {
  return a.test == b.test && a.mode == b.mode && a.tasks == b.tasks;
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

namespace {

// The points of one comparison are one family (stats::adjust_for_table).
void adjust(std::vector<PointChange>& changes) {
  std::vector<stats::Change*> family;
  for (auto& c : changes) family.push_back(&c.change);
  stats::adjust_for_table(family);
}

}  // namespace

std::vector<PointChange> compare_points(const std::vector<ScalePoint>& before,
                                        const std::vector<ScalePoint>& after,
                                        const std::string& test) {
  std::vector<PointChange> out;
  for (const auto& a : after) {
    if (!test.empty() && a.test != test) continue;
    const auto b = std::find_if(before.begin(), before.end(),
                                [&](const ScalePoint& p) { return same_point(p, a); });
    if (b == before.end()) continue;
    PointChange c{a.test, a.mode, a.tasks, stats::compare(samples_of(*b), samples_of(a)), {}, {}};
    if (c.change.significance != stats::Significance::TooFewSamples && (loaded(*b) || loaded(a)))
      c.change.significance = stats::Significance::Loaded;
    out.push_back(std::move(c));
  }
  adjust(out);
  return out;
}

namespace {

struct Side {
  std::vector<double> boot_means;  // one per boot, in first-seen order
  std::vector<RunSummary> runs;
  bool loaded = false;
};

// The runs of `side` that have the point, grouped by boot.
Side side_of(const std::vector<RunPoints>& runs, const ScalePoint& key) {
  Side out;
  std::vector<std::string> boots;  // keys, parallel to sums and counts
  std::vector<double> sums;
  std::vector<int> counts;
  for (const auto& r : runs) {
    const auto p = std::find_if(r.points.begin(), r.points.end(),
                                [&](const ScalePoint& q) { return same_point(q, key); });
    if (p == r.points.end()) continue;
    RunSummary s{r.job_id, r.boot_id, stats::summarize(samples_of(*p)), loaded(*p)};
    out.loaded = out.loaded || s.loaded;
    const std::string boot = r.boot_id.empty() ? "job " + std::to_string(r.job_id) : r.boot_id;
    const auto it = std::find(boots.begin(), boots.end(), boot);
    if (it == boots.end()) {
      boots.push_back(boot);
      sums.push_back(s.samples.mean);
      counts.push_back(1);
    } else {
      sums[static_cast<size_t>(it - boots.begin())] += s.samples.mean;
      ++counts[static_cast<size_t>(it - boots.begin())];
    }
    out.runs.push_back(std::move(s));
  }
  for (size_t i = 0; i < sums.size(); ++i) out.boot_means.push_back(sums[i] / counts[i]);
  return out;
}

}  // namespace

std::vector<PointChange> compare_runs(const std::vector<RunPoints>& before,
                                      const std::vector<RunPoints>& after,
                                      const std::string& test) {
  std::vector<PointChange> out;
  std::vector<const ScalePoint*> keys;
  for (const auto& r : after)
    for (const auto& p : r.points) {
      if (!test.empty() && p.test != test) continue;
      if (std::none_of(keys.begin(), keys.end(),
                       [&](const ScalePoint* k) { return same_point(*k, p); }))
        keys.push_back(&p);
    }
  for (const ScalePoint* k : keys) {
    Side b = side_of(before, *k);
    if (b.runs.empty()) continue;
    Side a = side_of(after, *k);
    PointChange c;
    c.test = k->test;
    c.mode = k->mode;
    c.tasks = k->tasks;
    c.change = stats::compare(b.boot_means, a.boot_means);
    c.before_runs = std::move(b.runs);
    c.after_runs = std::move(a.runs);
    if (b.boot_means.size() < 2 || a.boot_means.size() < 2)
      c.change.significance = stats::Significance::TooFewRuns;
    else if (b.loaded || a.loaded)
      c.change.significance = stats::Significance::Loaded;
    out.push_back(std::move(c));
  }
  adjust(out);
  return out;
}

std::string to_text(const std::vector<PointChange>& changes, const std::string& before_label,
                    const std::string& after_label) {
  std::ostringstream out;
  char buf[256];
  std::snprintf(buf, sizeof buf, "%-15s %-9s %5s %5s %14s %7s %14s %7s %8s %19s  %s\n", "test",
                "mode", "tasks", "runs", before_label.substr(0, 14).c_str(), "±%",
                after_label.substr(0, 14).c_str(), "±%", "%change", "95% interval", "verdict");
  out << buf;
  for (const auto& c : changes) {
    const stats::Change& ch = c.change;
    // A side of one boot has no interval over boots: show its run's own.
    auto spread = [](const stats::Summary& set, const std::vector<RunSummary>& runs) {
      const stats::Summary& s = set.n == 1 && runs.size() == 1 ? runs[0].samples : set;
      return rel_pct(s.ci_high - s.mean, s.mean);
    };
    const std::string runs = c.before_runs.empty() && c.after_runs.empty()
                                 ? "-"
                                 : std::to_string(ch.before.n) + "/" + std::to_string(ch.after.n);
    // No interval of the change without two observations a side.
    char interval[40] = "-";
    if (ch.significance != stats::Significance::TooFewRuns &&
        ch.significance != stats::Significance::TooFewSamples)
      std::snprintf(interval, sizeof interval, "[%+7.1f%%, %+7.1f%%]", ch.ci_low_pct,
                    ch.ci_high_pct);
    std::snprintf(buf, sizeof buf,
                  "%-15s %-9s %5u %5s %14.0f %6.1f%% %14.0f %6.1f%% %+7.1f%% %19s  %s\n",
                  c.test.c_str(), c.mode.c_str(), c.tasks, runs.c_str(), ch.before.mean,
                  spread(ch.before, c.before_runs), ch.after.mean, spread(ch.after, c.after_runs),
                  ch.change_pct, interval, stats::to_string(ch.significance));
    out << buf;
  }
  const auto judged = std::count_if(changes.begin(), changes.end(), [](const PointChange& c) {
    return stats::judged(c.change.significance);
  });
  if (judged > 1)
    out << "significant: p below 5 % once adjusted (Benjamini-Hochberg) over the " << judged
        << " judged points\n";
  return out.str();
}

}  // namespace leapfrog
