#pragma once
// Prometheus' text exposition format (version 0.0.4), written by
// prometheus-cpp's serializer, and the families built at scrape time from
// values read then (database counts, pool use) rather than kept in a
// registry.

#include <prometheus/metric_family.h>

#include <string>
#include <utility>
#include <vector>

namespace leapfrog::metrics {

// The Content-Type of an exposition.
inline constexpr const char* kContentType = "text/plain; version=0.0.4; charset=utf-8";

using Labels = std::vector<std::pair<std::string, std::string>>;

// An empty family of `type` (Gauge or Counter) with its name and help.
prometheus::MetricFamily family(const std::string& name, const std::string& help,
                                prometheus::MetricType type);
// Adds one sample with `labels` to a Gauge or Counter family.
void add_sample(prometheus::MetricFamily& f, double value, const Labels& labels = {});

// The families as text.
std::string serialize(const std::vector<prometheus::MetricFamily>& families);

// "pass", "kernel-crash", ... for a v1.Verdict; "verdict-N" for an unknown one.
std::string verdict_label(int verdict);
// "new", "triaged", ... for a v1.IssueStatus; "status-N" for an unknown one.
std::string issue_status_label(int status);

// Histogram bounds, in seconds, for latencies from 0.5 ms to 10 s.
std::vector<double> latency_buckets();

}  // namespace leapfrog::metrics
