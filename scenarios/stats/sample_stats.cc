#include "scenarios/stats/sample_stats.h"

#include <algorithm>
#include <boost/math/distributions/students_t.hpp>
#include <cmath>
#include <limits>
#include <numeric>

namespace leapfrog::stats {
namespace {

// The two-sided critical value of Student's t with `dof` degrees of freedom.
double t_critical(double dof, double confidence) {
  boost::math::students_t dist(dof);
  return boost::math::quantile(dist, 1 - (1 - confidence) / 2);
}

double pct_of(double x, double base) { return base != 0 ? 100 * x / base : 0; }

}  // namespace

Summary summarize(const std::vector<double>& samples, double confidence) {
  Summary s;
  s.n = samples.size();
  if (s.n == 0) return s;
  s.mean = std::accumulate(samples.begin(), samples.end(), 0.0) / static_cast<double>(s.n);
  s.ci_low = s.ci_high = s.mean;
  if (s.n < 2) return s;
  double sq = 0;
  for (double x : samples) sq += (x - s.mean) * (x - s.mean);
  s.stddev = std::sqrt(sq / static_cast<double>(s.n - 1));
  const double half = t_critical(static_cast<double>(s.n - 1), confidence) * s.stddev /
                      std::sqrt(static_cast<double>(s.n));
  s.ci_low = s.mean - half;
  s.ci_high = s.mean + half;
  return s;
}

const char* to_string(Significance s) {
  switch (s) {
    case Significance::Significant:
      return "significant";
    case Significance::WithinNoise:
      return "within noise";
    case Significance::TooFewSamples:
      return "too few samples";
    case Significance::Loaded:
      return "loaded: not judged";
    case Significance::TooFewRuns:
      return "one run: not judged";
  }
  return "?";
}

Change compare(const std::vector<double>& before, const std::vector<double>& after,
               double alpha) {
  Change c;
  c.before = summarize(before, 1 - alpha);
  c.after = summarize(after, 1 - alpha);
  const double diff = c.after.mean - c.before.mean;
  c.change_pct = pct_of(diff, c.before.mean);
  c.ci_low_pct = c.ci_high_pct = c.change_pct;
  if (c.before.n < 2 || c.after.n < 2) return c;
  const double v1 = c.before.stddev * c.before.stddev / static_cast<double>(c.before.n);
  const double v2 = c.after.stddev * c.after.stddev / static_cast<double>(c.after.n);
  const double se = std::sqrt(v1 + v2);
  if (se == 0) {
    // Both sides constant: any difference at all is beyond the noise.
    c.dof = static_cast<double>(c.before.n + c.after.n - 2);
    c.t = diff == 0 ? 0 : std::copysign(std::numeric_limits<double>::infinity(), diff);
    c.p_value = diff == 0 ? 1 : 0;
  } else {
    c.t = diff / se;
    c.dof = (v1 + v2) * (v1 + v2) /
            (v1 * v1 / static_cast<double>(c.before.n - 1) +
             v2 * v2 / static_cast<double>(c.after.n - 1));
    boost::math::students_t dist(c.dof);
    c.p_value = 2 * boost::math::cdf(boost::math::complement(dist, std::fabs(c.t)));
    const double half = t_critical(c.dof, 1 - alpha) * se;
    c.ci_low_pct = pct_of(diff - half, c.before.mean);
    c.ci_high_pct = pct_of(diff + half, c.before.mean);
  }
  c.p_adjusted = c.p_value;
  c.significance = c.p_value < alpha ? Significance::Significant : Significance::WithinNoise;
  return c;
}

std::vector<double> bh_adjust(const std::vector<double>& p) {
  const size_t m = p.size();
  std::vector<size_t> order(m);
  for (size_t i = 0; i < m; ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return p[a] < p[b]; });
  std::vector<double> out(m);
  double running = 1;
  for (size_t r = m; r-- > 0;) {  // rank r + 1, from the largest p down
    const double v = p[order[r]] * static_cast<double>(m) / static_cast<double>(r + 1);
    running = std::min(running, v);
    out[order[r]] = running;
  }
  return out;
}

bool judged(Significance s) {
  return s == Significance::Significant || s == Significance::WithinNoise;
}

void adjust_for_table(std::vector<Change*>& changes, double alpha) {
  std::vector<Change*> tested;
  std::vector<double> p;
  for (Change* c : changes)
    if (judged(c->significance)) {
      tested.push_back(c);
      p.push_back(c->p_value);
    }
  const std::vector<double> adjusted = bh_adjust(p);
  for (size_t i = 0; i < tested.size(); ++i) {
    tested[i]->p_adjusted = adjusted[i];
    tested[i]->significance =
        adjusted[i] < alpha ? Significance::Significant : Significance::WithinNoise;
  }
}

}  // namespace leapfrog::stats
