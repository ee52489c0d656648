#pragma once
// TriageStore over PostgreSQL, on its own small connection pool (the schema is
// migration 2, applied by PgStore). Error policy as PgStore's (pg_pool.h).

#include <memory>
#include <string>

#include "coordinator/triage/triage_store.h"

namespace leapfrog::coord {
class PgPool;
}

namespace leapfrog::coord::triage {

class PgTriageStore : public TriageStore {
 public:
  // Connects lazily (libpq URL); the schema must be migrated (PgStore does it).
  explicit PgTriageStore(const std::string& url, int pool_size = 3);
  ~PgTriageStore() override;

  IngestResult ingest_failures(const SignatureFn& signatures, uint32_t batch) override;
  std::vector<v1::Issue> list_issues(const std::vector<v1::IssueStatus>& statuses,
                                     uint32_t limit) override;
  Page<v1::Issue> page_issues(const IssueQuery& query) override;
  std::optional<v1::Issue> get_issue(int64_t id) override;
  std::optional<int64_t> find_issue(const std::string& signature) override;
  std::optional<v1::Issue> set_issue_status(int64_t id, v1::IssueStatus status,
                                            int64_t duplicate_of, TimePoint now) override;
  bool add_issue_note(int64_t id, const std::string& text, TimePoint now) override;
  void put_rate(int64_t issue_id, const v1::ReproRate& rate) override;
  std::optional<v1::OutcomeRecord> get_outcome(int64_t job_id, uint32_t attempt) override;
  v1::Action create_action(const v1::Action& action, const std::string& machine,
                           TimePoint now) override;
  std::optional<v1::Action> get_action(int64_t id) override;
  std::vector<v1::Action> list_actions(int64_t issue_id, uint32_t limit) override;
  Page<v1::Action> page_actions(int64_t issue_id, uint32_t limit,
                                const std::string& page_token) override;
  std::vector<int64_t> running_actions(int64_t issue_id, v1::ActionKind kind) override;
  std::vector<int64_t> all_running_actions() override;
  bool advance_action(int64_t id, TimePoint now,
                      const std::function<void(v1::Action&, std::string&)>& step) override;

 private:
  std::unique_ptr<PgPool> pool_;
};

}  // namespace leapfrog::coord::triage
