#include "coordinator/metrics/exposition.h"

#include <prometheus/text_serializer.h>

#include <cctype>
#include <sstream>

#include "leapfrog/v1/common.pb.h"
#include "leapfrog/v1/triage.pb.h"

namespace leapfrog::metrics {

namespace {

// An enum value's name without its prefix, lowercase, '-' for '_'.
std::string enum_label(const std::string& name, const std::string& prefix) {
  std::string out = name.substr(prefix.size());
  for (char& c : out)
    c = c == '_' ? '-' : static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

}  // namespace

prometheus::MetricFamily family(const std::string& name, const std::string& help,
                                prometheus::MetricType type) {
  prometheus::MetricFamily f;
  f.name = name;
  f.help = help;
  f.type = type;
  return f;
}

void add_sample(prometheus::MetricFamily& f, double value, const Labels& labels) {
  prometheus::ClientMetric m;
  for (const auto& [name, v] : labels) m.label.push_back({name, v});
  if (f.type == prometheus::MetricType::Counter) {
    m.counter.value = value;
  } else {
    m.gauge.value = value;
  }
  f.metric.push_back(std::move(m));
}

std::string serialize(const std::vector<prometheus::MetricFamily>& families) {
  std::ostringstream out;
  prometheus::TextSerializer().Serialize(out, families);
  return out.str();
}

std::string verdict_label(int verdict) {
  if (!v1::Verdict_IsValid(verdict)) return "verdict-" + std::to_string(verdict);
  return enum_label(v1::Verdict_Name(static_cast<v1::Verdict>(verdict)), "VERDICT_");
}

std::string issue_status_label(int status) {
  if (!v1::IssueStatus_IsValid(status)) return "status-" + std::to_string(status);
  return enum_label(v1::IssueStatus_Name(static_cast<v1::IssueStatus>(status)), "ISSUE_STATUS_");
}

std::vector<double> latency_buckets() {
  return {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10};
}

}  // namespace leapfrog::metrics
