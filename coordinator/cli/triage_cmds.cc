#include "coordinator/cli/triage_cmds.h"
#include "common/ktap/words.h"
#include "coordinator/channel.h"

#include <google/protobuf/util/json_util.h>
#include <grpcpp/grpcpp.h>

#include <chrono>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <stdexcept>
#include <thread>

#include "coordinator/triage/actions.h"
#include "coordinator/triage/issue_report.h"
#include "leapfrog/v1/control.grpc.pb.h"
#include "leapfrog/v1/triage.grpc.pb.h"

namespace leapfrog::cli {

namespace {

std::string to_json(const google::protobuf::Message& m) {
  std::string out;
  google::protobuf::util::JsonPrintOptions opts;
  opts.preserve_proto_field_names = true;
  opts.add_whitespace = true;
  (void)google::protobuf::util::MessageToJsonString(m, &out, opts);
  return out;
}

std::string when(const google::protobuf::Timestamp& ts) {
  if (ts.seconds() == 0) return "-";
  const time_t t = ts.seconds();
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S", std::gmtime(&t));
  return buf;
}

// ISSUE_STATUS_TRIAGED -> "triaged"
std::string status_name(v1::IssueStatus s) {
  std::string n = v1::IssueStatus_Name(s);
  n = n.substr(std::string("ISSUE_STATUS_").size());
  for (auto& c : n) c = static_cast<char>(std::tolower(c));
  return n;
}

v1::IssueStatus parse_status(const std::string& text) {
  for (int s = v1::ISSUE_STATUS_NEW; s <= v1::ISSUE_STATUS_REGRESSION; ++s) {
    if (status_name(static_cast<v1::IssueStatus>(s)) == text)
      return static_cast<v1::IssueStatus>(s);
  }
  throw std::runtime_error("bad status \"" + text +
                           "\", want new, triaged, fixed, invalid, duplicate or regression");
}

std::string state_name(v1::ActionState s) {
  switch (s) {
    case v1::ACTION_STATE_RUNNING:
      return "running";
    case v1::ACTION_STATE_DONE:
      return "done";
    case v1::ACTION_STATE_FAILED:
      return "failed";
    default:
      return "?";
  }
}

std::string kernels_of(const v1::Issue& i) {
  std::string s;
  for (const auto& k : i.kernels()) s += (s.empty() ? "" : ",") + k.kernel_label();
  return s;
}

std::string rate_text(const v1::ReproRate& r) {
  char buf[160];
  std::snprintf(buf, sizeof buf, "%u/%u = %.2f [%.2f, %.2f] 95%% Wilson%s", r.reproduced(),
                r.runs(), r.rate(), r.lower(), r.upper(),
                r.other_failures()
                    ? (", " + std::to_string(r.other_failures()) + " failed otherwise").c_str()
                    : "");
  return buf;
}

void print_action(const v1::Action& a) {
  std::printf("action %lld: %s of issue %lld, %s\n", static_cast<long long>(a.id()),
              coord::triage::action_kind_name(a.kind()).c_str(), static_cast<long long>(a.issue_id()),
              state_name(a.state()).c_str());
  std::printf("  progress: %s\n", a.progress().c_str());
  if (!a.error().empty()) std::printf("  error:    %s\n", a.error().c_str());
  std::string campaigns;
  for (auto c : a.campaign_ids()) campaigns += (campaigns.empty() ? "" : ",") + std::to_string(c);
  if (!campaigns.empty()) std::printf("  campaigns: %s\n", campaigns.c_str());
  if (a.kind() == v1::ACTION_KIND_REPLAY && a.rate().runs() > 0)
    std::printf("  rate on %s: %s\n", a.kernel_label().c_str(), rate_text(a.rate()).c_str());
  if (a.kind() == v1::ACTION_KIND_BISECT) {
    const auto& b = a.bisect();
    for (const auto& s : b.steps())
      std::printf("  step %-10s %-8s %u/%u reproduced, %u failed otherwise (campaign %lld)\n",
                  s.kernel_label().c_str(), ktap::bisect_step_word(s.verdict()).c_str(),
                  s.reproduced(), s.runs(), s.other_failures(),
                  static_cast<long long>(s.campaign_id()));
    if (!b.first_bad().empty()) {
      std::printf(
          "  first bad: %s (last good %s; rate %.2f on the last bad kernel, %u runs per step)\n",
          b.first_bad().c_str(), b.last_good().c_str(), b.rate(), b.runs_per_step());
      for (const auto& k : b.skipped())
        std::printf("  skipped: %s (failed differently)\n", k.c_str());
    }
  }
  if (a.kind() == v1::ACTION_KIND_MINIMIZE) {
    for (const auto& l : a.minimize().log()) std::printf("  %s\n", l.c_str());
    if (a.state() == v1::ACTION_STATE_DONE) {
      std::printf("  minimal spec: %s\n", a.minimize().minimal_spec().ShortDebugString().c_str());
      if (!a.minimize().c_reproducer_error().empty())
        std::printf("  no C reproducer: %s\n", a.minimize().c_reproducer_error().c_str());
    }
  }
}

class Commands : public TriageCommands {
 public:
  explicit Commands(CLI::App& app) {
    issues_ =
        app.add_subcommand("issues", "failures grouped by signature, most recently seen first");
    issues_->add_option("--status", statuses_, "only this status (repeatable)");
    issues_->add_option("--limit", limit_, "most issues to list (default 100)");
    issues_->add_option("--scenario", issue_scenario_, "only issues of this scenario");
    issues_->add_option("--kind", issue_kind_,
                        "only this kind (violation, crash, hang, boot-failure)");
    issues_->add_option("--kernel", issue_kernel_, "only issues found on this kernel label");

    issue_ = app.add_subcommand("issue", "one issue: show, set its status, add a note");
    issue_->require_subcommand(1);
    show_ = issue_->add_subcommand("show", "an issue with its kernels, rates, notes and actions");
    show_->add_option("id", id_, "issue id")->required();
    status_ =
        issue_->add_subcommand("status", "set the status: new, triaged, fixed, invalid, duplicate");
    status_->add_option("id", id_, "issue id")->required();
    status_->add_option("status", status_text_, "new, triaged, fixed, invalid or duplicate")
        ->required();
    status_->add_option("--duplicate-of", duplicate_of_,
                        "the issue it duplicates (status duplicate)");
    report_ = issue_->add_subcommand(
        "report", "the issue as a report for a kernel list: Markdown, or a mail with the reproducer attached");
    report_->add_option("id", id_, "issue id")->required();
    report_->add_option("--format", report_format_, "markdown (default) or mail");
    report_->add_option("--to", report_to_, "--format mail: the To header");
    report_->add_option("--from", report_from_, "--format mail: the From header");
    report_->add_option("--link", report_link_,
                        "the dashboard's address (http://HOST:PORT): the report links the issue's page");
    report_->add_option("--out", out_, "write the report here instead of standard output");
    note_ = issue_->add_subcommand("note", "add a note");
    note_->add_option("id", id_, "issue id")->required();
    note_->add_option("text", note_text_, "the note")->required();

    replay_ = app.add_subcommand(
        "replay", "re-run an issue's (or outcome's) exact seed and parameters R times");
    replay_
        ->add_option("target", target_,
                     "ISSUE id, or OUTCOME as JOB.ATTEMPT (JOB.0: its latest attempt)")
        ->required();
    replay_->add_option("--kernel", kernel_, "kernel label (default: where it failed)");
    replay_->add_option("--runs", runs_, "runs (default 10)");
    minimize_ =
        app.add_subcommand("minimize", "shrink an issue's run while it reproduces; C reproducer");
    minimize_->add_option("issue", id_, "issue id")->required();
    minimize_->add_option("--kernel", kernel_,
                          "kernel label to run candidates on (default: where it failed)");
    minimize_->add_option("--max-runs", runs_, "most runs per candidate (default 30)");
    minimize_->add_option("--out", out_, "write the C reproducer here when done (with --wait)");
    bisect_ = app.add_subcommand("bisect", "find the first bad kernel among ordered builds");
    bisect_->add_option("issue", id_, "issue id")->required();
    bisect_->add_option("--kernels", kernels_, "K1,...,Kn in build order: first good, last bad")
        ->required()
        ->delimiter(',');
    bisect_->add_option("--max-runs", runs_, "most runs per step (default 60)");
    action_ = app.add_subcommand("action", "one triage action and its progress");
    action_->add_option("id", id_, "action id")->required();
    actions_ = app.add_subcommand("actions", "triage actions, most recent first");
    actions_->add_option("--issue", id_, "only this issue's");
    for (auto* cmd : {replay_, minimize_, bisect_, action_})
      cmd->add_flag("--wait", wait_, "wait until the action finishes, printing its progress");
    for (auto* sub :
         {issues_, issue_, show_, status_, note_, report_, replay_, minimize_, bisect_, action_, actions_})
      sub->fallthrough();
  }

