// leapfrog-agent: run a race scenario, list the catalogue, or check a history
// offline. Exit codes: 0 clean, 1 violations found, 2 error (bad input, setup);
// check also 3, inconclusive (nothing judged, or the search budget hit).

#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <grpc/grpc.h>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <vector>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>
#include <thread>

#include "agent/clock_check.h"
#include "agent/connect.h"
#ifdef LEAPFROG_AGENT_BUILDER
#include "agent/build_job.h"
#include "common/kernel/build_file.h"
#include "common/kernel/kernel_image.h"
#endif
#include "agent/options.h"
#include "agent/outcome_proto.h"
#include "agent/shared_progress.h"
#include "agent/widen.h"
#include "common/ktap/ktap.h"
#include "common/token.h"
#include "scenarios/history_io.h"
#include "scenarios/history_stream.h"
#include "scenarios/registry.h"

namespace leapfrog {
namespace {

int cmd_list(bool json_out) {
  if (json_out) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& s : scenarios()) {
      nlohmann::json params = nlohmann::json::array();
      for (const auto& p : s->params())
        params.push_back({{"name", p.name}, {"default", p.def}, {"min", p.min}, {"max", p.max}, {"help", p.help}});
      out.push_back({{"name", s->name()},
                     {"summary", s->summary()},
                     {"default_observers", s->default_observers()},
                     {"max_observers", s->max_observers()},
                     {"params", params}});
    }
    std::cout << out.dump(2) << '\n';
    return 0;
  }
  for (const auto& s : scenarios()) {
    std::printf("%-16s %s\n", s->name(), s->summary());
    std::printf("  %-14s default %-6u limits [1, %u]  observer processes (--observers)\n", "observers",
                s->default_observers(), s->max_observers());
    for (const auto& p : s->params())
      std::printf("  %-14s default %-6lld limits [%lld, %lld]  %s\n", p.name.c_str(), static_cast<long long>(p.def),
                  static_cast<long long>(p.min), static_cast<long long>(p.max), p.help.c_str());
  }
  std::printf("\nfile systems (--fs): tmpfs ext4 xfs btrfs fuse-cached fuse-direct, or --dir PATH\n");
  return 0;
}

// uname -r, the kernel a run by hand judged.
std::string running_release() {
  std::ifstream in("/proc/sys/kernel/osrelease");
  std::string r;
  std::getline(in, r);
  return r.empty() ? "host" : r;
}

// The outcome as KTAP v1 (common/ktap/ktap.h), as jobs are exported.
int print_ktap(const Outcome& o) {
  const v1::Outcome wire = outcome_from_json(to_json(o).dump());
  v1::ScenarioSpec spec;
  spec.set_scenario(o.scenario);
  spec.set_seed(o.seed);
  spec.set_fs(o.fs);
  std::cout << ktap::run_document(spec, running_release(), wire) << std::flush;
  return exit_code(o);
}

// The outcome as the v1.Outcome message, serialized: what an agent's run
// child writes and the agent stores as it is (connect.cc), so the one
// conversion from the scenario's struct happens here, where the run ended.
int print_proto(const Outcome& o) {
  const v1::Outcome wire = outcome_from_json(to_json(o).dump());
  std::string bytes;
  if (!wire.SerializeToString(&bytes)) throw std::runtime_error("the outcome does not serialize");
  std::cout.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  std::cout.flush();
  return exit_code(o);
}

int print_outcome(const Outcome& o, bool json_out) {
  if (json_out)
    std::cout << to_json(o).dump() << std::endl;
  else
    std::cout << to_text(o) << std::flush;
  return exit_code(o);
}

// TESTS ONLY (--test-allocate-mib): holds `mib` MiB for the rest of the
// process, touched a MiB at a time with a pause between, so that the agent
// has seen this process before a memory limit gets it killed.
void allocate_for_test(uint32_t mib) {
  static std::vector<std::unique_ptr<char[]>> held;
  for (uint32_t i = 0; i < mib; ++i) {
    held.emplace_back(new char[1 << 20]);
    std::memset(held.back().get(), 1, 1 << 20);
    std::this_thread::sleep_for(std::chrono::milliseconds(4));
  }
}

