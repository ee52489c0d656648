// leapfrog: the coordinator (`serve`, `up`) and the command line for campaigns,
// schedules, agents and outcomes. Exit codes: 0 success, 2 error.

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>

#include "common/duration.h"
#include "coordinator/cli/client.h"
#include "coordinator/cli/export_cmds.h"
#include "coordinator/cli/kbuild_cmds.h"
#include "coordinator/cli/scaling_cmds.h"
#include "coordinator/cli/server_cmds.h"
#include "coordinator/cli/subscribe_cmds.h"
#include "coordinator/cli/triage_cmds.h"
#include "coordinator/cli/vm_cmds.h"
#include "coordinator/notify/webhook_policy.h"

namespace {

std::string default_data_dir() {
  const char* env = std::getenv("LEAPFROG_DATA");
  return env && *env ? env : "/var/tmp/leapfrog";
}

void add_campaign_flags(CLI::App* cmd, leapfrog::cli::CampaignFlags& f, bool with_name = true) {
  if (with_name) cmd->add_option("--name", f.name, "name shown in lists");
  cmd->add_option("--scenario", f.scenarios, "scenario (repeatable)")->required();
  cmd->add_option("--fs", f.filesystems, "file system kind (repeatable; default tmpfs)");
  cmd->add_option("--kernel", f.kernels, "kernel label (repeatable; default host)");
  cmd->add_option("--seeds", f.seeds, "seeds per cell");
  cmd->add_option("--first-seed", f.first_seed, "first seed");
  cmd->add_option("--duration", f.duration, "per job, e.g. 2s, 500ms, 90m, 3h (at most 24h)");
  cmd->add_option("--iterations", f.iterations, "rounds per job (instead of --duration)");
  cmd->add_option("--observers", f.observers,
                  "observers per job (default: each job's seed chooses)");
  cmd->add_option("--align", f.align, "fuzzy | free | both (default: each job's seed chooses)");
  cmd->add_option("--pin", f.pin,
                  "pin actors to CPUs: on | off (default: each job's seed chooses)");
  cmd->add_option("--widen", f.widen,
                  "kernel delay points of a --widen kernel: seed (default), off, or "
                  "POINT:PROBABILITY_PPM:DELAY_NS:UID[,...]");
  cmd->add_option("--param", f.params, "scenario parameter NAME=VALUE (repeatable)");
  cmd->add_option("--max-attempts", f.max_attempts, "attempts before a job ends as infra-failure (default 3)");
  cmd->add_option("--build", f.build_label,
                  "build this kernel label first on a builder agent (one of --kernel; needs --source), then test it");
  cmd->add_option("--source", f.build_source,
                  "--build: kernel source tarball or folder: a path here under a --source-root, or a name "
                  "relative to the builder's source roots (e.g. linux-source-6.1.tar.xz)");
  cmd->add_option("--source-root", f.build_source_roots,
                  "--build: folder the builder takes sources from, as its own --source-root (repeatable; "
                  "default /usr/src)");
  cmd->add_option("--patch", f.build_patches,
                  "--build: patch applied with patch -p1, in order (repeatable; its content is sent)");
  cmd->add_option("--config", f.build_configs,
                  "--build: config fragment on top of Leapfrog's (repeatable; its content is sent)");
  cmd->add_option("--kernel-cmdline", f.build_cmdline, "--build: words added to the built kernel's command line");
}

}  // namespace