  std::optional<int> run(const std::function<Endpoint()>& endpoint, bool json) override {
    if (!(issues_->parsed() || issue_->parsed() || replay_->parsed() || minimize_->parsed() ||
          bisect_->parsed() || action_->parsed() || actions_->parsed()))
      return std::nullopt;
    ep_ = endpoint();
    stub_ = v1::TriageService::NewStub(coord::coordinator_channel(ep_.address));
    json_ = json;
    if (issues_->parsed()) return list_issues();
    if (show_->parsed()) return show_issue();
    if (report_->parsed()) return report_issue();
    if (status_->parsed()) return set_status();
    if (note_->parsed()) return add_note();
    if (replay_->parsed()) return replay();
    if (minimize_->parsed()) return minimize();
    if (bisect_->parsed()) return bisect();
    if (action_->parsed()) return show_action();
    if (actions_->parsed()) return list_actions();
    return 2;
  }

 private:
  std::unique_ptr<grpc::ClientContext> ctx() const {
    auto c = std::make_unique<grpc::ClientContext>();
    c->AddMetadata("authorization", "Bearer " + ep_.token);
    c->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    return c;
  }

  int fail(const grpc::Status& s) const {
    std::fprintf(
        stderr, "error: %s\n",
        s.error_code() == grpc::StatusCode::UNAVAILABLE
            ? ("coordinator at " + ep_.address + " unavailable: " + s.error_message()).c_str()
            : s.error_message().c_str());
    return 2;
  }

