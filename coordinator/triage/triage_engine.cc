// TriageEngine: the requests of triage.proto over TriageStore and Store, and
// the maintenance step. The action state machines live in actions.cc.

#include "coordinator/triage/triage_engine.h"

#include "common/ktap/words.h"
#include "coordinator/triage/spec_as_run.h"

#include <spdlog/spdlog.h>

#include <set>

#include "common/bounds.h"
#include "coordinator/triage/actions.h"
#include "coordinator/work_signal.h"

namespace leapfrog::coord::triage {

using Code = TriageError::Code;

namespace {

// `read()`, with a bad page token as the caller's InvalidArgument.
template <class Read>
auto page_or_invalid(Read&& read) -> decltype(read()) {
  try {
    return read();
  } catch (const BadPageToken& e) {
    throw TriageError(Code::InvalidArgument, e.what());
  }
}

}  // namespace

struct TriageEngine::Impl {
  Store& store;
  TriageStore& triage;
  const Clock& clock;
  WorkSignal* work;
  EngineOptions opts;

  ActionContext context() { return ActionContext{store, triage, clock, work, opts}; }

  v1::Issue need_issue(int64_t id) {
    auto i = triage.get_issue(id);
    if (!i) throw TriageError(Code::NotFound, "no issue \"" + std::to_string(id) + "\"");
    return std::move(*i);
  }

  void refuse_if_running(int64_t issue_id, v1::ActionKind kind) {
    const auto running = triage.running_actions(issue_id, kind);
    if (!running.empty()) {
      throw TriageError(Code::FailedPrecondition,
                        "issue \"" + std::to_string(issue_id) + "\" already has a running " +
                            action_kind_name(kind) + " (action \"" +
                            std::to_string(running.front()) + "\"): wait for it");
    }
  }

