#pragma once
// The triage engine: the one API that the gRPC TriageService, the CLI (through
// it) and the dashboard's HTTP JSON layer call. Requests and replies are the
// proto messages of leapfrog/v1/triage.proto; failures are TriageError.
//
// tick() is the maintenance step (the coordinator's maintenance loop calls it,
// never the outcome report path): it groups failed outcomes reported since
// the last tick into issues, then advances each running action one state (a
// finished campaign read, the next campaign queued). Actions are rows, so they
// survive restarts and any replica may advance them.

#include <memory>
#include <stdexcept>
#include <string>

#include "coordinator/clock.h"
#include "coordinator/store/store.h"
#include "coordinator/triage/triage_store.h"
#include "leapfrog/v1/triage.pb.h"

namespace leapfrog::coord {
class WorkSignal;
}

namespace leapfrog::coord::triage {

// An expected failure of an engine call; `code` says which (-> gRPC status,
// HTTP status).
class TriageError : public std::runtime_error {
 public:
  enum class Code { NotFound, InvalidArgument, FailedPrecondition };
  TriageError(Code code, const std::string& what) : std::runtime_error(what), code_(code) {}
  Code code() const { return code_; }

 private:
  Code code_;
};

struct EngineOptions {
  // Failed outcomes grouped per transaction.
  uint32_t ingest_batch = 500;
  // Runs of a replay when the request says 0.
  uint32_t default_replay_runs = 10;
  // Runs that measure the rate on the last bad kernel before a bisect.
  uint32_t bisect_measure_runs = 10;
  uint32_t default_bisect_max_runs = 60;
  uint32_t default_minimize_max_runs = 30;
  // Smallest iterations minimize tries.
  uint64_t min_iterations = 20;
};

class TriageEngine {
 public:
  // `work` (may be null) is notified when an action queues jobs.
  TriageEngine(Store& store, TriageStore& triage, const Clock& clock, WorkSignal* work,
               EngineOptions options = {});
  ~TriageEngine();

  // The maintenance step: group new failures, advance running actions.
  // Throws StoreError when the database is unavailable.
  void tick();
  // Groups every failed outcome past the watermark (batch by batch).
  IngestResult group_failures();
  // Advances each running action by at most one state.
  void advance_actions();

  v1::ListIssuesResponse list_issues(const v1::ListIssuesRequest& req);
  v1::Issue get_issue(int64_t id);
  v1::Issue set_issue_status(const v1::SetIssueStatusRequest& req);
  v1::Issue add_issue_note(const v1::AddIssueNoteRequest& req);
  v1::Action start_replay(const v1::StartReplayRequest& req);
  v1::Action start_minimize(const v1::StartMinimizeRequest& req);
  v1::Action start_bisect(const v1::StartBisectRequest& req);
  v1::Action get_action(int64_t id);
  v1::ListActionsResponse list_actions(const v1::ListActionsRequest& req);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace leapfrog::coord::triage