  int list_issues() {
    v1::ListIssuesRequest req;
    for (const auto& s : statuses_) req.add_statuses(parse_status(s));
    req.set_scenario(issue_scenario_);
    if (!issue_kind_.empty()) {
      req.set_kind(ktap::issue_kind_from(issue_kind_));
      if (req.kind() == v1::ISSUE_KIND_UNSPECIFIED) {
        std::fprintf(stderr,
                     "error: bad --kind \"%s\", want violation, crash, hang or boot-failure\n",
                     issue_kind_.c_str());
        return 2;
      }
    }
    req.set_kernel_label(issue_kernel_);
    // Page by page until the limit or the end; a list cut short says so.
    const uint32_t limit = limit_ ? limit_ : 100;
    v1::ListIssuesResponse resp;
    bool more = true;
    while (more && static_cast<uint32_t>(resp.issues_size()) < limit) {
      req.set_limit(std::min<uint32_t>(limit - static_cast<uint32_t>(resp.issues_size()), 1000));
      v1::ListIssuesResponse page;
      if (auto s = stub_->ListIssues(ctx().get(), req, &page); !s.ok()) return fail(s);
      for (auto& i : *page.mutable_issues()) *resp.add_issues() = std::move(i);
      more = !page.next_page_token().empty();
      req.set_page_token(page.next_page_token());
    }
    if (more)
      std::fprintf(stderr, "note: more issues than --limit %u; raise it to see them\n", limit);
    if (json_) {
      std::printf("%s\n", to_json(resp).c_str());
      return 0;
    }
    std::printf("%-5s %-10s %6s %-19s %-19s %-16s %s\n", "ID", "STATUS", "COUNT", "FIRST SEEN",
                "LAST SEEN", "KERNELS", "TITLE");
    for (const auto& i : resp.issues())
      std::printf("%-5lld %-10s %6llu %-19s %-19s %-16s %s\n", static_cast<long long>(i.id()),
                  status_name(i.status()).c_str(), static_cast<unsigned long long>(i.count()),
                  when(i.first_seen()).c_str(), when(i.last_seen()).c_str(), kernels_of(i).c_str(),
                  i.title().c_str());
    return 0;
  }