// Peak resident set sizes of this process and of the largest child it
// waited for, in bytes (ru_maxrss is in KiB on Linux).
void note_peak_rss(Outcome& o) {
  struct rusage self {}, children {};
  if (getrusage(RUSAGE_SELF, &self) == 0) o.peak_rss_bytes = static_cast<uint64_t>(self.ru_maxrss) * 1024;
  if (getrusage(RUSAGE_CHILDREN, &children) == 0)
    o.children_peak_rss_bytes = static_cast<uint64_t>(children.ru_maxrss) * 1024;
}

int cmd_run(const RunOptions& in, const RunFlags& flags) {
  RunOptions opts = in;
  // Mapped before the sandbox forks: the child that judges writes it.
  if (flags.progress_fd >= 0) opts.progress = map_shared_progress(flags.progress_fd);
  const bool ktap_out = flags.format == "ktap";
  const bool proto_out = flags.format == "proto";
  // KTAP and proto, like JSON, report a failed set-up as an outcome.
  const bool json_out = flags.json || flags.format == "json" || ktap_out || proto_out;
  const Scenario& scenario = find_scenario(opts.scenario);
  const auto params = resolve_params(scenario, opts);
  const Strategy strategy = resolve_strategy(scenario, opts, usable_cpus());
  const widen::Request widen_request = widen::parse_request(flags.widen);
  if (geteuid() != 0)
    throw UsageError("leapfrog-agent run needs root: it mounts file systems in a private mount namespace and runs "
                     "observers under another uid");
  if (!opts.history_path.empty()) {
    // Fail before the run, not after it.
    std::ofstream probe(opts.history_path, std::ios::app);
    if (!probe) throw UsageError("cannot write history file \"" + opts.history_path + "\"");
  }
  spdlog::info("run.start scenario={} seed={} fs={} align={} observers={} pinned={}", opts.scenario,
               opts.seed, fs::fs_name(opts.fs.kind, opts.fs.view), to_string(strategy.alignment),
               strategy.observers, strategy.pin_cpus);
  return fs::run_sandboxed([&](const std::string& workdir) {
    Outcome o;
    Widening widening;
    bool ended = false;
    try {
      allocate_for_test(flags.test_allocate_mib);
      const auto setup_start = std::chrono::steady_clock::now();
      auto ws = fs::provision(opts.fs, workdir);
      const double setup_s =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - setup_start).count();
      spdlog::info("run.provisioned fs={} setup_ms={:.0f}", ws->name(), setup_s * 1000);
      const Rng setup_rng(opts.seed ^ 0x6c6561706672ULL);
      RunContext ctx{opts, *ws, params, setup_rng, strategy.observers, strategy};
      widening = widen::begin(flags.widen_dir, widen_request, opts.seed, opts.observer.uid);
      o = scenario.run(ctx);
      o.setup_s = setup_s;
    } catch (const std::exception& e) {
      widen::end(flags.widen_dir, widening);
      ended = true;
      if (widening.reason.empty()) widening.reason = "the run failed before its widening was set";
      // Setup failures of the file system or the scenario: one line, exit 2.
      std::fprintf(stderr, "error: %s\n", e.what());
      if (!json_out) return 2;
      o.scenario = opts.scenario;
      o.seed = opts.seed;
      o.fs = fs::fs_name(opts.fs.kind, opts.fs.view);
      o.verdict = "error";
      o.error = e.what();
      o.observers = strategy.observers;
      o.strategy = strategy;
    }
    if (!ended) widen::end(flags.widen_dir, widening);
    o.widening = widening;
    for (auto& n : widen::short_delays(widening)) o.notes.push_back(std::move(n));
    o.strategy.widening = summary(widening);
    note_peak_rss(o);
    spdlog::info("run.end scenario={} seed={} verdict={} ops={}", o.scenario, o.seed, o.verdict, o.ops);
    if (ktap_out) return print_ktap(o);
    if (proto_out) return print_proto(o);
    return print_outcome(o, json_out);
  });
}

