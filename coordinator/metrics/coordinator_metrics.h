#pragma once
// The coordinator's metrics, GET /metrics (docs/api.md):
// - counters the gRPC services bump as they work: leases, reports and the
//   outcomes they stored by verdict, the time a report took to be stored
//   (a histogram), agent registrations (VM agents apart: one per VM that
//   came up) and the VM failures launchers report;
// - gauges read from the database when scraped, at most every few seconds
//   (PgStore::stats: summaries and partial indexes, never a scan of
//   outcomes): jobs by state, stored outcomes by verdict, issues by status,
//   agents online, the schema version; and the connection pools' use;
// - whether this replica serves: the gRPC health service's state, which
//   /readyz answers too.
// Counters count what this process saw since it started (sum them over
// replicas); the database gauges are the same on every replica.

#include <prometheus/counter.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include <atomic>
#include <chrono>
#include <map>
#include <mutex>
#include <optional>
#include <string>

#include "coordinator/clock.h"
#include "coordinator/store/pg_stats.h"
#include "coordinator/store/store.h"

namespace leapfrog::coord {
class PgStore;
}

namespace leapfrog::metrics {

struct CoordinatorMetricsOptions {
  // The database is read at most this often; scrapes in between get the last read.
  std::chrono::milliseconds cache_for{5000};
  // Agents seen within this are online (HttpOptions::offline_after).
  coord::Duration offline_after = std::chrono::seconds(6);
};

class CoordinatorMetrics {
 public:
  using Steady = std::chrono::steady_clock;

  // `store` may be null: no database gauges, and ready means serving.
  CoordinatorMetrics(coord::PgStore* store, const coord::Clock& clock,
                     CoordinatorMetricsOptions opts = {});
  CoordinatorMetrics(const CoordinatorMetrics&) = delete;
  CoordinatorMetrics& operator=(const CoordinatorMetrics&) = delete;

  // ---- what the services call as they work (each an atomic add or two) ----
  // A job was leased; `build`: a kernel build job.
  void leased(bool build);
  // A ReportOutcome that arrived at `since` was answered: `result`, or
  // nullopt if the store failed.
  void reported(int verdict, std::optional<coord::ReportResult> result, Steady::time_point since);
  // An agent registered; `vm`: one running in a launcher's VM (a VM came up).
  void registered(bool vm);
  // A launcher ended a VM agent's job (FailAgentJob) with this verdict, stored.
  void vm_failed(int verdict);
  // What the gRPC health service says: the database answered at the last check.
  void set_serving(bool serving) { serving_.store(serving); }
  bool serving() const { return serving_.load(); }

  // ---- reads ----
  // "" when ready (serving, and the schema is migrated to what this
  // coordinator knows), else why not.
  std::string not_ready();
  // Every metric, in the text exposition format.
  std::string render();

 private:
  struct Snapshot {
    bool ok = false;
    std::string error;
    coord::PgStoreStats stats;
    Steady::time_point read_at{};
    bool read = false;  // read at least once
  };
  // The database counts, read again when older than cache_for (a failed
  // read is retried after a second).
  Snapshot snapshot();

  coord::PgStore* store_;
  const coord::Clock& clock_;
  CoordinatorMetricsOptions opts_;
  std::atomic<bool> serving_{true};
  prometheus::Registry registry_;
  prometheus::Counter* leases_test_;
  prometheus::Counter* leases_build_;
  std::map<int, prometheus::Counter*> outcomes_;         // by verdict
  std::map<std::string, prometheus::Counter*> reports_;  // by result
  prometheus::Histogram* report_seconds_;
  prometheus::Counter* registrations_host_;
  prometheus::Counter* registrations_vm_;
  std::map<int, prometheus::Counter*> vm_failures_;  // by verdict
  std::mutex mu_;                                    // snapshot_, and one database read at a time
  Snapshot snapshot_;
};

}  // namespace leapfrog::metrics