  int print_issue(const v1::Issue& i) {
    if (json_) {
      std::printf("%s\n", to_json(i).c_str());
      return 0;
    }
    std::printf("issue %lld: %s\n", static_cast<long long>(i.id()), i.title().c_str());
    std::printf("  signature: %s\n", i.signature().c_str());
    std::printf("  status:    %s%s\n", status_name(i.status()).c_str(),
                i.duplicate_of() ? (" of issue " + std::to_string(i.duplicate_of())).c_str() : "");
    std::printf("  count:     %llu (first %s, last %s)\n",
                static_cast<unsigned long long>(i.count()), when(i.first_seen()).c_str(),
                when(i.last_seen()).c_str());
    for (const auto& k : i.kernels())
      std::printf("  kernel %-10s %llu failures, last %s\n", k.kernel_label().c_str(),
                  static_cast<unsigned long long>(k.count()), when(k.last_seen()).c_str());
    std::printf("  example:   outcome %lld.%u on %s: %s\n",
                static_cast<long long>(i.example_job_id()), i.example_attempt(),
                i.example_kernel().c_str(), i.example_spec().ShortDebugString().c_str());
    if (i.example_violation().kind() != v1::VIOLATION_KIND_UNSPECIFIED)
      std::printf("  violation: %s %s step %d (%s): observed %s, expected %s\n",
                  i.example_violation().op().c_str(), i.example_violation().path().c_str(),
                  i.example_violation().step(), i.example_violation().object().c_str(),
                  i.example_violation().observed().c_str(),
                  i.example_violation().expected().c_str());
    for (const auto& r : i.rates())
      std::printf("  rate on %-10s %s\n", r.kernel_label().c_str(), rate_text(r).c_str());
    for (const auto& n : i.notes())
      std::printf("  note %s: %s\n", when(n.at()).c_str(), n.text().c_str());
    for (const auto& a : i.actions())
      std::printf("  action %lld %s %s: %s\n", static_cast<long long>(a.id()),
                  coord::triage::action_kind_name(a.kind()).c_str(), state_name(a.state()).c_str(), a.progress().c_str());
    return 0;
  }

  int show_issue() {
    v1::GetIssueRequest req;
    req.set_id(id_);
    v1::Issue resp;
    if (auto s = stub_->GetIssue(ctx().get(), req, &resp); !s.ok()) return fail(s);
    return print_issue(resp);
  }