int cmd_check(const std::string& file, bool json_out, const ReadLimits& limits) {
  struct stat st {};
  if (::stat(file.c_str(), &st) != 0) throw UsageError("cannot read history file \"" + file + "\"");
  if (S_ISDIR(st.st_mode)) throw UsageError("history file \"" + file + "\" is a directory");
  std::ifstream in(file, std::ios::binary);
  if (!in) throw UsageError("cannot read history file \"" + file + "\"");
  // One pass, judging lookups as their windows close (history_stream.h).
  StreamCheck sc;
  try {
    sc = check_history_stream(in, limits);
  } catch (const HistoryFormatError& e) {
    throw UsageError("\"" + file + "\": " + e.what());
  } catch (const HistoryError& e) {
    throw UsageError("\"" + file + "\": " + e.what());
  }
  if (in.bad()) throw UsageError("cannot read history file \"" + file + "\": read error");
  spdlog::info("check.read lookups={} batches={} peak_retained={} whole={} why=\"{}\"", sc.lookups,
               sc.stats.batches, sc.stats.peak_retained, sc.stats.whole, sc.stats.why);
  Outcome o;
  o.scenario = sc.header.scenario;
  o.seed = sc.header.seed;
  o.fs = sc.header.fs;
  o.clock_source = sc.header.clock_source;
  o.epsilon_ns = sc.header.epsilon_ns;
  o.ops = sc.mutations + sc.lookups + sc.offsets;
  o.mutations = sc.mutations;
  o.check = std::move(sc.check);
  o.notes = o.check.notes;
  std::string unearned;
  o.verdict = earned_verdict(o.check, unearned);
  if (!unearned.empty()) o.error = unearned;
  return print_outcome(o, json_out);
}

// A VM started from a saved VM (coordinator/vm/launcher.h) starts its agent
// before it knows who it is, so that the agent's start-up (slow under TCG) is
// in the saved state: wait for `path`, written by /init once the launcher
// has sent the identity, as `key=value` lines ending with a line `end`:
// coordinator, name, kernel, token, selftest (0 or 1).
void take_identity(const std::string& path, ConnectOptions& opts) {
  // gRPC's own start-up (threads, resolvers, policies) is in the saved state
  // too; the reference is never dropped, like the library's for the process.
  grpc_init();
  // Tells /init the agent is up and waiting: the template is saved now.
  std::ofstream(path + ".waiting").flush();
  for (;;) {
    std::ifstream in(path);
    std::map<std::string, std::string> kv;
    bool complete = false;
    for (std::string line; in && std::getline(in, line);) {
      if (line == "end") {
        complete = true;
        break;
      }
      const auto eq = line.find('=');
      if (eq != std::string::npos) kv[line.substr(0, eq)] = line.substr(eq + 1);
    }
    if (complete) {
      for (const char* key : {"coordinator", "name", "kernel", "token"})
        if (kv[key].empty()) throw UsageError("--identity-file " + path + ": no " + key);
      opts.coordinator = kv["coordinator"];
      opts.name = kv["name"];
      opts.kernel_label = kv["kernel"];
      opts.token = kv["token"];
      opts.selftest = kv["selftest"] == "1";
      return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
}

int cmd_clock_check(const agent::ClockCheckOptions& opts, bool json_out) {
  const agent::ClockCheckResult r = agent::check_clock(opts);
  if (json_out) {
    std::printf("%s\n", agent::to_json(r).dump().c_str());
  } else if (!r.error.empty()) {
    std::printf("clock-check: %s\n", r.error.c_str());
  } else {
    std::printf("clock-check %s: clock %s, %d CPUs, %llu hand-offs, %llu reads (%.0f ns each)\n",
                r.sound() ? "sound" : "NOT SOUND", r.clock_source.c_str(), r.cpus,
                static_cast<unsigned long long>(r.handoffs), static_cast<unsigned long long>(r.reads), r.ns_per_read);
    std::printf("  across CPUs: %llu out of order (worst %lld ns), hand-off min %lld ns median %lld ns\n",
                static_cast<unsigned long long>(r.order_violations), static_cast<long long>(r.worst_order_ns),
                static_cast<long long>(r.min_handoff_ns), static_cast<long long>(r.median_handoff_ns));
    std::printf("  per CPU: %llu steps back (worst %lld ns)\n", static_cast<unsigned long long>(r.backward_steps),
                static_cast<long long>(r.worst_backward_ns));
    if (!r.first_violation.empty()) std::printf("  first: %s\n", r.first_violation.c_str());
  }
  if (!r.error.empty()) return 2;
  return r.sound() ? 0 : 1;
}

}  // namespace
}  // namespace leapfrog

