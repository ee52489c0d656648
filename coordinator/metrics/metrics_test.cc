// The expositions of the coordinator's and the launcher's metrics, read by
// promtool (the consumer's own checker), which must also refuse a malformed
// exposition; the values follow the events; the launcher's endpoint answers
// over a real socket. The coordinator with its database: tests/metrics_e2e_test.cc.

#include <gtest/gtest.h>
#include <httplib.h>

#include <chrono>
#include <regex>

#include "coordinator/metrics/coordinator_metrics.h"
#include "coordinator/metrics/exposition.h"
#include "coordinator/metrics/metrics_endpoint.h"
#include "coordinator/metrics/promtool_check.h"
#include "coordinator/metrics/vm_metrics.h"
#include "leapfrog/v1/common.pb.h"

namespace leapfrog::metrics {
namespace {

using testing::promtool_check;
using testing::sample;

void expect_promtool_passes(const std::string& text) {
  const auto r = promtool_check(text);
  EXPECT_EQ(r.exit, 0) << r.output << "\n" << text;
  EXPECT_EQ(r.output, "") << text;
}

TEST(VmMetrics, CountsBootsAndFailuresAndPassesPromtool) {
  VmMetrics m("k1");
  const std::string before = m.render();
  expect_promtool_passes(before);
  EXPECT_EQ(sample(before, R"(leapfrog_vm_boots_total{kernel="k1",mode="boot"})"), 0) << before;
  EXPECT_EQ(sample(before, R"(leapfrog_vm_failures_total{kernel="k1",kind="hang"})"), 0);
  EXPECT_EQ(sample(before, R"(leapfrog_vm_boot_seconds_count{kernel="k1"})"), 0);

  m.vm_started("k1", "boot");
  m.vm_started("k1", "boot");
  m.vm_started("k1", "restore");
  m.vm_registered("k1", std::chrono::milliseconds(3500));
  m.vm_failed("k1", "kernel-crash");
  const std::string after = m.render();
  expect_promtool_passes(after);
  EXPECT_EQ(sample(after, R"(leapfrog_vm_boots_total{kernel="k1",mode="boot"})"), 2) << after;
  EXPECT_EQ(sample(after, R"(leapfrog_vm_boots_total{kernel="k1",mode="restore"})"), 1);
  EXPECT_EQ(sample(after, R"(leapfrog_vm_boot_seconds_count{kernel="k1"})"), 1);
  EXPECT_EQ(sample(after, R"(leapfrog_vm_boot_seconds_sum{kernel="k1"})"), 3.5);
  EXPECT_EQ(sample(after, R"(leapfrog_vm_boot_seconds_bucket{kernel="k1",le="3"})"), 0);
  EXPECT_EQ(sample(after, R"(leapfrog_vm_boot_seconds_bucket{kernel="k1",le="5"})"), 1);
  EXPECT_EQ(sample(after, R"(leapfrog_vm_failures_total{kernel="k1",kind="kernel-crash"})"), 1);
  EXPECT_EQ(sample(after, R"(leapfrog_vm_failures_total{kernel="k1",kind="hang"})"), 0);
}

TEST(CoordinatorMetrics, CountsLeasesReportsAndFailuresAndPassesPromtool) {
  coord::SystemClock clock;
  CoordinatorMetrics m(nullptr, clock);
  const std::string before = m.render();
  expect_promtool_passes(before);
  EXPECT_EQ(sample(before, R"(leapfrog_leases_total{kind="test"})"), 0) << before;
  EXPECT_EQ(sample(before, R"(leapfrog_outcomes_total{verdict="pass"})"), 0);
  EXPECT_EQ(sample(before, "leapfrog_serving"), 1);

  const auto t0 = CoordinatorMetrics::Steady::now();
  for (int i = 0; i < 3; ++i) m.leased(false);
  m.leased(true);
  m.reported(v1::VERDICT_PASS, coord::ReportResult::Stored, t0);
  m.reported(v1::VERDICT_PASS, coord::ReportResult::Duplicate, t0);
  m.reported(v1::VERDICT_VIOLATION, coord::ReportResult::KeptSuperseded, t0);
  m.reported(v1::VERDICT_PASS, std::nullopt, t0);
  // Launchers end VM jobs through FailAgentJob, boot failures too.
  m.vm_failed(v1::VERDICT_KERNEL_CRASH);
  m.vm_failed(v1::VERDICT_BOOT_FAILURE);
  m.registered(true);
  m.registered(false);
  m.registered(false);
  const std::string after = m.render();
  expect_promtool_passes(after);
  EXPECT_EQ(sample(after, R"(leapfrog_leases_total{kind="test"})"), 3) << after;
  EXPECT_EQ(sample(after, R"(leapfrog_leases_total{kind="build"})"), 1);
  EXPECT_EQ(sample(after, R"(leapfrog_outcomes_total{verdict="pass"})"), 1);
  EXPECT_EQ(sample(after, R"(leapfrog_outcomes_total{verdict="violation"})"), 1);
  EXPECT_EQ(sample(after, R"(leapfrog_outcomes_total{verdict="kernel-crash"})"), 1);
  EXPECT_EQ(sample(after, R"(leapfrog_outcomes_total{verdict="boot-failure"})"), 1);
  EXPECT_EQ(sample(after, R"(leapfrog_reports_total{result="stored"})"), 1);
  EXPECT_EQ(sample(after, R"(leapfrog_reports_total{result="duplicate"})"), 1);
  EXPECT_EQ(sample(after, R"(leapfrog_reports_total{result="kept-superseded"})"), 1);
  EXPECT_EQ(sample(after, R"(leapfrog_reports_total{result="error"})"), 1);
  EXPECT_EQ(sample(after, "leapfrog_report_store_seconds_count"), 4);
  EXPECT_EQ(sample(after, R"(leapfrog_vm_failures_total{verdict="kernel-crash"})"), 1);
  EXPECT_EQ(sample(after, R"(leapfrog_vm_failures_total{verdict="boot-failure"})"), 1);
  EXPECT_EQ(sample(after, R"(leapfrog_vm_failures_total{verdict="hang"})"), 0);
  EXPECT_EQ(sample(after, R"(leapfrog_agent_registrations_total{vm="true"})"), 1);
  EXPECT_EQ(sample(after, R"(leapfrog_agent_registrations_total{vm="false"})"), 2);

  EXPECT_EQ(m.not_ready(), "");
  m.set_serving(false);
  EXPECT_NE(m.not_ready(), "");
  EXPECT_EQ(sample(m.render(), "leapfrog_serving"), 0);
}

// The positive control: promtool is a checker that fires.
TEST(Promtool, RefusesAMalformedExposition) {
  coord::SystemClock clock;
  CoordinatorMetrics m(nullptr, clock);
  m.leased(false);
  const std::string good = m.render();
  expect_promtool_passes(good);
  // A label value without its closing quote: a parse error.
  const std::string series = R"(leapfrog_leases_total{kind="test"})";
  ASSERT_NE(good.find(series), std::string::npos);
  std::string broken = good;
  broken.replace(broken.find(series), series.size(), R"(leapfrog_leases_total{kind="test})");
  auto r = promtool_check(broken);
  EXPECT_NE(r.exit, 0) << broken;
  EXPECT_NE(r.output.find("error"), std::string::npos) << r.output;
  // A counter without help and without the _total suffix: lint problems.
  r = promtool_check(good + "# TYPE leapfrog_leases counter\nleapfrog_leases 1\n");
  EXPECT_NE(r.exit, 0);
  EXPECT_NE(r.output.find("_total"), std::string::npos) << r.output;
}

TEST(MetricsEndpoint, ServesTheExpositionOnLoopbackAndNothingElse) {
  MetricsEndpoint e("127.0.0.1:0", "", [] {
    return std::string("# HELP x_total x\n# TYPE x_total counter\nx_total 7\n");
  });
  ASSERT_GT(e.port(), 0);
  EXPECT_EQ(e.url(), "http://127.0.0.1:" + std::to_string(e.port()) + "/metrics");
  httplib::Client c("127.0.0.1", e.port());
  auto res = c.Get("/metrics");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
  EXPECT_EQ(res->get_header_value("Content-Type"), kContentType);
  EXPECT_EQ(sample(res->body, "x_total"), 7);
  res = c.Get("/other");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 404);
}

TEST(MetricsEndpoint, BeyondLoopbackWithoutATokenIsRefused) {
  EXPECT_THROW(MetricsEndpoint("0.0.0.0:0", "", [] { return std::string(); }), std::runtime_error);
  EXPECT_THROW(MetricsEndpoint("127.0.0.1", "", [] { return std::string(); }), std::runtime_error);
}

}  // namespace
}  // namespace leapfrog::metrics