  // Gathers what the report needs: the issue, the kernels, the clean runs of
  // its scenario per kernel, and the example's console for a crash.
  int report_issue() {
    if (report_format_ != "markdown" && report_format_ != "mail") {
      std::fprintf(stderr, "error: bad --format \"%s\", want markdown or mail\n", report_format_.c_str());
      return 2;
    }
    coord::triage::IssueReportInput in;
    v1::GetIssueRequest req;
    req.set_id(id_);
    if (auto s = stub_->GetIssue(ctx().get(), req, &in.issue); !s.ok()) return fail(s);
    auto control = v1::ControlService::NewStub(coord::coordinator_channel(ep_.address));
    v1::ListKernelsResponse kernels;
    if (auto s = control->ListKernels(ctx().get(), v1::ListKernelsRequest(), &kernels); !s.ok()) return fail(s);
    in.kernels.assign(kernels.kernels().begin(), kernels.kernels().end());
    v1::ListOutcomesRequest oreq;
    oreq.set_scenario(in.issue.scenario());
    oreq.set_limit(1000);
    for (;;) {
      v1::ListOutcomesResponse page;
      if (auto s = control->ListOutcomes(ctx().get(), oreq, &page); !s.ok()) return fail(s);
      for (const auto& o : page.outcomes()) coord::triage::add_outcome(in, o);
      if (page.next_page_token().empty()) break;
      oreq.set_page_token(page.next_page_token());
    }
    if (!report_link_.empty()) in.link = coord::triage::issue_page_link(report_link_, id_);
    std::string text;
    if (report_format_ == "mail") {
      coord::triage::MailOptions mo;
      if (!report_from_.empty()) mo.from = report_from_;
      mo.to = report_to_;
      text = coord::triage::issue_report_mail(in, mo);
    } else {
      text = coord::triage::issue_report_markdown(in);
    }
    if (out_.empty()) {
      std::fwrite(text.data(), 1, text.size(), stdout);
      return 0;
    }
    std::ofstream f(out_, std::ios::binary | std::ios::trunc);
    f << text;
    if (!f.flush()) {
      std::fprintf(stderr, "error: cannot write \"%s\"\n", out_.c_str());
      return 2;
    }
    return 0;
  }

  int set_status() {
    v1::SetIssueStatusRequest req;
    req.set_id(id_);
    req.set_status(parse_status(status_text_));
    req.set_duplicate_of(duplicate_of_);
    v1::Issue resp;
    if (auto s = stub_->SetIssueStatus(ctx().get(), req, &resp); !s.ok()) return fail(s);
    return print_issue(resp);
  }

  int add_note() {
    v1::AddIssueNoteRequest req;
    req.set_id(id_);
    req.set_text(note_text_);
    v1::Issue resp;
    if (auto s = stub_->AddIssueNote(ctx().get(), req, &resp); !s.ok()) return fail(s);
    return print_issue(resp);
  }

  int replay() {
    v1::StartReplayRequest req;
    const auto dot = target_.find('.');
    try {
      size_t used = 0;
      if (dot == std::string::npos) {
        req.set_issue_id(std::stoll(target_, &used));
        if (used != target_.size()) throw std::invalid_argument("trailing");
      } else {
        req.mutable_outcome()->set_job_id(std::stoll(target_.substr(0, dot), &used));
        if (used != dot) throw std::invalid_argument("trailing");
        req.mutable_outcome()->set_attempt(
            static_cast<uint32_t>(std::stoul(target_.substr(dot + 1), &used)));
        if (used != target_.size() - dot - 1) throw std::invalid_argument("trailing");
      }
    } catch (const std::exception&) {
      throw std::runtime_error("bad target \"" + target_ +
                               "\", want an issue id (12) or an outcome JOB.ATTEMPT (345.1)");
    }
    req.set_kernel_label(kernel_);
    req.set_runs(runs_);
    v1::Action resp;
    if (auto s = stub_->StartReplay(ctx().get(), req, &resp); !s.ok()) return fail(s);
    return started(resp);
  }

  int minimize() {
    v1::StartMinimizeRequest req;
    req.set_issue_id(id_);
    req.set_kernel_label(kernel_);
    req.set_max_runs(runs_);
    v1::Action resp;
    if (auto s = stub_->StartMinimize(ctx().get(), req, &resp); !s.ok()) return fail(s);
    return started(resp);
  }

