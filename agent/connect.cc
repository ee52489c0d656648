#include "agent/connect.h"

#include <fcntl.h>
#include <linux/random.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <fmt/ranges.h>
#include <grpcpp/grpcpp.h>
#include <random>
#include <spdlog/spdlog.h>
#include <sstream>
#include <thread>

#include "agent/kernel_log.h"
#include "agent/outcome_proto.h"
#include "agent/run_end.h"
#include "agent/shared_progress.h"
#include "agent/spool.h"
#include "common/bounds.h"
#include "common/proto_time.h"
#include "leapfrog/v1/agent.grpc.pb.h"
#include "scenarios/fs/view.h"
#include "scenarios/fs/workspace.h"
#include "scenarios/progress.h"
#include "scenarios/registry.h"

extern char** environ;

namespace leapfrog {
namespace {

namespace stdfs = std::filesystem;
using grpc::StatusCode;

std::atomic<int> g_stop{0};
void on_signal(int) { g_stop.store(1); }

bool stopping() { return g_stop.load() != 0; }

class Backoff {
 public:
  std::chrono::milliseconds next() {
    const auto d = current_;
    current_ = std::min(current_ * 2, std::chrono::milliseconds(5000));
    std::uniform_int_distribution<int> jitter(0, static_cast<int>(d.count() / 4) + 1);
    return d + std::chrono::milliseconds(jitter(rng_));
  }
  void reset() { current_ = std::chrono::milliseconds(100); }

 private:
  std::chrono::milliseconds current_{100};
  std::mt19937 rng_{std::random_device{}()};
};

// What this machine can provision now; each kind left out is logged with the
// reason, so `leapfrog agents` and the agent's log tell why a VM does not
// offer, say, xfs.
std::vector<std::string> default_filesystems() {
  std::vector<std::string> out;
  std::vector<fs::FsKind> bases;
  for (const char* name : {"tmpfs", "ext4", "xfs", "btrfs", "fuse-cached", "fuse-direct"}) {
    const fs::FsKind kind = fs::parse_fs_kind(name);
    const std::string why = fs::unavailable_reason(kind);
    if (why.empty()) {
      out.push_back(name);
      bases.push_back(kind);
    } else {
      spdlog::info("agent.fs_unavailable fs={} reason=\"{}\"", name, why);
    }
  }
  // Then each view over each base that takes it: "ext4+overlay", ...
  for (const fs::FsView view : {fs::FsView::Bind, fs::FsView::Overlay, fs::FsView::Idmap}) {
    for (const fs::FsKind kind : bases) {
      if (kind == fs::FsKind::FuseCached || kind == fs::FsKind::FuseDirect) continue;
      const std::string name = fs::fs_name(kind, view);
      const std::string why = fs::view_unavailable_reason(kind, view);
      if (why.empty())
        out.push_back(name);
      else
        spdlog::info("agent.fs_unavailable fs={} reason=\"{}\"", name, why);
    }
  }
  return out;
}

// How long the job's scenario says a run with its parameters may take, in
// ms (0 when it races for the spec's duration, or is unknown here: the run
// child then reports the bad scenario itself).
int64_t declared_run_ms(const v1::ScenarioSpec& spec) {
  try {
    const Scenario& s = find_scenario(spec.scenario());
    std::map<std::string, int64_t> params;
    for (const auto& p : s.params()) params[p.name] = p.def;
    for (const auto& [name, value] : spec.params()) params[name] = value;
    const auto t = s.run_time(params);
    return t ? std::chrono::duration_cast<std::chrono::milliseconds>(*t).count() : 0;
  } catch (const std::exception&) {
    return 0;
  }
}

std::string host_name() {
  char buf[256] = {};
  gethostname(buf, sizeof buf - 1);
  return buf;
}

class Agent {
 public:
  explicit Agent(const ConnectOptions& opts) : opts_(opts), spool_(opts.spool_dir) {
    connect_to(opts.coordinator);
    caps_.set_kernel_label(opts.kernel_label.empty() ? "host" : opts.kernel_label);
    struct utsname u;
    if (uname(&u) == 0)
      caps_.set_uname((opts.uname_release.empty() ? std::string(u.release) : opts.uname_release) + " " + u.version);
    caps_.set_root(geteuid() == 0);
    caps_.set_cpus(static_cast<uint32_t>(std::max<long>(1, sysconf(_SC_NPROCESSORS_ONLN))));
    caps_.set_host(host_name());
    caps_.set_vm(opts.vm);
    caps_.set_builder(opts.builder && opts.build_runner != nullptr);
  }