  // Stores the action and takes its first step at once, so its first
  // campaign is queued before the call returns.
  v1::Action start(const v1::Action& a, const std::string& machine) {
    const v1::Action created = triage.create_action(a, machine, clock.now());
    advance_one(context(), created.id());
    auto now = triage.get_action(created.id());
    return now ? *now : created;
  }
};

TriageEngine::TriageEngine(Store& store, TriageStore& triage, const Clock& clock, WorkSignal* work,
                           EngineOptions options)
    : impl_(std::make_unique<Impl>(Impl{store, triage, clock, work, options})) {}

TriageEngine::~TriageEngine() = default;

void TriageEngine::tick() {
  group_failures();
  advance_actions();
}

IngestResult TriageEngine::group_failures() {
  IngestResult total;
  for (;;) {
    const IngestResult r =
        impl_->triage.ingest_failures(outcome_signatures, impl_->opts.ingest_batch);
    total.locked_out = total.locked_out || r.locked_out;
    total.outcomes += r.outcomes;
    total.failures += r.failures;
    total.new_issues += r.new_issues;
    total.regressions += r.regressions;
    if (r.locked_out || r.outcomes < impl_->opts.ingest_batch) return total;
  }
}

void TriageEngine::advance_actions() {
  for (int64_t id : impl_->triage.all_running_actions()) {
    try {
      advance_one(impl_->context(), id);
    } catch (const StoreError&) {
      throw;
    } catch (const std::exception& e) {
      spdlog::error("triage.action_error action={} error=\"{}\"", id, e.what());
    }
  }
}

v1::ListIssuesResponse TriageEngine::list_issues(const v1::ListIssuesRequest& req) {
  IssueQuery q;
  for (int s : req.statuses()) q.statuses.push_back(static_cast<v1::IssueStatus>(s));
  q.scenario = req.scenario();
  q.kind = ktap::issue_kind_word(req.kind());
  q.kernel_label = req.kernel_label();
  q.limit = req.limit();
  q.page_token = req.page_token();
  Page<v1::Issue> page = page_or_invalid([&] { return impl_->triage.page_issues(q); });
  v1::ListIssuesResponse resp;
  for (auto& i : page.items) *resp.add_issues() = std::move(i);
  resp.set_next_page_token(page.next_page_token);
  return resp;
}

v1::Issue TriageEngine::get_issue(int64_t id) {
  v1::Issue i = impl_->need_issue(id);
  for (auto& a : impl_->triage.list_actions(id, 20)) *i.add_actions() = std::move(a);
  return i;
}

v1::Issue TriageEngine::set_issue_status(const v1::SetIssueStatusRequest& req) {
  if (req.status() == v1::ISSUE_STATUS_UNSPECIFIED || !v1::IssueStatus_IsValid(req.status()))
    throw TriageError(Code::InvalidArgument,
                      "bad issue status " + std::to_string(req.status()) +
                          ", want new, triaged, fixed, invalid or duplicate");
  impl_->need_issue(req.id());
  if (req.status() == v1::ISSUE_STATUS_DUPLICATE) {
    if (req.duplicate_of() == 0)
      throw TriageError(Code::InvalidArgument, "status duplicate needs the issue it duplicates");
    if (req.duplicate_of() == req.id())
      throw TriageError(Code::InvalidArgument,
                        "issue \"" + std::to_string(req.id()) + "\" cannot duplicate itself");
    impl_->need_issue(req.duplicate_of());
  }
  auto i = impl_->triage.set_issue_status(req.id(), req.status(), req.duplicate_of(),
                                          impl_->clock.now());
  if (!i) throw TriageError(Code::NotFound, "no issue \"" + std::to_string(req.id()) + "\"");
  spdlog::info("triage.status issue={} status={}", req.id(), v1::IssueStatus_Name(req.status()));
  return get_issue(req.id());
}

v1::Issue TriageEngine::add_issue_note(const v1::AddIssueNoteRequest& req) {
  if (req.text().empty()) throw TriageError(Code::InvalidArgument, "the note is empty");
  if (auto why = too_long("the note", req.text(), kMaxNoteBytes); !why.empty())
    throw TriageError(Code::InvalidArgument, why);
  if (!impl_->triage.add_issue_note(req.id(), req.text(), impl_->clock.now()))
    throw TriageError(Code::NotFound, "no issue \"" + std::to_string(req.id()) + "\"");
  return get_issue(req.id());
}

v1::Action TriageEngine::start_replay(const v1::StartReplayRequest& req) {
  const uint32_t runs = req.runs() ? req.runs() : impl_->opts.default_replay_runs;
  if (runs > 1000)
    throw TriageError(Code::InvalidArgument,
                      "bad runs " + std::to_string(runs) + ", want [1, 1000]");
  v1::Action a;
  a.set_kind(v1::ACTION_KIND_REPLAY);
  a.set_runs(runs);
  std::string signature;
  if (req.has_outcome()) {
    const auto ref = req.outcome();
    const std::string name = std::to_string(ref.job_id()) + "." + std::to_string(ref.attempt());
    auto o = impl_->triage.get_outcome(ref.job_id(), ref.attempt());
    if (!o) throw TriageError(Code::NotFound, "no outcome \"" + name + "\"");
    // A running campaign's outcomes are not final (a job may still be
    // retried) and its agents are busy with it: replay once it is done.
    if (auto c = impl_->store.get_campaign(o->campaign_id()); c && c->state() != v1::CAMPAIGN_STATE_DONE) {
      const uint32_t done = c->by_state().count("done") ? c->by_state().at("done") : 0;
      throw TriageError(Code::FailedPrecondition,
                        "outcome \"" + name + "\" belongs to campaign \"" + std::to_string(c->id()) +
                            "\", which is still running (" + std::to_string(done) + " of " +
                            std::to_string(c->jobs()) + " jobs done): replay it once the campaign is done");
    }
    const auto sigs = outcome_signatures(o->spec(), o->outcome());
    if (sigs.empty()) {
      throw TriageError(Code::FailedPrecondition, "outcome \"" + name + "\" ended " +
                                                      v1::Verdict_Name(o->outcome().verdict()) +
                                                      ": no failure signature to replay");
    }
    signature = sigs.front().key;
    a.set_issue_id(impl_->triage.find_issue(signature).value_or(0));
    *a.mutable_spec() = spec_as_run(o->spec(), o->outcome());
    a.set_kernel_label(req.kernel_label().empty() ? o->kernel_label() : req.kernel_label());
  } else {
    const v1::Issue issue = impl_->need_issue(req.issue_id());
    signature = issue.signature();
    a.set_issue_id(issue.id());
    *a.mutable_spec() = issue.example_spec();
    a.set_kernel_label(req.kernel_label().empty() ? issue.example_kernel() : req.kernel_label());
  }
  if (a.issue_id() != 0) impl_->refuse_if_running(a.issue_id(), v1::ACTION_KIND_REPLAY);
  a.set_progress("queued");
  return impl_->start(a, new_machine(signature));
}

v1::Action TriageEngine::start_minimize(const v1::StartMinimizeRequest& req) {
  const v1::Issue issue = impl_->need_issue(req.issue_id());
  impl_->refuse_if_running(issue.id(), v1::ACTION_KIND_MINIMIZE);
  v1::Action a;
  a.set_kind(v1::ACTION_KIND_MINIMIZE);
  a.set_issue_id(issue.id());
  a.set_runs(req.max_runs() ? req.max_runs() : impl_->opts.default_minimize_max_runs);
  a.set_kernel_label(req.kernel_label().empty() ? issue.example_kernel() : req.kernel_label());
  *a.mutable_spec() = issue.example_spec();
  *a.mutable_minimize()->mutable_minimal_spec() = issue.example_spec();
  a.set_progress("queued");
  return impl_->start(a, new_machine(issue.signature()));
}

v1::Action TriageEngine::start_bisect(const v1::StartBisectRequest& req) {
  const v1::Issue issue = impl_->need_issue(req.issue_id());
  if (req.kernels_size() < 2)
    throw TriageError(Code::InvalidArgument,
                      "bisect needs at least two kernels: the first good and the last bad");
  std::set<std::string> seen;
  for (const auto& k : req.kernels()) {
    if (k.empty()) throw TriageError(Code::InvalidArgument, "empty kernel label");
    if (!seen.insert(k).second)
      throw TriageError(Code::InvalidArgument, "kernel \"" + k + "\" is listed twice");
  }
  impl_->refuse_if_running(issue.id(), v1::ACTION_KIND_BISECT);
  v1::Action a;
  a.set_kind(v1::ACTION_KIND_BISECT);
  a.set_issue_id(issue.id());
  a.set_runs(req.max_runs() ? req.max_runs() : impl_->opts.default_bisect_max_runs);
  *a.mutable_kernels() = req.kernels();
  *a.mutable_spec() = issue.example_spec();
  a.set_progress("queued");
  return impl_->start(a, new_machine(issue.signature()));
}

v1::Action TriageEngine::get_action(int64_t id) {
  auto a = impl_->triage.get_action(id);
  if (!a) throw TriageError(Code::NotFound, "no action \"" + std::to_string(id) + "\"");
  return std::move(*a);
}

v1::ListActionsResponse TriageEngine::list_actions(const v1::ListActionsRequest& req) {
  if (req.issue_id() != 0) impl_->need_issue(req.issue_id());
  Page<v1::Action> page = page_or_invalid(
      [&] { return impl_->triage.page_actions(req.issue_id(), req.limit(), req.page_token()); });
  v1::ListActionsResponse resp;
  for (auto& a : page.items) *resp.add_actions() = std::move(a);
  resp.set_next_page_token(page.next_page_token);
  return resp;
}

}  // namespace leapfrog::coord::triage
