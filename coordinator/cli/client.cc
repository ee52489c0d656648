#include "coordinator/cli/client.h"
#include "coordinator/channel.h"

#include <filesystem>

#include <google/protobuf/util/json_util.h>
#include <grpcpp/grpcpp.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <thread>

#include "common/duration.h"
#include "common/kernel/build_file.h"
#include "common/kernel/kernel_build.h"
#include "common/ktap/words.h"
#include "common/proto_time.h"

namespace leapfrog::cli {

using nlohmann::json;

static std::string read_first_line(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  if (!in || !std::getline(in, line)) return "";
  while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.pop_back();
  return line;
}

Endpoint resolve_endpoint(const std::string& address, const std::string& token_file, const std::string& data_dir) {
  Endpoint ep;
  ep.address = address.empty() ? read_first_line(data_dir + "/address") : address;
  if (ep.address.empty())
    throw std::runtime_error("no coordinator address: pass --coordinator HOST:PORT, or --data-dir of a running "
                             "`leapfrog up` (looked in \"" + data_dir + "/address\")");
  if (address.empty()) ep.data_dir = data_dir;
  const std::string tf = token_file.empty() ? data_dir + "/token" : token_file;
  ep.token = read_first_line(tf);
  if (ep.token.empty()) throw std::runtime_error("no token: cannot read \"" + tf + "\" (pass --token-file)");
  return ep;
}

// What --source names for a builder: a path here under one of `roots`
// becomes its name relative to that root; a name that is no path here is
// sent as it is (the builder resolves it under its own roots).
static std::string source_name(const std::string& source, std::vector<std::string> roots) {
  namespace sfs = std::filesystem;
  if (roots.empty()) roots = kbuild::default_source_roots();
  std::error_code ec;
  if (!sfs::exists(source, ec)) {
    if (source.front() == '/')
      throw std::runtime_error("--source \"" + source + "\": no such file or folder");
    if (auto why = kbuild::source_name_problem(source); !why.empty())
      throw std::runtime_error("--source: " + why);
    return source;  // a name on the builder
  }
  const sfs::path real = sfs::canonical(source, ec);
  std::string tried;
  for (const auto& root : roots) {
    const sfs::path real_root = sfs::canonical(root, ec);
    tried += (tried.empty() ? "" : ", ") + root;
    if (ec) continue;
    const sfs::path rel = real.lexically_relative(real_root);
    if (!rel.empty() && rel != "." && *rel.begin() != "..") return rel.string();
  }
  throw std::runtime_error("--source \"" + source + "\" is under no source root (" + tried +
                           "): a builder takes sources only from its --source-root folders; pass "
                           "--source-root DIR here and to the builder");
}

v1::CampaignSpec to_spec(const CampaignFlags& f) {
  v1::CampaignSpec spec;
  spec.set_name(f.name);
  for (const auto& s : f.scenarios) spec.add_scenarios(s);
  for (const auto& s : f.filesystems) spec.add_filesystems(s);
  for (const auto& s : f.kernels) spec.add_kernels(s);
  spec.set_seeds(f.seeds);
  spec.set_first_seed(f.first_seed);
  TimeNs ns = 0;
  try {
    ns = parse_duration(f.duration);
  } catch (const UsageError& e) {
    throw std::runtime_error(e.what());
  }
  spec.mutable_duration()->set_seconds(ns / 1'000'000'000);
  spec.mutable_duration()->set_nanos(static_cast<int32_t>(ns % 1'000'000'000));
  spec.set_iterations(f.iterations);
  spec.set_observers(f.observers);
  spec.set_align(f.align == "seed" ? "" : f.align);
  if (f.pin == "on")
    spec.set_pin(v1::CPU_PINNING_ON);
  else if (f.pin == "off")
    spec.set_pin(v1::CPU_PINNING_OFF);
  else if (!f.pin.empty() && f.pin != "seed")
    throw std::runtime_error("bad --pin \"" + f.pin + "\", want on, off or seed");
  spec.set_widen(f.widen == "seed" ? "" : f.widen);
  spec.set_max_attempts(f.max_attempts);
  if (f.build_label.empty()) {
    if (!f.build_source.empty() || !f.build_patches.empty() || !f.build_configs.empty() || !f.build_cmdline.empty())
      throw std::runtime_error("--source, --patch, --config and --kernel-cmdline describe a build: add --build LABEL");
  } else {
    // Patches and fragments travel as content; the source is named relative
    // to the builder's source roots. Checked here while the user can still
    // fix them (builder and CLI usually share a machine).
    auto read = [](const std::string& p, const char* flag) {
      std::error_code ec;
      if (!std::filesystem::is_regular_file(p, ec))
        throw std::runtime_error(std::string(flag) + " \"" + p + "\": no such file");
      try {
        return kbuild::read_input_file(p, flag);
      } catch (const kbuild::BuildError& e) {
        throw std::runtime_error(std::string(flag) + ": " + e.what());
      }
    };
    auto file = [](v1::BuildFile* out, const kbuild::InputFile& in) {
      out->set_name(in.name);
      out->set_content(in.content);
      out->set_sha256(kbuild::sha256_hex(in.content));
    };
    if (f.build_source.empty())
      throw std::runtime_error("--build " + f.build_label + ": --source (a kernel source folder or tarball) is required");
    v1::KernelBuild* b = spec.add_builds();
    b->set_label(f.build_label);
    b->set_source(source_name(f.build_source, f.build_source_roots));
    for (const auto& p : f.build_patches) file(b->add_patch_files(), read(p, "--patch"));
    for (const auto& c : f.build_configs) file(b->add_config_files(), read(c, "--config"));
    b->set_cmdline(f.build_cmdline);
  }
  for (const auto& p : f.params) {
    const auto eq = p.find('=');
    if (eq == std::string::npos || eq == 0) throw std::runtime_error("bad --param \"" + p + "\", want NAME=VALUE");
    try {
      size_t used = 0;
      const long long v = std::stoll(p.substr(eq + 1), &used);
      if (used != p.size() - eq - 1) throw std::invalid_argument("trailing");
      (*spec.mutable_params())[p.substr(0, eq)] = v;
    } catch (const std::exception&) {
      throw std::runtime_error("bad --param \"" + p + "\": value must be an integer");
    }
  }
  return spec;
}

static json to_json(const google::protobuf::Message& m) {
  std::string out;
  google::protobuf::util::JsonPrintOptions opts;
  opts.preserve_proto_field_names = true;
  (void)google::protobuf::util::MessageToJsonString(m, &out, opts);
  return json::parse(out);
}

static std::string when(const google::protobuf::Timestamp& ts) {
  if (ts.seconds() == 0) return "-";
  const time_t t = ts.seconds();
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S", std::gmtime(&t));
  return buf;
}

static std::string verdict_name(v1::Verdict v) {
  // A value this CLI does not know (a newer coordinator, or one stored before
  // verdicts were checked) is shown by number.
  if (!v1::Verdict_IsValid(v)) return "verdict-" + std::to_string(static_cast<int>(v));
  std::string n = v1::Verdict_Name(v);
  n = n.substr(std::string("VERDICT_").size());
  for (auto& c : n) c = c == '_' ? '-' : static_cast<char>(std::tolower(c));
  return n;
}

Client::Client(const Endpoint& ep) : ep_(ep) {
  stub_ = v1::ControlService::NewStub(coord::coordinator_channel(ep.address));
}

std::unique_ptr<grpc::ClientContext> Client::ctx() const {
  auto c = std::make_unique<grpc::ClientContext>();
  c->AddMetadata("authorization", "Bearer " + ep_.token);
  c->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  return c;
}

int Client::fail(const grpc::Status& s) const {
  std::fprintf(stderr, "error: %s (%s)\n", s.error_message().c_str(),
               s.error_code() == grpc::StatusCode::UNAVAILABLE ? ("coordinator at " + ep_.address + " unavailable").c_str()
                                                               : ("code " + std::to_string(s.error_code())).c_str());
  return 2;
}

static void print_campaign_row(const v1::Campaign& c) {
  std::string verdicts;
  for (const auto& [k, v] : c.by_verdict()) verdicts += (verdicts.empty() ? "" : " ") + k + "=" + std::to_string(v);
  std::printf("%-6lld %-20s %-8s %6u %8u %10llu  %s\n", static_cast<long long>(c.id()), c.spec().name().c_str(),
              c.state() == v1::CAMPAIGN_STATE_DONE ? "done" : "running", c.jobs(),
              c.by_state().count("done") ? c.by_state().at("done") : 0u, static_cast<unsigned long long>(c.violations()),
              verdicts.c_str());
}

static json campaign_summary(const v1::Campaign& c) {
  json by_verdict = json::object();
  for (const auto& [k, v] : c.by_verdict()) by_verdict[k] = v;
  const uint32_t done = c.by_state().count("done") ? c.by_state().at("done") : 0;
  return json{
      {"campaign", c.id()},
      {"name", c.spec().name()},
      {"state", c.state() == v1::CAMPAIGN_STATE_DONE ? "done" : "running"},
      {"jobs", c.jobs()},
      {"outcomes", done},
      {"violations", c.violations()},
      {"by_verdict", by_verdict},
      {"warnings", json(std::vector<std::string>(c.warnings().begin(), c.warnings().end()))}};
}

// Campaign::warnings on stderr, each once per call of the verb (`printed`).
static void print_warnings(const v1::Campaign& c, std::set<std::string>& printed) {
  for (const auto& w : c.warnings())
    if (printed.insert(w).second)
      std::fprintf(stderr, "warning: campaign %lld: %s\n", static_cast<long long>(c.id()),
                   w.c_str());
}

void Client::reread_address() {
  if (ep_.data_dir.empty()) return;
  const std::string now = read_first_line(ep_.data_dir + "/address");
  if (now.empty() || now == ep_.address) return;
  ep_.address = now;
  stub_ = v1::ControlService::NewStub(coord::coordinator_channel(now));
}

int Client::wait_for(int64_t id, bool json_out, std::set<std::string> warned,
                     std::chrono::milliseconds timeout) {
  const bool tty = isatty(1) && !json_out;
  const auto give_up = std::chrono::steady_clock::now() + timeout;
  uint32_t done = 0, jobs = 0;
  for (;;) {
    if (timeout.count() > 0 && std::chrono::steady_clock::now() >= give_up) {
      if (tty) std::printf("\n");
      std::fprintf(stderr, "error: campaign %lld not done after %lld ms (%u of %u jobs done)\n",
                   static_cast<long long>(id), static_cast<long long>(timeout.count()), done, jobs);
      return 2;
    }
    v1::GetCampaignRequest req;
    req.set_id(id);
    v1::Campaign c;
    auto context = ctx();
    if (timeout.count() > 0) {
      // No call outlives the deadline either.
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          give_up - std::chrono::steady_clock::now());
      if (left < std::chrono::seconds(30))
        context->set_deadline(std::chrono::system_clock::now() + left +
                              std::chrono::milliseconds(1));
    }
    const grpc::Status s = stub_->GetCampaign(context.get(), req, &c);
    if (!s.ok()) {
      if (s.error_code() == grpc::StatusCode::UNAVAILABLE ||
          s.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED) {
        // The coordinator may be restarting, perhaps on another port.
        reread_address();
        std::this_thread::sleep_for(std::chrono::milliseconds(500));
        continue;
      }
      return fail(s);
    }
    done = c.by_state().count("done") ? c.by_state().at("done") : 0;
    jobs = c.jobs();
    if (std::any_of(c.warnings().begin(), c.warnings().end(),
                    [&](const auto& w) { return !warned.count(w); })) {
      if (tty) std::printf("\n");
      std::fflush(stdout);
      print_warnings(c, warned);
    }
    if (tty) {
      const int width = 40;
      const int filled = c.jobs() ? static_cast<int>(static_cast<uint64_t>(width) * done / c.jobs()) : width;
      std::printf("\r[%s%s] %u/%u jobs, %llu violations ", std::string(filled, '#').c_str(),
                  std::string(width - filled, '.').c_str(), done, c.jobs(),
                  static_cast<unsigned long long>(c.violations()));
      std::fflush(stdout);
    }
    if (c.state() == v1::CAMPAIGN_STATE_DONE) {
      if (tty) std::printf("\n");
      if (json_out) {
        std::cout << campaign_summary(c).dump() << std::endl;
      } else {
        std::printf("%-6s %-20s %-8s %6s %8s %10s  %s\n", "id", "name", "state", "jobs", "done", "violations",
                    "verdicts");
        print_campaign_row(c);
      }
      return 0;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
  }
}

int Client::campaign_run(const CampaignFlags& f, bool wait, bool json_out,
                         std::chrono::milliseconds timeout) {
  v1::CreateCampaignRequest req;
  *req.mutable_spec() = to_spec(f);
  v1::Campaign c;
  auto context = ctx();
  const grpc::Status s = stub_->CreateCampaign(context.get(), req, &c);
  if (!s.ok()) return fail(s);
  std::set<std::string> warned;
  print_warnings(c, warned);
  if (wait) return wait_for(c.id(), json_out, std::move(warned), timeout);
  if (json_out)
    std::cout << campaign_summary(c).dump() << std::endl;
  else
    std::printf("campaign %lld queued: %u jobs\n", static_cast<long long>(c.id()), c.jobs());
  return 0;
}

int Client::campaign_list(uint32_t limit, bool json_out) {
  v1::ListCampaignsRequest req;
  v1::ListCampaignsResponse resp;
  bool more = true;
  while (more && static_cast<uint32_t>(resp.campaigns_size()) < limit) {
    req.set_limit(std::min<uint32_t>(limit - static_cast<uint32_t>(resp.campaigns_size()), 500));
    v1::ListCampaignsResponse page;
    auto context = ctx();
    const grpc::Status s = stub_->ListCampaigns(context.get(), req, &page);
    if (!s.ok()) return fail(s);
    for (auto& c : *page.mutable_campaigns()) *resp.add_campaigns() = std::move(c);
    more = !page.next_page_token().empty();
    req.set_page_token(page.next_page_token());
  }
  if (more)
    std::fprintf(stderr, "note: more campaigns than --limit %u; raise it to see them\n", limit);
  if (json_out) {
    json out = json::array();
    for (const auto& c : resp.campaigns()) out.push_back(campaign_summary(c));
    std::cout << out.dump(2) << std::endl;
    return 0;
  }
  std::printf("%-6s %-20s %-8s %6s %8s %10s  %s\n", "id", "name", "state", "jobs", "done", "violations", "verdicts");
  for (const auto& c : resp.campaigns()) print_campaign_row(c);
  return 0;
}

int Client::campaign_show(int64_t id, bool json_out) {
  v1::GetCampaignRequest req;
  req.set_id(id);
  v1::Campaign c;
  auto context = ctx();
  grpc::Status s = stub_->GetCampaign(context.get(), req, &c);
  if (!s.ok()) return fail(s);
  v1::ListJobsRequest jreq;
  jreq.set_campaign_id(id);
  v1::ListJobsResponse jobs;
  do {  // every page
    v1::ListJobsResponse page;
    auto context2 = ctx();
    s = stub_->ListJobs(context2.get(), jreq, &page);
    if (!s.ok()) return fail(s);
    for (auto& j : *page.mutable_jobs()) *jobs.add_jobs() = std::move(j);
    jreq.set_page_token(page.next_page_token());
  } while (!jreq.page_token().empty());
  if (json_out) {
    json out = to_json(c);
    out["jobs_detail"] = to_json(jobs)["jobs"];
    std::cout << out.dump(2) << std::endl;
    return 0;
  }
  std::printf("%-6s %-20s %-8s %6s %8s %10s  %s\n", "id", "name", "state", "jobs", "done", "violations", "verdicts");
  print_campaign_row(c);
  std::fflush(stdout);
  std::set<std::string> warned;
  print_warnings(c, warned);
  std::printf("\n%-8s %-16s %-12s %-8s %-6s %-7s %-8s %-14s %s\n", "job", "scenario", "fs", "kernel", "seed", "state",
              "attempt", "verdict", "reason");
  for (const auto& j : jobs.jobs()) {
    const char* state = j.state() == v1::JOB_STATE_DONE      ? "done"
                        : j.state() == v1::JOB_STATE_LEASED  ? "leased"
                        : j.state() == v1::JOB_STATE_WAITING ? "waiting"
                                                             : "queued";
    std::printf("%-8lld %-16s %-12s %-8s %-6llu %-7s %-8u %-14s %s\n", static_cast<long long>(j.job_id()),
                j.spec().scenario().c_str(), j.spec().fs().c_str(), j.kernel_label().c_str(),
                static_cast<unsigned long long>(j.spec().seed()), state, j.attempt(),
                j.state() == v1::JOB_STATE_DONE ? verdict_name(j.verdict()).c_str() : "-", j.reason().c_str());
  }
  // Build jobs and what the jobs of rebuilt kernels need.
  for (const auto& j : jobs.jobs()) {
    if (!j.has_build()) continue;
    std::printf("\nbuild job %lld: kernel %s from %s (%d patches)\n", static_cast<long long>(j.job_id()),
                j.build().label().c_str(), j.build().source().c_str(), j.build().patch_files_size());
    for (const auto& p : j.build().patch_files())
      std::printf("  patch %s %s\n", p.name().c_str(), p.sha256().substr(0, 12).c_str());
    if (j.state() == v1::JOB_STATE_DONE)
      std::printf("  %s%s%s\n", verdict_name(j.verdict()).c_str(), j.reason().empty() ? "" : ": ", j.reason().c_str());
    else
      std::printf("  %s\n", j.state() == v1::JOB_STATE_LEASED ? "building (leased by a builder agent)"
                                                              : "queued: waiting for a builder agent (connect --builder)");
    for (const auto& t : jobs.jobs())
      if (!t.has_build() && t.kernel_label() == j.build().label() && !t.release().empty()) {
        std::printf("  jobs on %s run on agents whose uname -r is %s\n", t.kernel_label().c_str(), t.release().c_str());
        break;
      }
  }
  return 0;
}

int Client::schedule_add(const std::string& name, const std::string& cron, const CampaignFlags& f, bool json_out) {
  v1::AddScheduleRequest req;
  req.set_name(name);
  req.set_cron(cron);
  *req.mutable_campaign() = to_spec(f);
  v1::Schedule s;
  auto context = ctx();
  const grpc::Status st = stub_->AddSchedule(context.get(), req, &s);
  if (!st.ok()) return fail(st);
  if (json_out)
    std::cout << to_json(s).dump() << std::endl;
  else
    std::printf("schedule %lld \"%s\" (%s) next run %s UTC\n", static_cast<long long>(s.id()), s.name().c_str(),
                s.cron().c_str(), when(s.next_run()).c_str());
  return 0;
}

int Client::schedule_list(bool json_out) {
  // Page by page, to the end.
  v1::ListSchedulesRequest req;
  v1::ListSchedulesResponse resp;
  do {
    v1::ListSchedulesResponse page;
    auto context = ctx();
    const grpc::Status st = stub_->ListSchedules(context.get(), req, &page);
    if (!st.ok()) return fail(st);
    for (auto& s : *page.mutable_schedules()) *resp.add_schedules() = std::move(s);
    req.set_page_token(page.next_page_token());
  } while (!req.page_token().empty());
  if (json_out) {
    std::cout << to_json(resp)["schedules"].dump(2) << std::endl;
    return 0;
  }
  std::printf("%-6s %-20s %-16s %-8s %-20s %-20s\n", "id", "name", "cron", "enabled", "next run (UTC)", "last run");
  for (const auto& s : resp.schedules())
    std::printf("%-6lld %-20s %-16s %-8s %-20s %-20s\n", static_cast<long long>(s.id()), s.name().c_str(),
                s.cron().c_str(), s.enabled() ? "yes" : "no", when(s.next_run()).c_str(), when(s.last_run()).c_str());
  return 0;
}

int Client::schedule_enable(int64_t id, bool enabled, bool json_out) {
  v1::SetScheduleEnabledRequest req;
  req.set_id(id);
  req.set_enabled(enabled);
  v1::Schedule s;
  auto context = ctx();
  const grpc::Status st = stub_->SetScheduleEnabled(context.get(), req, &s);
  if (!st.ok()) return fail(st);
  if (json_out)
    std::cout << to_json(s).dump() << std::endl;
  else
    std::printf("schedule %lld %s\n", static_cast<long long>(id), enabled ? "enabled" : "disabled");
  return 0;
}

int Client::schedule_remove(int64_t id) {
  v1::RemoveScheduleRequest req;
  req.set_id(id);
  v1::RemoveScheduleResponse resp;
  auto context = ctx();
  const grpc::Status st = stub_->RemoveSchedule(context.get(), req, &resp);
  if (!st.ok()) return fail(st);
  std::printf("schedule %lld removed\n", static_cast<long long>(id));
  return 0;
}

int Client::agents(bool json_out) {
  // Page by page, to the end.
  v1::ListAgentsRequest req;
  v1::ListAgentsResponse resp;
  do {
    v1::ListAgentsResponse page;
    auto context = ctx();
    const grpc::Status st = stub_->ListAgents(context.get(), req, &page);
    if (!st.ok()) return fail(st);
    for (auto& a : *page.mutable_agents()) *resp.add_agents() = std::move(a);
    req.set_page_token(page.next_page_token());
  } while (!req.page_token().empty());
  if (json_out) {
    std::cout << to_json(resp)["agents"].dump(2) << std::endl;
    return 0;
  }
  std::printf("%-10s %-24s %-10s %-8s %-9s %-20s %s\n", "id", "name", "kernel", "online", "job", "last seen (UTC)",
              "file systems");
  for (const auto& a : resp.agents()) {
    std::string fs;
    for (const auto& f : a.capabilities().filesystems()) fs += (fs.empty() ? "" : ",") + f;
    std::printf("%-10s %-24s %-10s %-8s %-9lld %-20s %s\n", a.agent_id().c_str(), a.name().c_str(),
                a.capabilities().kernel_label().c_str(), a.online() ? "yes" : "no",
                static_cast<long long>(a.current_job()), when(a.last_seen()).c_str(), fs.c_str());
  }
  return 0;
}

int Client::outcomes(int64_t campaign, bool failed, uint32_t limit, bool json_out) {
  // Page by page (each at most the server's page), until `limit` or the end.
  v1::ListOutcomesResponse resp;
  v1::ListOutcomesRequest req;
  req.set_campaign_id(campaign);
  req.set_failed_only(failed);
  bool more = true;
  while (more && static_cast<uint32_t>(resp.outcomes_size()) < limit) {
    req.set_limit(std::min<uint32_t>(limit - static_cast<uint32_t>(resp.outcomes_size()), 1000));
    v1::ListOutcomesResponse page;
    auto context = ctx();
    const grpc::Status st = stub_->ListOutcomes(context.get(), req, &page);
    if (!st.ok()) return fail(st);
    for (auto& o : *page.mutable_outcomes()) *resp.add_outcomes() = std::move(o);
    more = !page.next_page_token().empty();
    req.set_page_token(page.next_page_token());
  }
  // A list cut short says so (on stderr: stdout stays a table or JSON).
  if (more)
    std::fprintf(stderr, "note: more outcomes than --limit %u; raise it to see them\n", limit);
  if (json_out) {
    json out = json::array();
    for (const auto& o : resp.outcomes()) out.push_back(to_json(o));
    std::cout << out.dump(2) << std::endl;
    return 0;
  }
  std::printf("%-8s %-8s %-16s %-12s %-8s %-6s %-14s %10s %10s\n", "job", "attempt", "scenario", "fs", "kernel", "seed",
              "verdict", "checked", "violations");
  for (const auto& o : resp.outcomes())
    std::printf("%-8lld %-8u %-16s %-12s %-8s %-6llu %-14s %10llu %10llu\n",
                static_cast<long long>(o.job_id()), o.attempt(), o.spec().scenario().c_str(),
                o.spec().fs().c_str(), o.kernel_label().c_str(),
                static_cast<unsigned long long>(o.spec().seed()),
                // An extra outcome of a superseded attempt (kept for its violations).
                (verdict_name(o.outcome().verdict()) + (o.superseded() ? "*" : "")).c_str(),
                static_cast<unsigned long long>(o.outcome().lookups_checked() +
                                                o.outcome().offsets_checked()),
                static_cast<unsigned long long>(o.outcome().violation_count()));
  return 0;
}

int Client::kernels(bool json_out) {
  // Page by page, to the end.
  v1::ListKernelsRequest req;
  v1::ListKernelsResponse resp;
  do {
    v1::ListKernelsResponse page;
    auto context = ctx();
    const grpc::Status st = stub_->ListKernels(context.get(), req, &page);
    if (!st.ok()) return fail(st);
    for (auto& k : *page.mutable_kernels()) *resp.add_kernels() = std::move(k);
    req.set_page_token(page.next_page_token());
  } while (!req.page_token().empty());
  if (json_out) {
    // The CLI keeps its words: "status": "ready", "build_seconds": 812.5.
    nlohmann::json out = to_json(resp)["kernels"];
    for (int i = 0; i < resp.kernels_size(); ++i) {
      const v1::Kernel& k = resp.kernels(i);
      out[i]["status"] = ktap::kernel_status_word(k.status());
      out[i].erase("buildTime");
      out[i].erase("build_time");
      out[i]["build_seconds"] = seconds_of(k.build_time());
    }
    std::cout << out.dump(2) << std::endl;
    return 0;
  }
  std::printf("%-16s %-30s %-16s %s\n", "label", "version", "sha256", "source");
  for (const auto& k : resp.kernels())
    std::printf("%-16s %-30s %-16s %s\n", k.label().c_str(), k.version().c_str(), k.sha256().substr(0, 16).c_str(),
                k.source().c_str());
  return 0;
}

}  // namespace leapfrog::cli