  int run() {
    int jobs_done = 0;
    Backoff backoff;
    if (opts_.vm) reseed_random();
    if (!opts_.wait_for.empty()) wait_for_file(opts_.wait_for);
    // In a VM, /init loads the file systems' modules while the agent starts:
    // what it can offer is known once it may connect (--wait-for).
    advertise_filesystems();
    while (!stopping()) {
      if (agent_id_.empty() && !register_agent()) {
        pause_for(backoff.next());
        continue;
      }
      if (!drain_spool()) {
        pause_for(backoff.next());
        continue;
      }
      if (opts_.max_jobs > 0 && jobs_done >= opts_.max_jobs) break;
      v1::LeaseRequest req;
      req.set_agent_id(agent_id_);
      req.set_agent_secret(secret_);
      req.mutable_wait()->set_seconds(2);
      v1::LeaseResponse resp;
      auto ctx = context(std::chrono::seconds(10));
      const grpc::Status s = stub_->Lease(ctx.get(), req, &resp);
      if (!s.ok()) {
        // Our name was registered again since (a replica, or another agent
        // of that name): register again.
        if (s.error_code() == StatusCode::PERMISSION_DENIED) agent_id_.clear();
        handle_error("lease", s);
        pause_for(backoff.next());
        continue;
      }
      backoff.reset();
      if (!resp.has_job()) continue;
      // The job's calls carry the secret it was leased with, whatever the
      // agent registers meanwhile.
      lease_secret_ = secret_;
      run_job(resp.job());
      ++jobs_done;
    }
    // Outcomes still spooled stay on disk for the next start.
    drain_spool();
    spdlog::info("agent.exit agent={} jobs={}", agent_id_, jobs_done);
    return 0;
  }

 private:
  // Waits `d` before a retry, waking early when asked to stop, or when the
  // channel, down when the wait began, is connected again. Waiting on the
  // channel's state is also what drives its reconnection: with no call in
  // flight nothing else polls it (only gRPC's backup poller, every 5 s), and
  // calls meanwhile fail fast with the last connection error, so a restarted
  // coordinator would be noticed seconds late and leases would expire.
  void pause_for(std::chrono::milliseconds d) {
    const auto until = std::chrono::steady_clock::now() + d;
    const bool was_ready = channel_->GetState(false) == GRPC_CHANNEL_READY;
    while (!stopping()) {
      const auto now = std::chrono::steady_clock::now();
      if (now >= until) return;
      const grpc_connectivity_state state = channel_->GetState(true);
      if (!was_ready && state == GRPC_CHANNEL_READY) return;
      const auto slice = std::min<std::chrono::steady_clock::duration>(until - now, std::chrono::milliseconds(50));
      channel_->WaitForStateChange(state, std::chrono::system_clock::now() + slice);
    }
  }

