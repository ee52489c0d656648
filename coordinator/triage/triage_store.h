#pragma once
// What triage keeps, behind one interface: issues (grouped failures), their
// kernels, notes and reproduction rates, and the actions (replay, minimize,
// bisect) with their state. PostgreSQL implementation: pg_triage_store.h.
// Like Store, every method is safe against callers in other processes (two
// coordinator replicas): grouping holds a lock, actions are advanced under a
// row lock. Throws StoreError (coordinator/store/store.h).

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "coordinator/clock.h"
#include "coordinator/store/store.h"
#include "coordinator/triage/signature.h"
#include "leapfrog/v1/triage.pb.h"

namespace leapfrog::coord::triage {

// Signatures of a failed outcome (signature.h's outcome_signatures in production).
using SignatureFn =
    std::function<std::vector<Signature>(const v1::ScenarioSpec&, const v1::Outcome&)>;

// Campaigns created by actions are named with this prefix; their outcomes are
// not grouped into issues (replays would inflate the counts).
inline constexpr const char* kActionCampaignPrefix = "triage/";

// What ingest_failures did.
struct IngestResult {
  bool locked_out = false;  // another replica is grouping; nothing done
  uint32_t outcomes = 0;    // failed outcomes read past the watermark
  uint32_t failures = 0;    // (outcome, signature) pairs counted into issues
  uint32_t new_issues = 0;
  uint32_t regressions = 0;  // FIXED issues reopened
};

// One page of issues (TriageStore::page_issues): every filter is applied
// before the limit; empty fields do not filter.
struct IssueQuery {
  std::vector<v1::IssueStatus> statuses;
  std::string scenario;
  std::string kind;
  std::string kernel_label;  // found on this kernel
  uint32_t limit = 0;        // kIssuePage resolves it
  std::string page_token;
};

inline constexpr PageLimits kIssuePage{100, 1000};
inline constexpr PageLimits kActionPage{50, 500};

class TriageStore {
 public:
  virtual ~TriageStore() = default;

  // ---- grouping (maintenance) ----
  // Reads up to `batch` failed outcomes after the stored watermark (by
  // outcomes.seq), groups each of their signatures into an issue (new, or
  // count + 1, last seen, kernels), reopens FIXED issues that fail on a
  // kernel added after the fix (or, for a label never registered as a kernel,
  // in an outcome reported after the fix) as REGRESSION, and moves the
  // watermark, all in one transaction under an advisory lock (a second
  // replica gets locked_out instead of waiting).
  virtual IngestResult ingest_failures(const SignatureFn& signatures, uint32_t batch) = 0;

  // ---- issues ----
  // Most recently seen first; empty statuses: all. Without rates and actions.
  virtual std::vector<v1::Issue> list_issues(const std::vector<v1::IssueStatus>& statuses,
                                             uint32_t limit) = 0;
  // One page of the issues matching `query`, most recently seen first (then
  // by id), with their kernels; no example violation, notes, rates or
  // actions. Throws BadPageToken for a token of another list.
  virtual Page<v1::Issue> page_issues(const IssueQuery& query) = 0;
  // With kernels, notes and rates (not actions); nullopt if unknown.
  virtual std::optional<v1::Issue> get_issue(int64_t id) = 0;
  // The issue with that signature key, if any.
  virtual std::optional<int64_t> find_issue(const std::string& signature) = 0;
  // Sets the status (FIXED also sets fixed_at = now); nullopt if unknown.
  // duplicate_of is kept for DUPLICATE only.
  virtual std::optional<v1::Issue> set_issue_status(int64_t id, v1::IssueStatus status,
                                                    int64_t duplicate_of, TimePoint now) = 0;
  // Appends a note; false if the issue is unknown.
  virtual bool add_issue_note(int64_t id, const std::string& text, TimePoint now) = 0;
  // Replaces the rate of (issue, rate.kernel_label).
  virtual void put_rate(int64_t issue_id, const v1::ReproRate& rate) = 0;

  // ---- outcomes ----
  // One stored outcome with its spec, kernel and violations; nullopt if unknown.
  virtual std::optional<v1::OutcomeRecord> get_outcome(int64_t job_id, uint32_t attempt) = 0;

  // ---- actions ----
  // Stores a new RUNNING action (id, times set here) with the engine's
  // private state `machine`; returns it.
  virtual v1::Action create_action(const v1::Action& action, const std::string& machine,
                                   TimePoint now) = 0;
  virtual std::optional<v1::Action> get_action(int64_t id) = 0;
  // Most recent first; issue 0: all.
  virtual std::vector<v1::Action> list_actions(int64_t issue_id, uint32_t limit) = 0;
  // One page of list_actions. Throws BadPageToken for a token of another list.
  virtual Page<v1::Action> page_actions(int64_t issue_id, uint32_t limit,
                                        const std::string& page_token) = 0;
  // RUNNING actions of an issue of one kind.
  virtual std::vector<int64_t> running_actions(int64_t issue_id, v1::ActionKind kind) = 0;
  // Ids of every RUNNING action, oldest first.
  virtual std::vector<int64_t> all_running_actions() = 0;
  // Locks action `id` (skipping it if another caller holds it) and calls
  // `step(action, machine)`, then stores both as step left them, in one
  // transaction. False if locked elsewhere or unknown.
  virtual bool advance_action(int64_t id, TimePoint now,
                              const std::function<void(v1::Action&, std::string&)>& step) = 0;
};

}  // namespace leapfrog::coord::triage