  int bisect() {
    v1::StartBisectRequest req;
    req.set_issue_id(id_);
    for (const auto& k : kernels_) req.add_kernels(k);
    req.set_max_runs(runs_);
    v1::Action resp;
    if (auto s = stub_->StartBisect(ctx().get(), req, &resp); !s.ok()) return fail(s);
    return started(resp);
  }

  int show_action() {
    v1::GetActionRequest req;
    req.set_id(id_);
    v1::Action resp;
    if (auto s = stub_->GetAction(ctx().get(), req, &resp); !s.ok()) return fail(s);
    return started(resp);
  }

  int list_actions() {
    v1::ListActionsRequest req;
    req.set_issue_id(id_);
    v1::ListActionsResponse resp;
    if (auto s = stub_->ListActions(ctx().get(), req, &resp); !s.ok()) return fail(s);
    if (!resp.next_page_token().empty())
      std::fprintf(stderr, "note: only the %d most recent actions are listed\n",
                   resp.actions_size());
    if (json_) {
      std::printf("%s\n", to_json(resp).c_str());
      return 0;
    }
    std::printf("%-6s %-9s %-6s %-8s %s\n", "ID", "KIND", "ISSUE", "STATE", "PROGRESS");
    for (const auto& a : resp.actions())
      std::printf("%-6lld %-9s %-6lld %-8s %s\n", static_cast<long long>(a.id()),
                  coord::triage::action_kind_name(a.kind()).c_str(), static_cast<long long>(a.issue_id()),
                  state_name(a.state()).c_str(), a.progress().c_str());
    return 0;
  }

  // Prints the action, after waiting for it with --wait. Exit 2 if it failed.
  int started(v1::Action a) {
    std::string last;
    while (wait_ && a.state() == v1::ACTION_STATE_RUNNING) {
      if (a.progress() != last && !json_) std::fprintf(stderr, "%s\n", a.progress().c_str());
      last = a.progress();
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
      v1::GetActionRequest req;
      req.set_id(a.id());
      if (auto s = stub_->GetAction(ctx().get(), req, &a); !s.ok()) return fail(s);
    }
    if (json_) {
      std::printf("%s\n", to_json(a).c_str());
    } else {
      print_action(a);
    }
    if (!out_.empty() && a.state() == v1::ACTION_STATE_DONE &&
        !a.minimize().c_reproducer().empty()) {
      std::ofstream f(out_);
      f << a.minimize().c_reproducer();
      if (!f) throw std::runtime_error("cannot write \"" + out_ + "\"");
      if (!json_)
        std::printf("  C reproducer: %s (cc %s && ./a.out DIR [LOOKUP_DIR] [SECONDS])\n",
                    out_.c_str(), out_.c_str());
    }
    if (a.state() == v1::ACTION_STATE_FAILED) {
      std::fprintf(stderr, "error: action %lld failed: %s\n", static_cast<long long>(a.id()),
                   a.error().c_str());
      return 2;
    }
    return 0;
  }

  CLI::App *issues_, *issue_, *show_, *status_, *note_, *report_, *replay_, *minimize_, *bisect_, *action_,
      *actions_;
  std::vector<std::string> statuses_, kernels_;
  uint32_t limit_ = 0, runs_ = 0;
  std::string issue_scenario_, issue_kind_, issue_kernel_;
  int64_t id_ = 0, duplicate_of_ = 0;
  std::string status_text_, note_text_, target_, kernel_, out_;
  std::string report_format_ = "markdown", report_to_, report_from_, report_link_;
  bool wait_ = false, json_ = false;
  Endpoint ep_;
  std::unique_ptr<v1::TriageService::Stub> stub_;
};

}  // namespace

std::unique_ptr<TriageCommands> add_triage_commands(CLI::App& app) {
  return std::make_unique<Commands>(app);
}

}  // namespace leapfrog::cli