  void connect_to(const std::string& address) {
    grpc::ChannelArguments args;
    args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, 10'000);
    args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
    args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 2000);
    args.SetMaxReceiveMessageSize(64 << 20);
    channel_ = grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), args);
    stub_ = v1::AgentService::NewStub(channel_);
    address_ = address;
  }

  // With --data-dir, while the coordinator is unavailable: the address it
  // wrote, if it moved (a restarted `leapfrog up` whose port was taken).
  // Leases, spooled outcomes and their secrets live on in the database, so
  // the agent carries on there as after any reconnect.
  void reread_address() {
    if (opts_.address_file.empty()) return;
    std::ifstream in(opts_.address_file);
    std::string now;
    if (!in || !std::getline(in, now)) return;  // not written yet: the coordinator is starting
    while (!now.empty() && (now.back() == '\r' || now.back() == ' ')) now.pop_back();
    if (now.empty() || now == address_) return;
    spdlog::warn("agent.coordinator_moved from={} to={} file={}", address_, now,
                 opts_.address_file);
    connect_to(now);
  }

  void advertise_filesystems() {
    caps_.clear_filesystems();
    for (const auto& f : opts_.filesystems.empty() ? default_filesystems() : opts_.filesystems)
      caps_.add_filesystems(f);
    for (const auto& [from, to] : opts_.fs_map)
      if (std::find(caps_.filesystems().begin(), caps_.filesystems().end(), from) ==
          caps_.filesystems().end())
        caps_.add_filesystems(from);
    spdlog::info("agent.filesystems fs={}", fmt::join(caps_.filesystems(), ","));
  }

  // Polls: the file appears once, within a second or so of the agent's start.
  // Past a minute the agent says why it waits, and keeps waiting.
  //
  // Meanwhile the channel tries to connect, and fails at once (no network):
  // under TCG that first pass through gRPC's connection code is what costs,
  // and it then no longer delays the registration. Once the file is there
  // the channel retries at once instead of at the end of its backoff.
  // A VM restored from a saved VM (coordinator/vm/launcher.h) starts with
  // the same random state as every other copy of it; /init has written the
  // host's seed into the input pool: make the kernel's generator draw from
  // it now rather than at its next scheduled reseed.
  static void reseed_random() {
    const int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
    if (fd < 0) return;
    if (ioctl(fd, RNDRESEEDCRNG) != 0)
      spdlog::warn("agent.reseed_failed error=\"{}\"", std::strerror(errno));
    close(fd);
  }

  void wait_for_file(const std::string& path) {
    const auto start = std::chrono::steady_clock::now();
    bool told = false;
    channel_->GetState(/*try_to_connect=*/true);
    spdlog::info("agent.waiting_for file={}", path);
    while (!stopping() && access(path.c_str(), F_OK) != 0) {
      if (!told && std::chrono::steady_clock::now() - start > std::chrono::minutes(1)) {
        spdlog::warn("agent.waiting file={} reason=\"--wait-for: the network is not up yet\"", path);
        told = true;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    grpc::experimental::ChannelResetConnectionBackoff(channel_.get());
    channel_->WaitForConnected(std::chrono::system_clock::now() + std::chrono::seconds(2));
  }

  std::unique_ptr<grpc::ClientContext> context(std::chrono::milliseconds timeout) {
    auto ctx = std::make_unique<grpc::ClientContext>();
    ctx->AddMetadata("authorization", "Bearer " + opts_.token);
    ctx->set_deadline(std::chrono::system_clock::now() + timeout);
    return ctx;
  }

  void handle_error(const char* what, const grpc::Status& s) {
    if (s.error_code() == StatusCode::NOT_FOUND) agent_id_.clear();  // the replica forgot us: register again
    if (s.error_code() == StatusCode::UNAVAILABLE ||
        s.error_code() == StatusCode::DEADLINE_EXCEEDED)
      reread_address();
    if (s.error_code() == StatusCode::UNAUTHENTICATED) {
      spdlog::error("agent.unauthenticated rpc={} error=\"{}\"", what, s.error_message());
      g_stop.store(1);
      exit_code_ = 2;
      return;
    }
    spdlog::warn("agent.rpc_error rpc={} code={} error=\"{}\"", what, static_cast<int>(s.error_code()),
                 s.error_message());
  }

  // Renews the lease of `job`, with the run's counts so far when there is
  // a run; FAILED_PRECONDITION: the lease is gone.
  grpc::Status heartbeat(const v1::Job& job, const RunProgress* progress = nullptr) {
    v1::HeartbeatRequest hb;
    hb.set_agent_id(agent_id_);
    hb.set_agent_secret(lease_secret_);
    hb.set_job_id(job.job_id());
    hb.set_attempt(job.attempt());
    if (progress) {
      v1::JobProgress* p = hb.mutable_progress();
      p->set_operations(progress->operations.load(std::memory_order_relaxed));
      p->set_lookups_judged(progress->lookups_judged.load(std::memory_order_relaxed));
      p->set_violations(progress->violations.load(std::memory_order_relaxed));
    }
    v1::HeartbeatResponse resp;
    auto ctx = context(std::chrono::seconds(5));
    return stub_->Heartbeat(ctx.get(), hb, &resp);
  }

  bool register_agent() {
    v1::RegisterRequest req;
    req.set_name(opts_.name);
    *req.mutable_capabilities() = caps_;
    v1::RegisterResponse resp;
    auto ctx = context(std::chrono::seconds(10));
    const grpc::Status s = stub_->Register(ctx.get(), req, &resp);
    if (!s.ok()) {
      handle_error("register", s);
      return false;
    }
    agent_id_ = resp.agent_id();
    secret_ = resp.agent_secret();
    heartbeat_ = std::chrono::milliseconds(resp.heartbeat_interval().seconds() * 1000 +
                                           resp.heartbeat_interval().nanos() / 1'000'000);
    if (heartbeat_.count() <= 0) heartbeat_ = std::chrono::milliseconds(2000);
    spdlog::info("agent.registered agent={} coordinator={}", agent_id_, address_);
    return true;
  }

  // Sends every spooled outcome; true when the spool is empty.
  bool drain_spool() {
    for (const auto& file : spool_.pending()) {
      v1::ReportOutcomeRequest req;
      if (!Spool::load(file, req)) {
        spdlog::error("agent.spool_corrupt file={}", file);
        stdfs::rename(file, file + ".corrupt");
        continue;
      }
      req.set_agent_id(agent_id_);
      // Spooled before agents had secrets: the coordinator recorded no key
      // for its lease, and goes by the agent id.
      if (req.agent_secret().empty()) req.set_agent_secret(secret_);
      v1::ReportOutcomeResponse resp;
      auto ctx = context(std::chrono::seconds(20));
      const grpc::Status s = stub_->ReportOutcome(ctx.get(), req, &resp);
      // Not ours by the coordinator's records: retrying cannot help, and the
      // run must not be lost either. Kept aside for an operator.
      if (s.error_code() == StatusCode::PERMISSION_DENIED) {
        spdlog::error("agent.report_refused job={} attempt={} kept={}.refused error=\"{}\"",
                      req.job_id(), req.attempt(), file, s.error_message());
        stdfs::rename(file, file + ".refused");
        continue;
      }
      // Acknowledged, a duplicate, or superseded: the coordinator has what it needs.
      if (s.ok() || s.error_code() == StatusCode::FAILED_PRECONDITION || s.error_code() == StatusCode::INVALID_ARGUMENT) {
        if (!s.ok()) spdlog::warn("agent.report_dropped job={} error=\"{}\"", req.job_id(), s.error_message());
        stdfs::remove(file);
        continue;
      }
      handle_error("report", s);
      return false;
    }
    return true;
  }

  std::string local_fs(const std::string& fs) const {
    const auto it = opts_.fs_map.find(fs);
    return it == opts_.fs_map.end() ? fs : it->second;
  }

  std::vector<std::string> job_argv(const v1::Job& job) {
    const auto& spec = job.spec();
    std::vector<std::string> argv = {opts_.self_exe, "run", "--format", "proto",
                                     "--die-with-parent", "--scenario", spec.scenario(), "--seed",
                                     std::to_string(spec.seed()), "--fs", local_fs(spec.fs()),
                                     // What the spec leaves open, the seed chooses.
                                     "--strategy", "seed"};
    if (spec.iterations() > 0) {
      argv.insert(argv.end(), {"--iterations", std::to_string(spec.iterations())});
    } else {
      const int64_t ms = spec.duration().seconds() * 1000 + spec.duration().nanos() / 1'000'000;
      argv.insert(argv.end(), {"--duration", std::to_string(std::max<int64_t>(ms, 1)) + "ms"});
    }
    if (spec.observers() > 0) argv.insert(argv.end(), {"--observers", std::to_string(spec.observers())});
    if (opts_.test_run_allocate_mib > 0)
      argv.insert(argv.end(), {"--test-allocate-mib", std::to_string(opts_.test_run_allocate_mib)});
    if (!spec.align().empty()) argv.insert(argv.end(), {"--align", spec.align()});
    if (spec.pin() != v1::CPU_PINNING_UNSPECIFIED)
      argv.insert(argv.end(), {"--pin", spec.pin() == v1::CPU_PINNING_ON ? "on" : "off"});
    if (!spec.widen().empty()) argv.insert(argv.end(), {"--widen", spec.widen()});
    for (const auto& [k, v] : spec.params()) argv.insert(argv.end(), {"--param", k + "=" + std::to_string(v)});
    return argv;
  }

  // The launcher's test hooks: selftest-crash panics the guest kernel through
  // /proc/sysrq-trigger, selftest-hang freezes this process (no heartbeats,
  // no output). Refused unless the agent runs in a VM started with
  // --selftest, so a campaign cannot crash a host or an ordinary VM.
  void run_selftest(const v1::Job& job) {
    const std::string& name = job.spec().scenario();
    if (!opts_.selftest || !opts_.vm) {
      finish(job, error_outcome("scenario \"" + name + "\" runs only on VM agents started with --selftest"));
      return;
    }
    spdlog::warn("job.selftest job={} attempt={} scenario={}", job.job_id(), job.attempt(), name);
    if (name == "selftest-crash") {
      ::sync();
      const int fd = ::open("/proc/sysrq-trigger", O_WRONLY | O_CLOEXEC);
      if (fd >= 0) {
        (void)!::write(fd, "c", 1);
        ::close(fd);
      }
      finish(job, error_outcome("selftest-crash: the kernel did not crash"));
    } else if (name == "selftest-hang") {
      ::kill(::getpid(), SIGSTOP);
      finish(job, error_outcome("selftest-hang: the agent was resumed"));
    } else {
      finish(job, error_outcome("unknown selftest scenario \"" + name + "\""));
    }
  }

  // Builds the kernel on a thread (kbuild runs make and friends as child
  // processes), heartbeating meanwhile. A build cannot be stopped halfway:
  // on a lost lease its result is dropped; on shutdown the agent waits for
  // it and then hands the job back.
  void run_build(const v1::Job& job) {
    const v1::KernelBuild& b = job.build();
    spdlog::info("job.build_start job={} attempt={} label={} source={} patches={}", job.job_id(), job.attempt(),
                 b.label(), b.source(), b.patch_files_size());
    if (!opts_.build_runner) {
      finish(job, error_outcome("this agent cannot build kernels (started without --builder)"));
      return;
    }
    std::atomic<bool> done{false};
    v1::Outcome outcome;
    std::thread worker([&] {
      try {
        outcome = opts_.build_runner(b, [&](const std::string& line) {
          spdlog::info("job.build_progress job={} label={} {}", job.job_id(), b.label(), line);
        });
      } catch (const std::exception& e) {
        outcome = error_outcome(std::string("kernel build: ") + e.what());
      }
      done.store(true);
    });
    bool abandoned = false;
    auto next_beat = std::chrono::steady_clock::now() + heartbeat_;
    while (!done.load()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      const auto now = std::chrono::steady_clock::now();
      if (now < next_beat || abandoned) continue;
      next_beat = now + heartbeat_;
      const grpc::Status s = heartbeat(job);
      if (s.error_code() == StatusCode::FAILED_PRECONDITION) {
        spdlog::warn("job.lost_lease job={} attempt={} (the build goes on; its result is dropped)", job.job_id(),
                     job.attempt());
        abandoned = true;
      } else if (!s.ok()) {
        handle_error("heartbeat", s);
      }
    }
    worker.join();
    if (abandoned) return;
    if (!outcome.has_build()) {
      // The agent could not try (an exception): still a build result, so the
      // coordinator records the failure and ends the jobs waiting for it.
      outcome.set_verdict(v1::VERDICT_BUILD_FAILURE);
      outcome.mutable_build()->set_failed_stage("agent");
      outcome.mutable_build()->set_error(outcome.error());
    }
    if (stopping() && !outcome.build().ok()) {
      // A failure during shutdown may be the shutdown's (make got the
      // signal too): give the job back rather than record a build-failure.
      v1::ReleaseJobRequest rel;
      rel.set_agent_id(agent_id_);
      rel.set_agent_secret(lease_secret_);
      rel.set_job_id(job.job_id());
      rel.set_attempt(job.attempt());
      rel.set_reason("agent shutting down");
      v1::ReleaseJobResponse resp;
      auto ctx = context(std::chrono::seconds(5));
      stub_->ReleaseJob(ctx.get(), rel, &resp);
      return;
    }
    spdlog::info(
        "job.build_done job={} attempt={} label={} ok={} release={} cached={} seconds={:.1f}",
        job.job_id(), job.attempt(), b.label(), outcome.build().ok(), outcome.build().release(),
        outcome.build().cached(), seconds_of(outcome.build().build_time()));
    finish(job, outcome);
  }

  // Runs the job in a child `leapfrog-agent run`, heartbeating meanwhile.
  void run_job(const v1::Job& job) {
    if (job.has_build()) {
      run_build(job);
      return;
    }
    if (job.spec().scenario().rfind("selftest-", 0) == 0) {
      run_selftest(job);
      return;
    }
    spdlog::info("job.start job={} attempt={} scenario={} fs={} seed={}", job.job_id(), job.attempt(),
                 job.spec().scenario(), job.spec().fs(), job.spec().seed());
    const std::string dir = spool_.dir() + "/job-" + std::to_string(job.job_id());
    stdfs::create_directories(dir);
    const std::string out = dir + "/outcome.json", err = dir + "/stderr.txt";
    auto argv = job_argv(job);
    // The run's live counts, in memory it shares with us (it runs in a child
    // process, and judges in a child of that): sent with each heartbeat.
    SharedProgress progress;
    if (progress.fd() >= 0) argv.insert(argv.end(), {"--progress-fd", std::to_string(kProgressFd)});

    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_addopen(&fa, 2, err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (progress.fd() >= 0) posix_spawn_file_actions_adddup2(&fa, progress.fd(), kProgressFd);
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    pid_t pid = -1;
    const int rc = posix_spawn(&pid, opts_.self_exe.c_str(), &fa, nullptr, args.data(), environ);
    posix_spawn_file_actions_destroy(&fa);
    if (rc != 0) {
      finish(job, error_outcome(std::string("cannot start the run: ") + std::strerror(rc)));
      return;
    }
    KernelLog kernel_log;  // from now: an oops during the run makes it a kernel crash
    // What tells an OOM kill (run_end.h): the run's processes as they come,
    // and its memory cgroup's count of OOM kills.
    RunEndFacts facts;
    const OomCounter oom_counter = OomCounter::of(pid);
    facts.counter_file = oom_counter.file();
    facts.oom_kills_before = oom_counter.read();
    facts.pids.insert(pid);
    const auto started = std::chrono::steady_clock::now();
    auto next_scan = started;
    const int pidfd = static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
    const int64_t run_ms = std::max<int64_t>(
        job.spec().iterations() > 0
            ? 30 * 60 * 1000
            : job.spec().duration().seconds() * 1000 + job.spec().duration().nanos() / 1'000'000,
        declared_run_ms(job.spec()));
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(run_ms) + std::chrono::minutes(2);
    bool abandoned = false, handed_back = false, overdue = false;
    auto next_beat = std::chrono::steady_clock::now() + heartbeat_;
    int status = 0;
    struct rusage usage {};
    bool heartbeat_failing = false;
    for (;;) {
      if (heartbeat_failing) {
        // Reconnect meanwhile (see pause_for).
        channel_->WaitForStateChange(channel_->GetState(true),
                                     std::chrono::system_clock::now() + std::chrono::milliseconds(100));
      } else {
        pollfd p{pidfd, POLLIN, 0};
        poll(&p, 1, 100);
      }
      if (wait4(pid, &status, WNOHANG, &usage) == pid) break;
      const auto now = std::chrono::steady_clock::now();
      if (now >= next_scan) {
        // Often while the run sets up and its actors start, then at the
        // heartbeats' pace: they live as long as the race.
        next_scan = now + (now - started < std::chrono::seconds(5) ? std::chrono::milliseconds(250)
                                                                   : heartbeat_);
        for (const pid_t p : process_tree(pid)) facts.pids.insert(p);
      }
      if (stopping() && !handed_back) {
        // Hand the job back: stop the run (its sandbox cleans up), release.
        kill(pid, SIGTERM);
        handed_back = true;
      }
      if (now > deadline && !overdue) {
        kill(pid, SIGKILL);
        overdue = true;
      }
      if (now >= next_beat && !abandoned && !handed_back) {
        next_beat = now + heartbeat_;
        const grpc::Status s = heartbeat(job, progress.get());
        heartbeat_failing = !s.ok() && s.error_code() != StatusCode::FAILED_PRECONDITION;
        if (s.error_code() == StatusCode::FAILED_PRECONDITION) {
          spdlog::warn("job.lost_lease job={} attempt={}", job.job_id(), job.attempt());
          kill(pid, SIGTERM);
          abandoned = true;
        } else if (!s.ok()) {
          handle_error("heartbeat", s);
        }
      }
    }
    if (pidfd >= 0) close(pidfd);
    if (abandoned) {
      stdfs::remove_all(dir);
      return;
    }
    if (handed_back) {
      v1::ReleaseJobRequest rel;
      rel.set_agent_id(agent_id_);
      rel.set_agent_secret(lease_secret_);
      rel.set_job_id(job.job_id());
      rel.set_attempt(job.attempt());
      rel.set_reason("agent shutting down");
      v1::ReleaseJobResponse resp;
      auto ctx = context(std::chrono::seconds(5));
      stub_->ReleaseJob(ctx.get(), rel, &resp);
      stdfs::remove_all(dir);
      spdlog::info("job.handed_back job={} attempt={}", job.job_id(), job.attempt());
      return;
    }
    v1::Outcome outcome;
    std::ifstream in(out);
    std::stringstream text;
    text << in.rdbuf();
    // Read once: both the crash check and the OOM check look at it.
    const std::string klog = kernel_log.read_new();
    facts.wait_status = status;
    facts.killed_by_agent = overdue;
    facts.kernel_log = klog;
    facts.oom_kills_after = oom_counter.read();
    const std::optional<v1::RunKilled> killed = run_killed(facts);
    try {
      if (overdue) throw std::runtime_error("the run exceeded its deadline and was killed");
      // Killed by someone else (the OOM killer, an operator): whatever it
      // printed is cut short, so say what happened instead of parsing it.
      if (killed && (killed->reason() == v1::RUN_KILL_SIGNAL || run_signal(status) != 0))
        throw std::runtime_error(run_killed_message(*killed));
      outcome = outcome_of_run(text.str());
    } catch (const std::exception& e) {
      std::ifstream errs(err);
      std::stringstream et;
      et << errs.rdbuf();
      std::string tail = et.str();
      if (tail.size() > 2000) tail = tail.substr(tail.size() - 2000);
      std::string why = e.what();
      if (WIFEXITED(status)) why += " (exit status " + std::to_string(WEXITSTATUS(status)) + ")";
      outcome = error_outcome(why + (tail.empty() ? "" : ": " + tail));
      // The largest of the run's processes that ended (the killed one too).
      outcome.mutable_run()->set_peak_rss_bytes(static_cast<uint64_t>(usage.ru_maxrss) * 1024);
    }
    if (overdue) {
      outcome.mutable_killed()->set_reason(v1::RUN_KILL_DEADLINE);
      outcome.mutable_killed()->set_signal(SIGKILL);
    } else if (killed && killed->reason() == v1::RUN_KILL_OUT_OF_MEMORY) {
      // Not the kernel's fault nor the scenario's: an infrastructure failure
      // that says so, never an unexplained exit status. A violation the run
      // still reported (an actor killed after it was found) stands.
      spdlog::warn("job.out_of_memory job={} attempt={} line=\"{}\" peak_rss_kib={}", job.job_id(),
                   job.attempt(), killed->line(), usage.ru_maxrss);
      *outcome.mutable_killed() = *killed;
      if (outcome.verdict() == v1::VERDICT_VIOLATION) {
        outcome.mutable_run()->add_notes(run_killed_message(*killed));
      } else {
        outcome.set_verdict(v1::VERDICT_INFRA_FAILURE);
        outcome.set_error(run_killed_message(*killed));
      }
    } else if (killed) {
      *outcome.mutable_killed() = *killed;
    }
    // An oops that killed an actor and left the kernel running: the run's
    // verdict is the kernel's, not the broken run's (the launcher, which
    // reads the console, would reboot the VM on it but may come second).
    if (const auto crash = KernelLog::first_crash_in(klog)) {
      spdlog::warn("job.kernel_report job={} kind={} title=\"{}\" verdict_was={}", job.job_id(), crash->kind,
                   crash->title, v1::Verdict_Name(outcome.verdict()));
      std::string why = crash->title;
      if (!outcome.error().empty()) why += " (the run: " + outcome.error().substr(0, 300) + ")";
      outcome.set_verdict(v1::VERDICT_KERNEL_CRASH);
      outcome.set_error(why);
      outcome.mutable_killed()->set_reason(v1::RUN_KILL_KERNEL_CRASH);
      outcome.mutable_killed()->set_line(crash->title);
      outcome.mutable_killed()->set_signal(run_signal(status));
    }
    // The coordinator refuses an outcome over its cap: trim it here, saying
    // what went, rather than have the report refused and dropped.
    if (const size_t bytes = outcome.ByteSizeLong(); fit_outcome(outcome, kMaxOutcomeBytes))
      spdlog::warn(
          "job.outcome_trimmed job={} bytes={} now={} violations_kept={} violation_count={}",
          job.job_id(), bytes, outcome.ByteSizeLong(), outcome.violations_size(),
          outcome.violation_count());
    std::error_code ec;
    try {
      finish(job, outcome);
    } catch (...) {
      stdfs::remove_all(dir, ec);
      throw;
    }
    stdfs::remove_all(dir, ec);
  }

  void finish(const v1::Job& job, const v1::Outcome& outcome) {
    v1::ReportOutcomeRequest req;
    req.set_agent_id(agent_id_);
    req.set_agent_secret(lease_secret_);
    req.set_job_id(job.job_id());
    req.set_attempt(job.attempt());
    *req.mutable_outcome() = outcome;
    try {
      spool_.put(req);
    } catch (const std::exception& e) {
      // The spool broke after the start check (filled up, remounted
      // read-only): report straight away, or hand the job back so that its
      // run is not lost; then stop, as the start check would have.
      spdlog::error("agent.spool_failed job={} attempt={} error=\"{}\"", job.job_id(),
                    job.attempt(), e.what());
      v1::ReportOutcomeResponse resp;
      auto ctx = context(std::chrono::seconds(20));
      if (!stub_->ReportOutcome(ctx.get(), req, &resp).ok())
        release(job, "the agent's spool failed");
      throw;
    }
    spdlog::info("job.done job={} attempt={} verdict={}", job.job_id(), job.attempt(),
                 v1::Verdict_Name(outcome.verdict()));
    drain_spool();
  }

  void release(const v1::Job& job, const std::string& reason) {
    v1::ReleaseJobRequest rel;
    rel.set_agent_id(agent_id_);
    rel.set_agent_secret(lease_secret_);
    rel.set_job_id(job.job_id());
    rel.set_attempt(job.attempt());
    rel.set_reason(reason);
    v1::ReleaseJobResponse resp;
    auto ctx = context(std::chrono::seconds(5));
    stub_->ReleaseJob(ctx.get(), rel, &resp);
  }

 public:
  int exit_code_ = 0;

 private:
  ConnectOptions opts_;
  Spool spool_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::AgentService::Stub> stub_;
  std::string address_;  // what channel_ dials
  v1::Capabilities caps_;
  std::string agent_id_;
  std::string secret_;        // of the latest registration
  std::string lease_secret_;  // the one the running job was leased with
  std::chrono::milliseconds heartbeat_{2000};
};

}  // namespace

void fill_connect_defaults(ConnectOptions& opts) {
  if (opts.name.empty()) opts.name = host_name() + "-" + std::to_string(getpid());
  if (opts.spool_dir.empty()) opts.spool_dir = "/var/tmp/leapfrog-agent-" + opts.name;
}

int run_connect(const ConnectOptions& in) {
  ConnectOptions opts = in;
  fill_connect_defaults(opts);
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGINT, &sa, nullptr);
  signal(SIGPIPE, SIG_IGN);
  {
    Spool spool(opts.spool_dir);
    spool.check();
    spool.remove_partial();
  }
  Agent agent(opts);
  const int rc = agent.run();
  return agent.exit_code_ ? agent.exit_code_ : rc;
}

}  // namespace leapfrog