int main(int argc, char** argv) {
  using namespace leapfrog;
  spdlog::set_level(spdlog::level::warn);
  spdlog::set_pattern("%Y-%m-%dT%H:%M:%S.%e %l %v");
  CLI::App app{"leapfrog-agent: races path lookups against mutations and checks every step"};
  app.require_subcommand(1);
  bool verbose = false;
  app.add_flag("-v,--verbose", verbose, "log events to stderr");

  bool list_json = false;
  auto* list = app.add_subcommand("list", "list the scenarios with their parameters and limits");
  list->add_flag("--json", list_json, "print JSON");

  RunFlags flags;
  auto* run = app.add_subcommand("run", "run one scenario and print its outcome (exit 0 clean, 1 violations, 2 error)");
  add_run_flags(*run, flags);

  std::string check_file;
  bool check_json = false;
  ReadLimits check_limits;
  auto* check = app.add_subcommand("check",
                                   "check a recorded history (JSON Lines) with the oracle (exit 0 "
                                   "pass, 1 violations, 2 bad input, "
                                   "3 inconclusive: nothing judged or the search budget hit)");
  check->add_option("file", check_file, "history file")->required();
  check->add_flag("--json", check_json, "print one JSON object");
  check
      ->add_option("--max-line-bytes", check_limits.max_line_bytes,
                   "refuse a longer line (default 64 MiB)")
      ->check(CLI::Range(size_t{1}, size_t{1} << 40));
  check->add_option("--max-bytes", check_limits.max_bytes, "refuse a longer input (default 64 GiB)")
      ->check(CLI::Range(uint64_t{1}, uint64_t{1} << 50));

  agent::ClockCheckOptions clock_opts;
  bool clock_json = false;
  auto* clock_check = app.add_subcommand(
      "clock-check",
      "check that the records' clock never goes back on a CPU and agrees across CPUs, by stamps passed "
      "between threads pinned to each pair of CPUs (exit 0 sound, 1 not, 2 error)");
  clock_check->add_option("--rounds", clock_opts.rounds, "hand-offs each way per pair of CPUs (default 100000)")
      ->check(CLI::Range(uint64_t{1}, uint64_t{100'000'000}));
  clock_check->add_option("--skew-ns", clock_opts.skew_ns,
                          "positive control: from halfway on, the clock reads this far behind on --skew-cpu");
  clock_check->add_option("--skew-cpu", clock_opts.skew_cpu, "the CPU --skew-ns lags");
  clock_check->add_flag("--json", clock_json, "print one JSON object");

  ConnectOptions connect_opts;
  std::string token_file;
  auto* connect = app.add_subcommand("connect", "serve a coordinator: lease jobs, run them, report outcomes");
  connect->add_option("--coordinator", connect_opts.coordinator, "HOST:PORT, or ipv4:A:P,B:P for several replicas");
  connect->add_option("--token-file", token_file, "file holding the coordinator's token");
  std::string connect_data_dir;
  connect->add_option(
      "--data-dir", connect_data_dir,
      "data folder of a `leapfrog up`/`serve` on this machine: the coordinator's address"
      " (read again when it is unavailable) and, without --token-file, its token");
  std::string identity_file;
  connect->add_option("--identity-file", identity_file,
                      "wait for this file, then take the coordinator, name, kernel label, token and selftest from it"
                      " (a VM started from a saved VM: deploy/vm/init writes it)");
  connect->add_option("--name", connect_opts.name, "agent name (default: host name and pid)");
  connect->add_option("--kernel-label", connect_opts.kernel_label, "kernel label to advertise (default: host)");
  connect->add_option("--fs", connect_opts.filesystems, "file systems to advertise (default: what is available)");
  connect->add_option("--spool", connect_opts.spool_dir, "folder for outcomes not yet acknowledged");
  connect->add_option("--max-jobs", connect_opts.max_jobs, "exit after this many jobs (0: never)");
  connect->add_flag("--vm", connect_opts.vm, "advertise that the agent runs in a VM");
  std::vector<std::string> fs_map;
  connect->add_option("--fs-map", fs_map, "JOB_FS=LOCAL_FS: run jobs of JOB_FS on LOCAL_FS (repeatable; for tests)");
  connect->add_flag("--selftest", connect_opts.selftest,
                    "run the selftest-crash and selftest-hang jobs (VMs of `leapfrog vm run --selftest` only)");
  std::string build_cache;
  connect->add_flag("--builder", connect_opts.builder,
                    "also run kernel build jobs (CampaignSpec.builds) and store the kernels they build");
  connect->add_option("--build-cache", build_cache,
                      "build cache and kernel store of --builder (default $LEAPFROG_CACHE or /var/cache/leapfrog)");
  std::vector<std::string> source_roots;
  connect->add_option("--source-root", source_roots,
                      "folder a build's source is named relative to (repeatable; default /usr/src, where "
                      "Debian's linux-source-* tarballs are)")
      ->check(CLI::ExistingDirectory);
  connect->add_option("--wait-for", connect_opts.wait_for,
                      "connect only once this file exists (the VM's /init: network up)");
  connect->add_option("--uname-release", connect_opts.uname_release,
                      "TESTS ONLY: advertise this `uname -r` instead of the running kernel's");
  connect->add_option("--test-run-allocate-mib", connect_opts.test_run_allocate_mib,
                      "TESTS ONLY: have every run allocate this many MiB first (run --test-allocate-mib)");
  bool connect_die_with_parent = false;
  connect->add_flag("--die-with-parent", connect_die_with_parent,
                    "hand the job back and exit when the parent process dies");

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
  if (verbose) spdlog::set_level(spdlog::level::info);

  try {
    if (list->parsed()) return cmd_list(list_json);
    if (check->parsed()) return cmd_check(check_file, check_json, check_limits);
    if (clock_check->parsed()) return cmd_clock_check(clock_opts, clock_json);
    if (connect->parsed()) {
      if (geteuid() != 0) throw UsageError("leapfrog-agent connect needs root: the jobs it runs mount file systems");
      if (!identity_file.empty()) {
        take_identity(identity_file, connect_opts);
      } else {
        if (!connect_data_dir.empty() && connect_opts.coordinator.empty()) {
          connect_opts.address_file = connect_data_dir + "/address";
          std::ifstream in(connect_opts.address_file);
          std::getline(in, connect_opts.coordinator);
          if (connect_opts.coordinator.empty())
            throw UsageError("connect: no coordinator address in \"" + connect_opts.address_file +
                             "\" (is `leapfrog up` running?)");
          if (token_file.empty()) token_file = connect_data_dir + "/token";
        }
        if (connect_opts.coordinator.empty())
          throw UsageError("connect: --coordinator (or --data-dir) is required");
        if (token_file.empty()) throw UsageError("connect: --token-file is required");
        try {
          connect_opts.token = read_token_file(token_file);
        } catch (const std::runtime_error& e) {
          throw UsageError(e.what());
        }
      }
      char exe[4096] = {};
      if (readlink("/proc/self/exe", exe, sizeof exe - 1) <= 0) throw UsageError("cannot find my own executable");
      connect_opts.self_exe = exe;
      for (const auto& m : fs_map) {
        const auto eq = m.find('=');
        if (eq == std::string::npos || eq == 0 || eq + 1 == m.size())
          throw UsageError("bad --fs-map \"" + m + "\", want JOB_FS=LOCAL_FS");
        connect_opts.fs_map[m.substr(0, eq)] = m.substr(eq + 1);
      }
      if (connect_opts.builder) {
#ifdef LEAPFROG_AGENT_BUILDER
        BuilderConfig builder;
        builder.cache_dir = build_cache.empty() ? vm::default_cache_dir() : build_cache;
        builder.source_roots = source_roots.empty() ? kbuild::default_source_roots() : source_roots;
        // The sandbox hides what this agent holds besides its own defaults.
        fill_connect_defaults(connect_opts);
        for (const auto& p : {token_file, connect_data_dir, connect_opts.spool_dir})
          if (!p.empty()) builder.hide.push_back(p);
        connect_opts.build_runner = [builder](const v1::KernelBuild& b,
                                              const std::function<void(const std::string&)>& log) {
          return run_build_job(b, builder, log);
        };
#else
        throw UsageError("--builder: this agent was built without kernel-build support (use leapfrog-agent)");
#endif
      } else if (!build_cache.empty() || !source_roots.empty()) {
        throw UsageError("--build-cache and --source-root need --builder");
      }
      if (connect_die_with_parent) {
        prctl(PR_SET_PDEATHSIG, SIGTERM);
        if (getppid() == 1) return 2;
      }
      spdlog::set_level(spdlog::level::info);
      return run_connect(connect_opts);
    }
    if (flags.die_with_parent) {
      // SIGTERM is forwarded to the sandbox, which then cleans up.
      prctl(PR_SET_PDEATHSIG, SIGTERM);
      if (getppid() == 1) return 2;
    }
    return cmd_run(to_run_options(flags), flags);
  } catch (const UsageError& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 2;
  } catch (const fs::SetupError& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 2;
  }
}