int main(int argc, char** argv) {
  using namespace leapfrog::cli;
  spdlog::set_pattern("%Y-%m-%dT%H:%M:%S.%e %l %v");
  spdlog::set_level(spdlog::level::warn);
  CLI::App app{"leapfrog: coordinator and command line of the Leapfrog path-lookup race tester"};
  app.require_subcommand(1);
  std::string coordinator, token_file, data_dir = default_data_dir();
  bool json = false, verbose = false;
  app.add_option("--coordinator", coordinator, "coordinator address HOST:PORT (default: from --data-dir)");
  app.add_option("--token-file", token_file, "token file (default: <data-dir>/token)");
  app.add_option("--data-dir", data_dir, "data folder of `leapfrog up` (default $LEAPFROG_DATA or /var/tmp/leapfrog)");
  app.add_flag("--json", json, "print JSON for scripts");
  app.add_flag("-v,--verbose", verbose, "log events to stderr");

  ServeOptions serve_opts;
  auto* serve = app.add_subcommand("serve", "run the coordinator (embedded PostgreSQL unless --database)");
  serve->add_option("--database", serve_opts.database, "libpq URL of an existing PostgreSQL");
  serve->add_option("--listen", serve_opts.listen, "address to listen on (default 127.0.0.1:7070)");
  for (auto* cmd : {serve}) {
    cmd->add_option("--lease-ms", serve_opts.lease_ms, "lease length without a heartbeat")->check(CLI::Range(200, 3'600'000));
    cmd->add_option("--heartbeat-ms", serve_opts.heartbeat_ms, "agent heartbeat interval")->check(CLI::Range(50, 600'000));
  }

  int up_port = 0, up_agents = 2;
  auto* up = app.add_subcommand("up", "embedded PostgreSQL + coordinator + local agents, until Ctrl-C");
  up->add_option("--port", up_port, "port on 127.0.0.1 (default: a free one)");
  up->add_option("--agents", up_agents, "local agents to start")->check(CLI::Range(0, 64));
  up->add_option("--database", serve_opts.database, "libpq URL of an existing PostgreSQL");
  up->add_option("--lease-ms", serve_opts.lease_ms, "lease length without a heartbeat")->check(CLI::Range(200, 3'600'000));
  up->add_option("--heartbeat-ms", serve_opts.heartbeat_ms, "agent heartbeat interval")->check(CLI::Range(50, 600'000));
  for (auto* cmd : {serve, up}) {
    cmd->add_option("--http", serve_opts.http_listen, "dashboard and JSON API address (default 127.0.0.1:0, a free port)");
    cmd->add_option("--dashboard-dir", serve_opts.dashboard_dir, "built dashboard assets (default: next to the executable)");
    cmd->add_option("--build-cache", serve_opts.build_caches,
                    "a kernel build cache (`kernel build --cache-dir`) whose build logs the dashboard "
                    "shows (repeatable; $LEAPFROG_CACHE or /var/cache/leapfrog always)");
    cmd->add_option(
           "--retain-days", serve_opts.retain_days,
           "retention: outcomes older than N days drop their history excerpts, and passing "
           "ones their details; verdicts, counts, violations, summaries and issue examples "
           "stay (default 0: keep everything)")
        ->check(CLI::Range(0, 100'000));
    cmd->add_option("--http-allow-host", serve_opts.http_allowed_hosts,
                    "also answer HTTP requests whose Host header is NAME or NAME:PORT (repeatable; "
                    "default: only 127.0.0.1, localhost and the --http host)");
    cmd->add_option(
        "--export-dir", serve_opts.export_dir,
        "write each finished scheduled campaign (nightly) to this folder, one file per format");
    cmd->add_option("--export-format", serve_opts.export_formats,
                    "--export-dir: kcidb | junit | ktap (repeatable; default kcidb)");
    cmd->add_option("--export-origin", serve_opts.export_origin,
                    "KCIDB origin of the exports, [a-z0-9_]+ (default leapfrog)");
    cmd->add_option("--smtp-url", serve_opts.smtp_url,
                    "SMTP server of e-mail subscriptions: smtp://HOST[:PORT] or smtps://...");
    cmd->add_option("--smtp-from", serve_opts.smtp_from,
                    "sender of the mails (default leapfrog@localhost)");
    cmd->add_option("--smtp-user", serve_opts.smtp_user, "SMTP login (AUTH)");
    cmd->add_option("--smtp-password-file", serve_opts.smtp_password_file,
                    "file holding the SMTP password");
    cmd->add_flag("--smtp-require-tls", serve_opts.smtp_require_tls, "send mail only over TLS");
    auto* link_base = cmd->add_option(
        "--link-base,--notify-link-base", serve_opts.link_base,
        "public base URL of the dashboard, for the links in notifications and in the nightly "
        "exports (default: the --http address)");
    link_base->check([](const std::string& v) -> std::string {
      if (v.rfind("http://", 0) == 0 || v.rfind("https://", 0) == 0) return "";
      return "want an http:// or https:// URL, not \"" + v.substr(0, 64) + "\"";
    });
    cmd->add_option("--webhook-allow", serve_opts.webhook_allow,
                    "webhooks may go to this host name, address or CIDR network (repeatable; "
                    "with none, only to public addresses: loopback, private, link-local and "
                    "metadata addresses are refused)")
        ->check([](const std::string& v) -> std::string {
          try {
            leapfrog::coord::notify::WebhookPolicy({v});
            return "";
          } catch (const std::invalid_argument& e) {
            return e.what();
          }
        });
    cmd->add_option("--notify-retry-ms", serve_opts.notify_retry_ms,
                    "first retry of a failed delivery, doubling after (default 10000)")
        ->check(CLI::Range(10, 3'600'000));
    cmd->add_option("--notify-poll-ms", serve_opts.notify_poll_ms,
                    "how often the outbox is read (default 1000)")
        ->check(CLI::Range(10, 60'000));
    cmd->add_option("--notify-unserved-after", serve_opts.notify_unserved_after_s,
                    "seconds a nightly's jobs may wait with no agent able to run them before it is "
                    "reported (default 600)")
        ->check(CLI::Range(0, 86'400 * 7));
  }

  auto* campaign = app.add_subcommand("campaign", "run and inspect campaigns");
  campaign->require_subcommand(1);
  CampaignFlags run_flags;
  bool wait = false;
  auto* crun = campaign->add_subcommand("run", "queue a campaign (scenarios x kernels x file systems x seeds)");
  add_campaign_flags(crun, run_flags);
  crun->add_flag("--wait", wait, "wait until every job has an outcome (progress bar on a terminal)");
  std::string wait_timeout;
  crun->add_option(
      "--timeout", wait_timeout,
      "--wait: give up (exit 2) if the campaign is not done after this long, e.g. 30m");
  auto* clist = campaign->add_subcommand("list", "recent campaigns");
  uint32_t campaign_limit = 50;
  clist->add_option("--limit", campaign_limit, "most campaigns to list (default 50)")
      ->check(CLI::Range(1u, 1000000u));
  int64_t show_id = 0;
  auto* cshow = campaign->add_subcommand("show", "a campaign and its jobs");
  cshow->add_option("id", show_id, "campaign id")->required();

  auto* schedule = app.add_subcommand("schedule", "nightly (cron) campaigns");
  schedule->require_subcommand(1);
  std::string sched_name, sched_cron;
  CampaignFlags sched_flags;
  auto* sadd = schedule->add_subcommand("add", "add a schedule: each firing creates a campaign");
  sadd->add_option("--name", sched_name, "schedule name")->required();
  sadd->add_option("--cron", sched_cron, "five fields, UTC, e.g. \"0 2 * * *\" (nightly at 02:00)")->required();
  add_campaign_flags(sadd, sched_flags, false);
  auto* slist = schedule->add_subcommand("list", "schedules with their next run");
  int64_t sched_id = 0;
  auto* sdisable = schedule->add_subcommand("disable", "stop a schedule from firing");
  sdisable->add_option("id", sched_id)->required();
  auto* senable = schedule->add_subcommand("enable", "let a schedule fire again (from its next firing after now)");
  senable->add_option("id", sched_id)->required();
  auto* srm = schedule->add_subcommand("rm", "remove a schedule");
  srm->add_option("id", sched_id)->required();

  auto* agents = app.add_subcommand("agents", "registered agents");
  int64_t outcome_campaign = 0;
  bool failed = false;
  uint32_t outcome_limit = 200;
  auto* outcomes = app.add_subcommand("outcomes", "stored outcomes, most recent first");
  outcomes->add_option("--campaign", outcome_campaign, "only this campaign");
  outcomes->add_flag("--failed", failed, "only outcomes that are not pass");
  outcomes->add_option("--limit", outcome_limit, "most outcomes to list (default 200)")
      ->check(CLI::Range(1u, 1000000u));
  auto* kernels = app.add_subcommand("kernels", "registered kernels");
  VmCommands vm_cmds(app);
  KernelBuildCommands kbuild_cmds(app);
  up->add_option("--vms", serve_opts.vms, "VMs to boot (`leapfrog vm run`; needs --kernel)")->check(CLI::Range(0, 64));
  up->add_option("--kernel", serve_opts.vm_kernel, "registered kernel label the VMs boot");

  auto triage_cmds = add_triage_commands(app);
  ExportCommands export_cmds(app);
  ScalingCommands scaling_cmds(app);
  SubscribeCommands subscribe_cmds(app);

  // Global flags (--json, --data-dir, ...) may also follow the verb.
  for (auto* sub : {serve, up, campaign, crun, clist, cshow, schedule, sadd, slist, sdisable, senable, srm, agents, outcomes,
                    kernels})
    sub->fallthrough();

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 2;
  }
  if (verbose || serve->parsed() || up->parsed()) spdlog::set_level(spdlog::level::info);
  // What a verb prints for scripts (--json) stays parseable: logs go to stderr.
  if (json) spdlog::set_default_logger(spdlog::stderr_color_mt("stderr"));

  try {
    if (serve->parsed() || up->parsed()) {
      serve_opts.data_dir = data_dir;
      serve_opts.token_file = token_file;
      if (up->parsed()) {
        serve_opts.listen = "127.0.0.1:" + std::to_string(up_port);
        serve_opts.agents = up_agents;
      }
      return leapfrog::cli::serve(serve_opts);
    }
    if (auto rc = triage_cmds->run([&] { return resolve_endpoint(coordinator, token_file, data_dir); }, json)) return *rc;
    if (export_cmds.parsed()) return export_cmds.run(coordinator, token_file, data_dir);
    if (subscribe_cmds.parsed())
      return subscribe_cmds.run(resolve_endpoint(coordinator, token_file, data_dir), json);
    if (scaling_cmds.parsed())
      return scaling_cmds.run(resolve_endpoint(coordinator, token_file, data_dir), json);
    if (kbuild_cmds.parsed()) return kbuild_cmds.run(resolve_endpoint(coordinator, token_file, data_dir), json);
    if (vm_cmds.parsed()) return vm_cmds.run(resolve_endpoint(coordinator, token_file, data_dir), data_dir, json);
    Client client(resolve_endpoint(coordinator, token_file, data_dir));
    if (crun->parsed()) {
      std::chrono::milliseconds timeout{0};
      if (!wait_timeout.empty()) {
        if (!wait) throw std::runtime_error("--timeout needs --wait");
        try {
          timeout = std::chrono::milliseconds(
              std::max<int64_t>(leapfrog::parse_duration(wait_timeout) / 1'000'000, 1));
        } catch (const leapfrog::UsageError& e) {
          throw std::runtime_error(std::string("--timeout: ") + e.what());
        }
      }
      return client.campaign_run(run_flags, wait, json, timeout);
    }
    if (clist->parsed()) return client.campaign_list(campaign_limit, json);
    if (cshow->parsed()) return client.campaign_show(show_id, json);
    if (sadd->parsed()) {
      sched_flags.name = sched_name;
      return client.schedule_add(sched_name, sched_cron, sched_flags, json);
    }
    if (slist->parsed()) return client.schedule_list(json);
    if (sdisable->parsed()) return client.schedule_enable(sched_id, false, json);
    if (senable->parsed()) return client.schedule_enable(sched_id, true, json);
    if (srm->parsed()) return client.schedule_remove(sched_id);
    if (agents->parsed()) return client.agents(json);
    if (outcomes->parsed()) return client.outcomes(outcome_campaign, failed, outcome_limit, json);
    if (kernels->parsed()) return client.kernels(json);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 2;
  }
  return 2;
}
