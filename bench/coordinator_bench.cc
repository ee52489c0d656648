// Coordinator throughput against the database underneath it, measured side by
// side in one run on one embedded PostgreSQL, first with durable commits (as
// `leapfrog up` runs it), then with fsync off (CPU and round trips only):
//
//  - lease: jobs leased per second through AgentService.Lease (a real
//    CoordinatorServer over a real PgStore, 200 agents driven by async calls,
//    each leasing in a loop) divided by the store's own "lease_job" statement
//    run directly through libpqxx on one autocommit connection until the
//    queue is empty; plus lease latency (p50/p99) with 200 agents, saturated
//    and paced.
//  - ingest: outcome + violation rows stored per second end to end
//    (ReportOutcome RPCs, 8, 32 and 200 calls in flight: the store's group
//    commit batches what arrives together; 200 is the lease side's agent
//    count, one report in flight per agent) divided by a raw COPY (pqxx::stream_to)
//    of the same rows into the same tables; with the CPU each side used per
//    row stored, in this process and in PostgreSQL, and, for durable commits,
//    the ceiling that the commit latency alone puts on each count of calls
//    in flight (an outcome is acknowledged only once committed, so a commit
//    carries at most that many). --floors also measures
//    gRPC storing nothing and the store called without gRPC; --loop=SIDE
//    repeats one side for a profiler.
//  - fleet: 1,000 agents (--fleet-agents), each running a leased job for a
//    few seconds while heartbeating, then leasing the next: lease and
//    heartbeat latency (p50/p99) and the CPU each lease costs (issue 23).
//  - touch_agent: the agent service touches an agent at most once per
//    heartbeat interval; a store in front of the PgStore
//    (touch_every_lease_store.h) also measures a touch on every lease, as
//    the service did before.
//
// Every run uses a fresh campaign of the same size for each side. Rounds
// alternate which side runs first; the table shows the medians of the
// throughputs and of the rounds' ratios. Runs as root (PostgreSQL then runs
// as `postgres`); the cluster lives in a folder under /var/tmp that is
// removed at the end.

#include <grpcpp/alarm.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <spdlog/spdlog.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <pqxx/pqxx>
#include <random>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "bench/touch_every_lease_store.h"
#include "common/ktap/words.h"
#include "coordinator/pg/embedded_postgres.h"
#include "coordinator/server.h"
#include "coordinator/store/pg_store.h"
#include "coordinator/store/pg_util.h"
#include "leapfrog/v1/agent.grpc.pb.h"

namespace leapfrog::coord {
namespace {

using namespace std::chrono_literals;
using Steady = std::chrono::steady_clock;

constexpr const char* kToken = "bench-token";
constexpr const char* kKernel = "host";
constexpr const char* kFs = "tmpfs";
// The bench agents state no uname, so their release is empty (lease_job's $5).
constexpr const char* kRelease = "";

struct Options {
  int rounds = 3;
  int agents = 200;
  int lease_jobs = 10000;         // per run, fsync off
  int durable_lease_jobs = 2000;  // per run, durable (each raw lease waits for its fsync)
  int paced_think_ms = 100;       // think time between an agent's leases, paced run
  int paced_leases = 10;          // leases per agent, paced run
  // The fleet run: this many agents, each running a job for fleet_think_ms
  // +-50 % after each lease and heartbeating every fleet_heartbeat_ms meanwhile.
  int fleet_agents = 1000;
  int fleet_think_ms = 5000;
  int fleet_heartbeat_ms = 2000;  // ServiceConfig's default
  int fleet_leases = 3;           // leases per agent
  int ingest_outcomes = 2000;
  std::vector<int> ingest_clients = {8, 32, 200};  // calls in flight, one gRPC run each
  int channels = 8;                           // client connections the agents share
  PgStoreOptions store;                       // --report-writers, --min-parallel-batch
  bool no_sync_only = false;                  // skip the durable runs
  bool ingest_only = false;                   // skip the lease runs
  bool floors = false;  // also ingest through gRPC storing nothing, and the store without gRPC
  std::string loop;                           // "raw" or "grpc": that ingest side only, for a profiler
};

[[noreturn]] void usage(const char* argv0) {
  std::fprintf(stderr,
               "usage: %s [--rounds=N] [--agents=N] [--lease-jobs=N] [--durable-lease-jobs=N]"
               " [--paced-think-ms=N] [--paced-leases=N] [--fleet-agents=N] [--fleet-think-ms=N]"
               " [--fleet-heartbeat-ms=N] [--fleet-leases=N] [--ingest-outcomes=N]"
               " [--ingest-clients=N,N,...] [--channels=N] [--no-sync-only] [--ingest-only]"
               " [--report-writers=N] [--min-parallel-batch=N] [--lease-writers=N]"
               " [--floors]"
               " [--loop=raw|grpc|store|grpc-discard|paced]\n",
               argv0);
  std::exit(2);
}

// --name=value flags; unknown ones are an error.
Options parse_options(int argc, char** argv) {
  Options o;
  std::map<std::string, int*> ints = {
      {"rounds", &o.rounds},
      {"agents", &o.agents},
      {"lease-jobs", &o.lease_jobs},
      {"durable-lease-jobs", &o.durable_lease_jobs},
      {"paced-think-ms", &o.paced_think_ms},
      {"paced-leases", &o.paced_leases},
      {"fleet-agents", &o.fleet_agents},
      {"fleet-think-ms", &o.fleet_think_ms},
      {"fleet-heartbeat-ms", &o.fleet_heartbeat_ms},
      {"fleet-leases", &o.fleet_leases},
      {"ingest-outcomes", &o.ingest_outcomes},
      {"channels", &o.channels},
      {"report-writers", &o.store.report_writers},
      {"min-parallel-batch", &o.store.min_parallel_report_batch},
      {"lease-writers", &o.store.lease_writers},
  };
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--no-sync-only") {
      o.no_sync_only = true;
      continue;
    }
    if (arg == "--floors") {
      o.floors = true;
      continue;
    }
    if (arg == "--ingest-only") {
      o.ingest_only = true;
      continue;
    }
    auto eq = arg.find('=');
    if (arg.rfind("--", 0) != 0 || eq == std::string::npos) usage(argv[0]);
    std::string name = arg.substr(2, eq - 2);
    std::string value = arg.substr(eq + 1);
    if (name == "loop") {
      if (value != "raw" && value != "grpc" && value != "store" && value != "grpc-discard" &&
          value != "paced")
        usage(argv[0]);
      o.loop = value;
      continue;
    }
    if (name == "ingest-clients") {
      o.ingest_clients.clear();
      for (size_t at = 0; at <= value.size();) {
        size_t comma = std::min(value.find(',', at), value.size());
        o.ingest_clients.push_back(std::max(1, std::atoi(value.substr(at, comma - at).c_str())));
        at = comma + 1;
      }
      continue;
    }
    auto it = ints.find(name);
    if (it == ints.end()) usage(argv[0]);
    *it->second = std::max(1, std::atoi(value.c_str()));
  }
  return o;
}

// ---- small helpers ----

double seconds_between(Steady::time_point a, Steady::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

double micros_between(Steady::time_point a, Steady::time_point b) {
  return std::chrono::duration<double, std::micro>(b - a).count();
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// p in [0, 100]; nearest rank.
double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t rank = static_cast<size_t>(p / 100.0 * static_cast<double>(v.size() - 1) + 0.5);
  return v[std::min(rank, v.size() - 1)];
}

// A folder under /var/tmp every user can enter (PostgreSQL runs as
// `postgres` when we are root); removed with everything in it.
class BenchDir {
 public:
  BenchDir() {
    char path[] = "/var/tmp/leapfrog-bench-XXXXXX";
    if (mkdtemp(path) == nullptr) throw std::runtime_error("mkdtemp under /var/tmp failed");
    chmod(path, 0755);
    path_ = path;
  }
  ~BenchDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  BenchDir(const BenchDir&) = delete;
  BenchDir& operator=(const BenchDir&) = delete;
  std::string operator/(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

// ---- the fixture: database, store, server, client channels ----

struct LeaseRun {
  double jobs_per_sec = 0;
  std::vector<double> latency_us;  // per leased job
  // gRPC runs: per leased job, the store's lease_job call inside the
  // coordinator (group lease queue, statement, commit).
  std::vector<double> store_us;
  double bench_cpu_us_per_lease = 0, pg_cpu_us_per_lease = 0;  // gRPC runs
};

// The fleet run: leases and heartbeats of many paced agents.
struct FleetRun {
  std::vector<double> lease_us, heartbeat_us;
  double seconds = 0;
  double bench_cpu_us_per_lease = 0, pg_cpu_us_per_lease = 0;
};

// CPU seconds used so far by this process (the bench's clients and the
// coordinator, which run in it) and by PostgreSQL (the postmaster and all its
// processes, live and exited).
struct CpuTimes {
  double bench = 0;
  double pg = 0;
};

struct IngestRun {
  double rows_per_sec = 0;
  int64_t rows = 0;
  CpuTimes cpu_us_per_row;  // during the timed part
  double timed_from = 0, timed_to = 0;  // CLOCK_MONOTONIC seconds
};

double monotonic_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) / 1e9;
}

// utime + stime (+ cutime + cstime: children waited for) of /proc/PID/stat, in seconds.
double proc_cpu_seconds(pid_t pid, bool with_children, pid_t* parent = nullptr) {
  std::FILE* f = std::fopen(("/proc/" + std::to_string(pid) + "/stat").c_str(), "r");
  if (!f) return 0;
  char buf[1024];
  size_t n = std::fread(buf, 1, sizeof buf - 1, f);
  std::fclose(f);
  buf[n] = 0;
  // Fields after the command name, which ends with the last ')'.
  const char* p = std::strrchr(buf, ')');
  if (!p) return 0;
  long long ppid = 0, ut = 0, st = 0, cut = 0, cst = 0;
  if (std::sscanf(p + 2, "%*c %lld %*d %*d %*d %*d %*u %*u %*u %*u %*u %lld %lld %lld %lld", &ppid,
                  &ut, &st, &cut, &cst) != 5) {
    return 0;
  }
  if (parent) *parent = static_cast<pid_t>(ppid);
  const double tick = static_cast<double>(sysconf(_SC_CLK_TCK));
  return static_cast<double>(ut + st + (with_children ? cut + cst : 0)) / tick;
}

CpuTimes cpu_now(pid_t postmaster) {
  CpuTimes t;
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  t.bench = static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
            static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
  t.pg = proc_cpu_seconds(postmaster, true);
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    const std::string name = entry.path().filename().string();
    if (name.empty() || !std::isdigit(static_cast<unsigned char>(name[0]))) continue;
    pid_t parent = 0;
    double secs = proc_cpu_seconds(static_cast<pid_t>(std::atoi(name.c_str())), false, &parent);
    if (parent == postmaster) t.pg += secs;
  }
  return t;
}

CpuTimes per_row_us(const CpuTimes& a, const CpuTimes& b, int64_t rows) {
  const double k = 1e6 / static_cast<double>(rows);
  return {(b.bench - a.bench) * k, (b.pg - a.pg) * k};
}

class Bench {
 public:
  explicit Bench(const Options& o) : opts_(o) {
    pg_ = std::make_unique<EmbeddedPostgres>();
    pg_->start(dir_ / "pg");
    url_ = pg_->url();
    store_ = std::make_unique<PgStore>(url_, o.store);
    ServerOptions so;
    so.token = kToken;
    // Long enough that no lease expires while the bench holds it.
    so.service.lease_duration = std::chrono::hours(1);
    store_view_ = std::make_unique<TouchEveryLeaseStore>(*store_);
    server_ = std::make_unique<CoordinatorServer>(*store_view_, clock_, so);
    for (int i = 0; i < o.channels; ++i) {
      grpc::ChannelArguments args;
      // One connection per channel, as separate agents would have.
      args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
      args.SetInt("leapfrog.bench.channel", i);
      auto channel =
          grpc::CreateCustomChannel(server_->address(), grpc::InsecureChannelCredentials(), args);
      stubs_.push_back(v1::AgentService::NewStub(channel));
      channels_.push_back(channel);
    }
    register_agents();
  }
  ~Bench() {
    stubs_.clear();
    channels_.clear();
    if (server_) server_->shutdown();
    server_.reset();
    store_view_.reset();
    store_.reset();
    pg_->stop();
  }

  TouchEveryLeaseStore& store_view() { return *store_view_; }

  // A campaign of `n` queued jobs, and a freshly vacuumed jobs table so that
  // no side pays for the dead index entries of the previous run.
  int64_t fresh_campaign(const std::string& name, int n) {
    v1::CampaignSpec spec;
    spec.set_name(name);
    spec.add_scenarios("setattr-lookup");
    spec.add_filesystems(kFs);
    std::vector<NewJob> jobs(static_cast<size_t>(n));
    for (size_t i = 0; i < jobs.size(); ++i) {
      jobs[i].spec.set_scenario("setattr-lookup");
      jobs[i].spec.set_fs(kFs);
      jobs[i].spec.set_seed(i);
      jobs[i].spec.set_iterations(100000);
      (*jobs[i].spec.mutable_params())["depth"] = 3;
      jobs[i].kernel_label = kKernel;
    }
    int64_t id = store_->create_campaign(spec, jobs, 0, clock_.now());
    settle();
    return id;
  }

  // VACUUM and CHECKPOINT: each measured run starts from the same state.
  void settle() {
    pqxx::connection conn(url_);
    pqxx::nontransaction txn(conn);
    txn.exec("VACUUM ANALYZE jobs");
    txn.exec("VACUUM ANALYZE agents");
    txn.exec("CHECKPOINT");
  }

  // Median wall time of one committed single-row insert (autocommit), in
  // seconds: what every durable commit waits for at least (the WAL flush).
  double commit_seconds(int samples = 60) {
    pqxx::connection conn(url_);
    pqxx::nontransaction txn(conn);
    txn.exec("CREATE TABLE IF NOT EXISTS bench_commit (x int)");
    std::vector<double> times;
    for (int i = 0; i < samples; ++i) {
      auto start = Steady::now();
      txn.exec("INSERT INTO bench_commit VALUES (1)");
      times.push_back(seconds_between(start, Steady::now()));
    }
    txn.exec("DROP TABLE bench_commit");
    std::sort(times.begin(), times.end());
    return times[times.size() / 2];
  }

  // Durable: fsync and synchronous_commit on (the defaults). Otherwise both
  // off, which leaves only CPU and round trips to compare. Pooled connections
  // pick the change up before their next statement.
  void set_durable(bool durable) {
    pqxx::connection conn(url_);
    pqxx::nontransaction txn(conn);
    const std::string value = durable ? "on" : "off";
    for (const char* setting : {"fsync", "synchronous_commit", "full_page_writes"}) {
      txn.exec(std::string("ALTER SYSTEM SET ") + setting + " = " + value);
    }
    txn.exec("SELECT pg_reload_conf()");
    // The reload is asynchronous: wait until a new session sees it.
    for (int i = 0; i < 200; ++i) {
      pqxx::connection probe(url_);
      if (pqxx::nontransaction(probe).exec("SHOW fsync")[0][0].as<std::string>() == value) return;
      std::this_thread::sleep_for(10ms);
    }
    throw std::runtime_error("PostgreSQL did not take fsync = " + value);
  }

  // The store's lease statement, on one autocommit connection, until the
  // queue is empty.
  LeaseRun raw_lease(int n) {
    fresh_campaign("raw-lease", n);
    pqxx::connection conn(url_);
    conn.prepare("lease_job", PgStore::statement_sql("lease_job"));
    const std::string fs = std::string("{\"") + kFs + "\"}";
    const int64_t deadline = (clock_.now() + std::chrono::hours(1)).time_since_epoch().count();
    LeaseRun run;
    run.latency_us.reserve(static_cast<size_t>(n));
    int leased = 0;
    auto start = Steady::now();
    auto last = start;
    for (;;) {
      auto t0 = Steady::now();
      pqxx::nontransaction txn(conn);
      auto r = txn.exec_prepared("lease_job", "raw-agent", deadline, kKernel, fs, kRelease,
                                 kTrustedCaller);
      if (r.empty()) break;
      last = Steady::now();
      run.latency_us.push_back(micros_between(t0, last));
      ++leased;
    }
    if (leased != n) throw std::runtime_error("raw lease: leased " + std::to_string(leased));
    run.jobs_per_sec = leased / seconds_between(start, last);
    return run;
  }

  // Every agent leases in a loop (waiting `think` between leases) until the
  // queue is empty; calls run async on one client thread.
  LeaseRun grpc_lease(int n, std::chrono::milliseconds think) {
    fresh_campaign("grpc-lease", n);
    struct Agent;
    struct Tag {
      Agent* agent;
      bool alarm;
    };
    struct Agent {
      v1::AgentService::Stub* stub = nullptr;
      v1::LeaseRequest req;
      std::unique_ptr<grpc::ClientContext> ctx;
      v1::LeaseResponse resp;
      grpc::Status status;
      std::unique_ptr<grpc::ClientAsyncResponseReader<v1::LeaseResponse>> rpc;
      grpc::Alarm alarm;
      Steady::time_point sent;
      Tag call_tag{this, false};
      Tag alarm_tag{this, true};
    };
    grpc::CompletionQueue cq;
    std::vector<std::unique_ptr<Agent>> agents;
    for (size_t i = 0; i < static_cast<size_t>(opts_.agents); ++i) {
      auto a = std::make_unique<Agent>();
      a->stub = stubs_[i % stubs_.size()].get();
      a->req.set_agent_id(agent_ids_[i]);
      a->req.set_agent_secret(agent_secrets_[i]);
      a->req.mutable_wait()->set_seconds(0);
      agents.push_back(std::move(a));
    }
    auto send = [&](Agent& a) {
      a.ctx = std::make_unique<grpc::ClientContext>();
      a.ctx->AddMetadata("authorization", std::string("Bearer ") + kToken);
      a.resp.Clear();
      a.sent = Steady::now();
      a.rpc = a.stub->PrepareAsyncLease(a.ctx.get(), a.req, &cq);
      a.rpc->StartCall();
      a.rpc->Finish(&a.resp, &a.status, &a.call_tag);
    };
    LeaseRun run;
    run.latency_us.reserve(static_cast<size_t>(n));
    std::mt19937_64 rng(42);
    std::uniform_real_distribution<double> jitter(0.5, 1.5);
    std::uniform_real_distribution<double> spread(0.0, 1.0);
    int leased = 0;
    std::string error;  // the first failed call; the rest drain first
    size_t active = agents.size();
    const CpuTimes cpu0 = cpu_now(pg_->pid());
    store_view_->take_lease_times();
    store_view_->time_leases = true;
    auto start = Steady::now();
    auto last = start;
    for (auto& a : agents) {
      if (think.count() == 0) {
        send(*a);
        continue;
      }
      // Paced agents start spread over one think time, not all at once.
      auto wait = std::chrono::duration_cast<Steady::duration>(think * spread(rng));
      a->alarm.Set(&cq, std::chrono::system_clock::now() + wait, &a->alarm_tag);
    }
    while (active > 0) {
      void* raw_tag = nullptr;
      bool ok = false;
      if (!cq.Next(&raw_tag, &ok)) break;
      auto* tag = static_cast<Tag*>(raw_tag);
      Agent& a = *tag->agent;
      if (tag->alarm) {
        send(a);
        continue;
      }
      if (!a.status.ok()) {
        if (error.empty()) error = "Lease: " + a.status.error_message();
        --active;
        continue;
      }
      if (!a.resp.has_job()) {
        --active;  // the queue is empty for this agent
        continue;
      }
      last = Steady::now();
      run.latency_us.push_back(micros_between(a.sent, last));
      ++leased;
      if (think.count() > 0) {
        auto wait = std::chrono::duration_cast<Steady::duration>(think * jitter(rng));
        a.alarm.Set(&cq, std::chrono::system_clock::now() + wait, &a.alarm_tag);
      } else {
        send(a);
      }
    }
    const CpuTimes cpu1 = cpu_now(pg_->pid());
    store_view_->time_leases = false;
    run.store_us = store_view_->take_lease_times();
    cq.Shutdown();
    void* ignored_tag;
    bool ignored_ok;
    while (cq.Next(&ignored_tag, &ignored_ok)) {
    }
    if (!error.empty()) throw std::runtime_error(error);
    const double k = 1e6 / static_cast<double>(std::max(leased, 1));
    run.bench_cpu_us_per_lease = (cpu1.bench - cpu0.bench) * k;
    run.pg_cpu_us_per_lease = (cpu1.pg - cpu0.pg) * k;
    if (leased != n) throw std::runtime_error("gRPC lease: leased " + std::to_string(leased));
    run.jobs_per_sec = leased / seconds_between(start, last);
    return run;
  }

  // `agents` agents lease one job each in turn; each "runs" it for `think`
  // +-50 %, heartbeating every `beat` meanwhile, then leases again, until
  // every agent has leased `per_agent` jobs. All calls async on one thread.
  FleetRun fleet(int agents, int per_agent, std::chrono::milliseconds think,
                 std::chrono::milliseconds beat) {
    if (agents > static_cast<int>(agent_ids_.size()))
      throw std::runtime_error("fleet: only " + std::to_string(agent_ids_.size()) +
                               " agents registered");
    fresh_campaign("fleet", agents * per_agent);
    enum class Op { Lease, Heartbeat, Alarm };
    struct Agent;
    struct Tag {
      Agent* agent;
      Op op;
    };
    struct Agent {
      v1::AgentService::Stub* stub = nullptr;
      std::string id, secret;
      std::unique_ptr<grpc::ClientContext> ctx;
      v1::LeaseResponse lease;
      v1::HeartbeatResponse beat;
      grpc::Status status;
      std::unique_ptr<grpc::ClientAsyncResponseReader<v1::LeaseResponse>> lease_rpc;
      std::unique_ptr<grpc::ClientAsyncResponseReader<v1::HeartbeatResponse>> beat_rpc;
      grpc::Alarm alarm;
      Steady::time_point sent, run_ends;
      v1::Job job;
      bool running = false;
      int leased = 0;
      Tag lease_tag{this, Op::Lease}, beat_tag{this, Op::Heartbeat}, alarm_tag{this, Op::Alarm};
    };
    grpc::CompletionQueue cq;
    std::vector<std::unique_ptr<Agent>> fleet;
    for (int i = 0; i < agents; ++i) {
      auto a = std::make_unique<Agent>();
      a->stub = stubs_[static_cast<size_t>(i) % stubs_.size()].get();
      a->id = agent_ids_[static_cast<size_t>(i)];
      a->secret = agent_secrets_[static_cast<size_t>(i)];
      fleet.push_back(std::move(a));
    }
    auto context = [](Agent& a) {
      a.ctx = std::make_unique<grpc::ClientContext>();
      a.ctx->AddMetadata("authorization", std::string("Bearer ") + kToken);
      a.sent = Steady::now();
    };
    auto send_lease = [&](Agent& a) {
      context(a);
      v1::LeaseRequest req;
      req.set_agent_id(a.id);
      req.set_agent_secret(a.secret);
      a.lease.Clear();
      a.lease_rpc = a.stub->PrepareAsyncLease(a.ctx.get(), req, &cq);
      a.lease_rpc->StartCall();
      a.lease_rpc->Finish(&a.lease, &a.status, &a.lease_tag);
    };
    auto send_beat = [&](Agent& a) {
      context(a);
      v1::HeartbeatRequest req;
      req.set_agent_id(a.id);
      req.set_agent_secret(a.secret);
      req.set_job_id(a.job.job_id());
      req.set_attempt(a.job.attempt());
      a.beat_rpc = a.stub->PrepareAsyncHeartbeat(a.ctx.get(), req, &cq);
      a.beat_rpc->StartCall();
      a.beat_rpc->Finish(&a.beat, &a.status, &a.beat_tag);
    };
    auto at = [](Steady::time_point t) {
      return std::chrono::system_clock::now() +
             std::chrono::duration_cast<std::chrono::system_clock::duration>(t - Steady::now());
    };
    std::mt19937_64 rng(43);
    std::uniform_real_distribution<double> jitter(0.5, 1.5);
    std::uniform_real_distribution<double> spread(0.0, 1.0);
    // Until the next beat or the end of the run, whichever comes first.
    auto wait_in_run = [&](Agent& a) {
      const auto next = std::min(Steady::now() + beat, a.run_ends);
      a.alarm.Set(&cq, at(next), &a.alarm_tag);
    };
    FleetRun run;
    std::string error;
    size_t active = fleet.size();
    for (auto& a : fleet) {
      a->run_ends =
          Steady::now() + std::chrono::duration_cast<Steady::duration>(think * spread(rng));
      a->alarm.Set(&cq, at(a->run_ends), &a->alarm_tag);  // start spread over one think time
    }
    const CpuTimes cpu0 = cpu_now(pg_->pid());
    const auto start = Steady::now();
    while (active > 0) {
      void* raw = nullptr;
      bool ok = false;
      if (!cq.Next(&raw, &ok)) break;
      auto* tag = static_cast<Tag*>(raw);
      Agent& a = *tag->agent;
      const auto now = Steady::now();
      switch (tag->op) {
        case Op::Alarm:
          if (!a.running || now >= a.run_ends) {
            a.running = false;
            send_lease(a);
          } else {
            send_beat(a);
          }
          break;
        case Op::Heartbeat:
          if (!a.status.ok()) {
            if (error.empty()) error = "Heartbeat: " + a.status.error_message();
            --active;
            break;
          }
          run.heartbeat_us.push_back(micros_between(a.sent, now));
          wait_in_run(a);
          break;
        case Op::Lease:
          if (!a.status.ok() || !a.lease.has_job()) {
            if (error.empty())
              error = a.status.ok() ? "Lease: no job" : "Lease: " + a.status.error_message();
            --active;
            break;
          }
          run.lease_us.push_back(micros_between(a.sent, now));
          a.job = a.lease.job();
          if (++a.leased >= per_agent) {
            --active;
            break;
          }
          a.running = true;
          a.run_ends = now + std::chrono::duration_cast<Steady::duration>(think * jitter(rng));
          wait_in_run(a);
          break;
      }
    }
    run.seconds = seconds_between(start, Steady::now());
    const CpuTimes cpu1 = cpu_now(pg_->pid());
    cq.Shutdown();
    void* ignored_tag;
    bool ignored_ok;
    while (cq.Next(&ignored_tag, &ignored_ok)) {
    }
    if (!error.empty()) throw std::runtime_error("fleet: " + error);
    const double k = 1e6 / static_cast<double>(std::max<size_t>(run.lease_us.size(), 1));
    run.bench_cpu_us_per_lease = (cpu1.bench - cpu0.bench) * k;
    run.pg_cpu_us_per_lease = (cpu1.pg - cpu0.pg) * k;
    return run;
  }

  // ---- ingest ----

  // `n` outcomes, each with 20-50 violations (the same for both sides).
  static std::vector<v1::Outcome> make_outcomes(int n) {
    std::mt19937_64 rng(7);
    std::uniform_int_distribution<int> count(20, 50);
    std::vector<v1::Outcome> out(static_cast<size_t>(n));
    for (int i = 0; i < n; ++i) {
      auto& o = out[static_cast<size_t>(i)];
      o.set_verdict(v1::VERDICT_VIOLATION);
      o.set_ops(200000 + static_cast<uint64_t>(i));
      o.set_lookups_checked(150000);
      o.set_offsets_checked(1000);
      o.set_race_window_hits(4000);
      o.set_clock_source("tsc");
      o.set_epsilon_ns(200);
      o.set_ops_per_sec(50000.5);
      o.mutable_elapsed()->set_seconds(5);
      int v_count = count(rng);
      o.set_violation_count(static_cast<uint64_t>(v_count));
      (*o.mutable_violations_by_kind())["stale-grant"] = static_cast<uint64_t>(v_count);
      for (int k = 0; k < v_count; ++k) {
        auto* v = o.add_violations();
        v->set_kind(k % 3 ? v1::VIOLATION_KIND_STALE_GRANT : v1::VIOLATION_KIND_STALE_ENTRY);
        v->set_actor(static_cast<uint32_t>(k % 5));
        v->set_op(k % 2 ? "openat" : "stat");
        v->set_path("d0/d1/d2/file-" + std::to_string(k));
        v->set_invoke_ns(1'000'000'000'000LL + k * 1000);
        v->set_complete_ns(1'000'000'000'000LL + k * 1000 + 700);
        v->set_step(k % 4);
        v->set_component("d1");
        v->set_object("dir:/d0/d1");
        v->set_observed("granted");
        v->set_expected("EACCES");
        v1::ViolationDetail* d = v->mutable_detail();
        d->set_record(static_cast<uint64_t>(k));
        v1::PossibleVersion* first = d->add_versions();
        first->set_value("mode=0700");
        first->set_from_ns(1000000000100);
        first->set_to_ns(1000000000400);
        v1::PossibleVersion* second = d->add_versions();
        second->set_value("mode=0755");
        second->set_from_ns(1000000000400);
      }
    }
    return out;
  }

  static int64_t rows_of(const std::vector<v1::Outcome>& outcomes) {
    int64_t rows = 0;
    for (const auto& o : outcomes) rows += 1 + o.violations_size();
    return rows;
  }

  // A fresh campaign with every job leased once (attempt 1); its job ids.
  std::vector<int64_t> leased_campaign(const std::string& name, int n) {
    fresh_campaign(name, n);
    pqxx::connection conn(url_);
    conn.prepare("lease_job", PgStore::statement_sql("lease_job"));
    const int64_t deadline = (clock_.now() + std::chrono::hours(1)).time_since_epoch().count();
    std::vector<int64_t> ids;
    pqxx::work txn(conn);
    for (int i = 0; i < n; ++i) {
      auto r = txn.exec_prepared("lease_job", "ingest-agent", deadline, kKernel,
                                 std::string("{\"") + kFs + "\"}", kRelease, kTrustedCaller);
      if (r.empty()) throw std::runtime_error("ingest: campaign ran out of jobs");
      ids.push_back(r[0][0].as<int64_t>());
    }
    txn.commit();
    settle();
    return ids;
  }

  // COPY of the outcome and violation rows of `outcomes`, in one transaction.
  IngestRun raw_ingest(const std::vector<v1::Outcome>& outcomes) {
    auto ids = leased_campaign("raw-ingest", static_cast<int>(outcomes.size()));
    int64_t campaign = campaign_of(ids.front());
    pqxx::connection conn(url_);
    const CpuTimes cpu0 = cpu_now(pg_->pid());
    const double timed_from = monotonic_seconds();
    auto start = Steady::now();
    pqxx::work txn(conn);
    const std::string reported_at = timestamp_text(clock_.now());
    {
      pqxx::stream_to copy(
          txn, "outcomes",
          std::vector<std::string>{"job_id", "attempt", "campaign_id", "agent_id", "verdict", "ops",
                                   "lookups_checked", "offsets_checked", "violation_count",
                                   "race_window_hits", "error", "outcome", "reported_at"});
      for (size_t i = 0; i < outcomes.size(); ++i) {
        const auto& o = outcomes[i];
        v1::Outcome stored = o;
        stored.clear_violations();
        copy << std::make_tuple(
            ids[i], 1, campaign, std::string("ingest-agent"), static_cast<int>(o.verdict()),
            static_cast<int64_t>(o.ops()), static_cast<int64_t>(o.lookups_checked()),
            static_cast<int64_t>(o.offsets_checked()), static_cast<int64_t>(o.violation_count()),
            static_cast<int64_t>(o.race_window_hits()), o.error(), bytea_text(stored), reported_at);
      }
      copy.complete();
    }
    {
      pqxx::stream_to copy(
          txn, "violations",
          std::vector<std::string>{"job_id", "attempt", "idx", "kind", "actor", "op", "path",
                                   "step", "component", "object", "observed", "expected",
                                   "invoke_ns", "complete_ns", "detail"});
      for (size_t i = 0; i < outcomes.size(); ++i) {
        int idx = 0;
        for (const auto& v : outcomes[i].violations()) {
          copy << std::make_tuple(ids[i], 1, idx++, ktap::violation_kind_word(v.kind()),
                                  static_cast<int64_t>(v.actor()), v.op(), v.path(), v.step(),
                                  v.component(), v.object(), v.observed(), v.expected(),
                                  v.invoke_ns(), v.complete_ns(), std::string());
        }
      }
      copy.complete();
    }
    txn.commit();
    auto end = Steady::now();
    IngestRun run;
    run.rows = rows_of(outcomes);
    run.rows_per_sec = static_cast<double>(run.rows) / seconds_between(start, end);
    run.cpu_us_per_row = per_row_us(cpu0, cpu_now(pg_->pid()), run.rows);
    run.timed_from = timed_from;
    run.timed_to = monotonic_seconds();
    check_stored(campaign, run.rows);
    return run;
  }

  // ReportOutcome for every job, `clients` calls in flight at once. The
  // requests are serialized beforehand (generic stub): the bench shares the
  // machine with the coordinator, and agents would serialize on theirs.
  IngestRun grpc_ingest(const std::vector<v1::Outcome>& outcomes, int clients) {
    auto ids = leased_campaign("grpc-ingest", static_cast<int>(outcomes.size()));
    int64_t campaign = campaign_of(ids.front());
    std::vector<grpc::ByteBuffer> requests(outcomes.size());
    for (size_t i = 0; i < outcomes.size(); ++i) {
      v1::ReportOutcomeRequest req;
      req.set_agent_id("ingest-agent");
      // Leased without a key (leased_campaign): any secret passes, the agent id decides.
      req.set_agent_secret("ingest-secret");
      req.set_job_id(ids[i]);
      req.set_attempt(1);
      *req.mutable_outcome() = outcomes[i];
      std::string bytes = req.SerializeAsString();
      grpc::Slice slice(bytes);
      requests[i] = grpc::ByteBuffer(&slice, 1);
    }
    struct Call {
      std::unique_ptr<grpc::ClientContext> ctx;
      grpc::ByteBuffer resp;
      grpc::Status status;
      std::unique_ptr<grpc::ClientAsyncResponseReader<grpc::ByteBuffer>> rpc;
    };
    std::vector<std::unique_ptr<grpc::GenericStub>> stubs;
    for (const auto& channel : channels_)
      stubs.push_back(std::make_unique<grpc::GenericStub>(channel));
    const std::string method = "/leapfrog.v1.AgentService/ReportOutcome";
    grpc::CompletionQueue cq;
    std::vector<Call> calls(static_cast<size_t>(clients));
    size_t next = 0;
    size_t in_flight = 0;
    std::string error;  // the first failed call; the rest drain first
    auto send = [&](size_t slot) {
      Call& c = calls[slot];
      c.ctx = std::make_unique<grpc::ClientContext>();
      c.ctx->AddMetadata("authorization", std::string("Bearer ") + kToken);
      c.resp.Clear();
      c.rpc =
          stubs[slot % stubs.size()]->PrepareUnaryCall(c.ctx.get(), method, requests[next++], &cq);
      c.rpc->StartCall();
      c.rpc->Finish(&c.resp, &c.status, reinterpret_cast<void*>(slot));
      ++in_flight;
    };
    const CpuTimes cpu0 = cpu_now(pg_->pid());
    const double timed_from = monotonic_seconds();
    auto start = Steady::now();
    for (size_t slot = 0; slot < calls.size() && next < requests.size(); ++slot) send(slot);
    while (in_flight > 0) {
      void* tag = nullptr;
      bool ok = false;
      if (!cq.Next(&tag, &ok)) break;
      --in_flight;
      auto slot = reinterpret_cast<size_t>(tag);
      Call& c = calls[slot];
      v1::ReportOutcomeResponse resp;
      std::vector<grpc::Slice> slices;
      std::string bytes;
      if (c.status.ok() && c.resp.Dump(&slices).ok()) {
        for (const auto& sl : slices)
          bytes.append(reinterpret_cast<const char*>(sl.begin()), sl.size());
      }
      if (!c.status.ok() && error.empty()) error = "ReportOutcome: " + c.status.error_message();
      if (c.status.ok() && (!resp.ParseFromString(bytes) || resp.duplicate()) && error.empty()) {
        error = "ReportOutcome: unexpected duplicate";
      }
      if (next < requests.size() && error.empty()) send(slot);
    }
    auto end = Steady::now();
    const CpuTimes cpu1 = cpu_now(pg_->pid());
    cq.Shutdown();
    void* ignored_tag;
    bool ignored_ok;
    while (cq.Next(&ignored_tag, &ignored_ok)) {
    }
    if (!error.empty()) throw std::runtime_error(error);
    IngestRun run;
    run.rows = rows_of(outcomes);
    run.rows_per_sec = static_cast<double>(run.rows) / seconds_between(start, end);
    run.cpu_us_per_row = per_row_us(cpu0, cpu1, run.rows);
    run.timed_from = timed_from;
    run.timed_to = monotonic_seconds();
    if (!store_view_->discard_reports) check_stored(campaign, run.rows);
    return run;
  }

  // PgStore::report_outcome called directly by `threads` threads, one report
  // at a time each: the store's share of ingest without gRPC.
  IngestRun store_ingest(const std::vector<v1::Outcome>& outcomes, int threads) {
    auto ids = leased_campaign("store-ingest", static_cast<int>(outcomes.size()));
    int64_t campaign = campaign_of(ids.front());
    std::atomic<size_t> next{0};
    std::mutex mu;
    std::string error;
    const std::string agent = "ingest-agent";
    const CpuTimes cpu0 = cpu_now(pg_->pid());
    const double timed_from = monotonic_seconds();
    auto start = Steady::now();
    std::vector<std::thread> workers;
    for (int t = 0; t < threads; ++t) {
      workers.emplace_back([&] {
        for (size_t i; (i = next++) < outcomes.size();) {
          try {
            if (store_->report_outcome(agent, ids[i], 1, outcomes[i], clock_.now()) !=
                ReportResult::Stored) {
              throw std::runtime_error("not stored");
            }
          } catch (const std::exception& e) {
            std::lock_guard<std::mutex> lock(mu);
            if (error.empty()) error = std::string("store report_outcome: ") + e.what();
          }
        }
      });
    }
    for (auto& w : workers) w.join();
    auto end = Steady::now();
    if (!error.empty()) throw std::runtime_error(error);
    IngestRun run;
    run.rows = rows_of(outcomes);
    run.rows_per_sec = static_cast<double>(run.rows) / seconds_between(start, end);
    run.cpu_us_per_row = per_row_us(cpu0, cpu_now(pg_->pid()), run.rows);
    run.timed_from = timed_from;
    run.timed_to = monotonic_seconds();
    check_stored(campaign, run.rows);
    return run;
  }

 private:
  void register_agents() {
    v1::Capabilities caps;
    caps.set_kernel_label(kKernel);
    caps.add_filesystems(kFs);
    caps.set_root(true);
    caps.set_cpus(2);
    caps.set_host("bench");
    for (int i = 0; i < std::max(opts_.agents, opts_.fleet_agents); ++i) {
      grpc::ClientContext ctx;
      ctx.AddMetadata("authorization", std::string("Bearer ") + kToken);
      v1::RegisterRequest req;
      req.set_name("bench-agent-" + std::to_string(i));
      *req.mutable_capabilities() = caps;
      v1::RegisterResponse resp;
      auto status = stubs_[static_cast<size_t>(i) % stubs_.size()]->Register(&ctx, req, &resp);
      if (!status.ok()) throw std::runtime_error("Register: " + status.error_message());
      agent_ids_.push_back(resp.agent_id());
      agent_secrets_.push_back(resp.agent_secret());
    }
  }

  int64_t campaign_of(int64_t job_id) {
    pqxx::connection conn(url_);
    pqxx::nontransaction txn(conn);
    return txn.exec_params("SELECT campaign_id FROM jobs WHERE id = $1", job_id)[0][0]
        .as<int64_t>();
  }

  // Both sides must have stored every row.
  void check_stored(int64_t campaign, int64_t rows) {
    pqxx::connection conn(url_);
    pqxx::nontransaction txn(conn);
    auto got =
        txn.exec_params(
               "SELECT (SELECT count(*) FROM outcomes WHERE campaign_id = $1) +"
               " (SELECT count(*) FROM violations v JOIN outcomes o"
               "  ON o.job_id = v.job_id AND o.attempt = v.attempt WHERE o.campaign_id = $1)",
               campaign)[0][0]
            .as<int64_t>();
    if (got != rows) {
      throw std::runtime_error("campaign " + std::to_string(campaign) + " stored " +
                               std::to_string(got) + " rows, want " + std::to_string(rows));
    }
  }

  static std::string timestamp_text(TimePoint t) {
    int64_t us = t.time_since_epoch().count();
    std::time_t secs = static_cast<std::time_t>(us / 1000000);
    std::tm tm{};
    gmtime_r(&secs, &tm);
    char buf[64];
    std::snprintf(buf, sizeof buf, "%04d-%02d-%02d %02d:%02d:%02d.%06lld+00", tm.tm_year + 1900,
                  tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                  static_cast<long long>(us % 1000000));
    return buf;
  }

  Options opts_;
  BenchDir dir_;
  std::unique_ptr<EmbeddedPostgres> pg_;
  std::string url_;
  SystemClock clock_;
  std::unique_ptr<PgStore> store_;
  std::unique_ptr<TouchEveryLeaseStore> store_view_;
  std::unique_ptr<CoordinatorServer> server_;
  std::vector<std::shared_ptr<grpc::Channel>> channels_;
  std::vector<std::unique_ptr<v1::AgentService::Stub>> stubs_;
  std::vector<std::string> agent_ids_;
  std::vector<std::string> agent_secrets_;
};

// ---- the runs and the table ----

// Throughputs of the two sides over the rounds, and their per-round ratios
// (each round measures both sides within seconds of each other, so the
// ratio of a round is less exposed to a noisy machine than the ratio of two
// medians).
struct Pair {
  std::vector<double> raw, grpc, ratio;
  void add(double r, double g) {
    raw.push_back(r);
    grpc.push_back(g);
    ratio.push_back(g / r);
  }
};

// One database setting under test, and what was measured under it.
struct Mode {
  std::string title;
  bool durable = false;
  int lease_jobs = 0;
  Pair lease, lease_touching;
  std::vector<Pair> ingest;  // one per Options::ingest_clients
  std::vector<double> raw_lat, grpc_lat, touching_lat, paced_lat, paced_touching_lat;
  std::vector<double> paced_store_lat;  // the paced run's lease_job calls, inside the coordinator
  FleetRun fleet;
  std::vector<CpuTimes> raw_cpu;                // per round
  // --floors: per Options::ingest_clients, per round
  std::vector<std::vector<IngestRun>> floor_grpc, floor_store;
  std::vector<std::vector<CpuTimes>> grpc_cpu;  // per Options::ingest_clients, per round
  double commit_s = 0;  // durable: median commit latency, measured before the rounds
  int64_t ingest_rows = 0;
};

void append(std::vector<double>& to, const std::vector<double>& from) {
  to.insert(to.end(), from.begin(), from.end());
}

void measure(Bench& bench, const Options& o, const std::vector<v1::Outcome>& outcomes, Mode& m) {
  bench.set_durable(m.durable);
  if (m.durable) m.commit_s = bench.commit_seconds();
  m.ingest_rows = Bench::rows_of(outcomes);
  std::printf("%s\n", m.title.c_str());
  std::fflush(stdout);
  m.ingest.resize(o.ingest_clients.size());
  for (int round = 1; round <= o.rounds; ++round) {
    // Odd rounds run the raw side first, even rounds last.
    const bool raw_first = round % 2 == 1;
    std::printf("  round %d:", round);
    if (!o.ingest_only) {
    LeaseRun raw, as_built, touching;
    if (raw_first) raw = bench.raw_lease(m.lease_jobs);
    bench.store_view().touch_every_lease = false;
    as_built = bench.grpc_lease(m.lease_jobs, 0ms);
    bench.store_view().touch_every_lease = true;
    touching = bench.grpc_lease(m.lease_jobs, 0ms);
    bench.store_view().touch_every_lease = false;
    if (!raw_first) raw = bench.raw_lease(m.lease_jobs);
    m.lease.add(raw.jobs_per_sec, as_built.jobs_per_sec);
    m.lease_touching.add(raw.jobs_per_sec, touching.jobs_per_sec);
    append(m.raw_lat, raw.latency_us);
    append(m.grpc_lat, as_built.latency_us);
    append(m.touching_lat, touching.latency_us);
    std::printf(" lease/s raw %.0f, gRPC %.0f, gRPC touching %.0f;", raw.jobs_per_sec,
                as_built.jobs_per_sec, touching.jobs_per_sec);
    }
    std::printf(" ingest rows/s");

    IngestRun raw_in;
    std::vector<IngestRun> grpc_in(o.ingest_clients.size());
    if (raw_first) raw_in = bench.raw_ingest(outcomes);
    for (size_t i = 0; i < o.ingest_clients.size(); ++i) {
      grpc_in[i] = bench.grpc_ingest(outcomes, o.ingest_clients[i]);
    }
    if (o.floors) {
      m.floor_grpc.resize(o.ingest_clients.size());
      m.floor_store.resize(o.ingest_clients.size());
      for (size_t i = 0; i < o.ingest_clients.size(); ++i) {
        bench.store_view().discard_reports = true;
        IngestRun g = bench.grpc_ingest(outcomes, o.ingest_clients[i]);
        bench.store_view().discard_reports = false;
        IngestRun st = bench.store_ingest(outcomes, o.ingest_clients[i]);
        m.floor_grpc[i].push_back(g);
        m.floor_store[i].push_back(st);
      }
    }
    if (!raw_first) raw_in = bench.raw_ingest(outcomes);
    std::printf(" raw %.0f", raw_in.rows_per_sec);
    m.raw_cpu.push_back(raw_in.cpu_us_per_row);
    m.grpc_cpu.resize(o.ingest_clients.size());
    for (size_t i = 0; i < o.ingest_clients.size(); ++i) {
      m.ingest[i].add(raw_in.rows_per_sec, grpc_in[i].rows_per_sec);
      m.grpc_cpu[i].push_back(grpc_in[i].cpu_us_per_row);
      std::printf(", gRPC x%d %.0f", o.ingest_clients[i], grpc_in[i].rows_per_sec);
    }
    std::printf("\n");
    std::fflush(stdout);
  }
  if (o.ingest_only) return;
  // Paced: agents think between leases, as real ones run their jobs.
  const int paced_jobs = o.agents * o.paced_leases;
  const auto think = std::chrono::milliseconds(o.paced_think_ms);
  LeaseRun paced = bench.grpc_lease(paced_jobs, think);
  m.paced_lat = paced.latency_us;
  m.paced_store_lat = paced.store_us;
  bench.store_view().touch_every_lease = true;
  m.paced_touching_lat = bench.grpc_lease(paced_jobs, think).latency_us;
  bench.store_view().touch_every_lease = false;
  m.fleet = bench.fleet(o.fleet_agents, o.fleet_leases, std::chrono::milliseconds(o.fleet_think_ms),
                        std::chrono::milliseconds(o.fleet_heartbeat_ms));
}

void print_row(const std::string& what, const Pair& p) {
  double ratio = median(p.ratio);
  std::printf("  %-46s %10.0f %10.0f %7.2f  %-7s %.2f-%.2f\n", what.c_str(), median(p.raw),
              median(p.grpc), ratio, ratio >= 0.8 ? "yes" : "NO",
              *std::min_element(p.ratio.begin(), p.ratio.end()),
              *std::max_element(p.ratio.begin(), p.ratio.end()));
}

// Medians over the rounds of the CPU microseconds per row stored.
void print_cpu(const std::string& what, const std::vector<CpuTimes>& runs) {
  std::vector<double> bench, pg, sum;
  for (const auto& r : runs) {
    bench.push_back(r.bench);
    pg.push_back(r.pg);
    sum.push_back(r.bench + r.pg);
  }
  std::printf("  %-46s bench+coordinator %5.1f  PostgreSQL %5.1f  total %5.1f\n", what.c_str(),
              median(bench), median(pg), median(sum));
}

void print_latency(const std::string& what, const std::vector<double>& lat) {
  double p50 = percentile(lat, 50);
  double p99 = percentile(lat, 99);
  std::printf("  %-46s p50 %8.2f ms  p99 %8.2f ms  (%zu leases)\n", what.c_str(), p50 / 1000,
              p99 / 1000, lat.size());
}

void print_mode(const Options& o, Mode& m) {
  std::printf("\n%s\n", m.title.c_str());
  if (!o.ingest_only) {
    print_row("lease jobs/s, server as built", m.lease);
    print_row("lease jobs/s, + touch_agent on every lease", m.lease_touching);
  }
  for (size_t i = 0; i < o.ingest_clients.size(); ++i) {
    print_row("ingest rows/s, " + std::to_string(o.ingest_clients[i]) + " calls in flight",
              m.ingest[i]);
  }
  if (m.commit_s > 0 && !m.raw_cpu.empty()) {
    // Outcomes per round over calls in flight = commits at the least, each
    // waiting one commit latency: the best any ingest could do, as a ratio.
    const double raw = median(m.ingest.front().raw);
    std::printf("  ingest ceiling from the commit latency (%.2f ms per commit):", m.commit_s * 1e3);
    for (size_t i = 0; i < o.ingest_clients.size(); ++i) {
      const double commits = std::ceil(static_cast<double>(o.ingest_outcomes) /
                                        static_cast<double>(o.ingest_clients[i]));
      const double rows = static_cast<double>(m.ingest_rows);
      std::printf("%s x%d %.2f", i ? "," : "", o.ingest_clients[i],
                  rows / (commits * m.commit_s) / raw);
    }
    std::printf("\n");
  }
  std::printf("  ingest CPU us per row (medians)\n");
  print_cpu("raw COPY", m.raw_cpu);
  for (size_t i = 0; i < o.ingest_clients.size(); ++i) {
    print_cpu("gRPC, " + std::to_string(o.ingest_clients[i]) + " calls in flight", m.grpc_cpu[i]);
  }
  for (size_t i = 0; i < m.floor_grpc.size(); ++i) {
    std::vector<double> g, st;
    std::vector<CpuTimes> gc, sc;
    for (const auto& r : m.floor_grpc[i]) g.push_back(r.rows_per_sec), gc.push_back(r.cpu_us_per_row);
    for (const auto& r : m.floor_store[i]) st.push_back(r.rows_per_sec), sc.push_back(r.cpu_us_per_row);
    const std::string n = std::to_string(o.ingest_clients[i]);
    std::printf("  floors, %s in flight: gRPC storing nothing %.0f rows/s, store without gRPC %.0f rows/s\n",
                n.c_str(), median(g), median(st));
    print_cpu("gRPC storing nothing, " + n + " in flight", gc);
    print_cpu("store without gRPC, " + n + " threads", sc);
  }
  if (o.ingest_only) return;
  std::printf("  lease latency (all rounds)\n");
  print_latency("raw statement, one connection", m.raw_lat);
  print_latency("gRPC, " + std::to_string(o.agents) + " agents saturating, as built", m.grpc_lat);
  print_latency("gRPC, " + std::to_string(o.agents) + " agents saturating, touching",
                m.touching_lat);
  print_latency("gRPC, " + std::to_string(o.agents) + " agents paced, as built", m.paced_lat);
  print_latency("  of which store.lease_job, in the coordinator", m.paced_store_lat);
  print_latency("gRPC, " + std::to_string(o.agents) + " agents paced, touching",
                m.paced_touching_lat);
  const std::string fleet = std::to_string(o.fleet_agents) + " agents, fleet";
  print_latency("gRPC, " + fleet + ": lease", m.fleet.lease_us);
  std::printf("  %-46s p50 %8.2f ms  p99 %8.2f ms  (%zu heartbeats)\n",
              ("gRPC, " + fleet + ": heartbeat").c_str(),
              percentile(m.fleet.heartbeat_us, 50) / 1000,
              percentile(m.fleet.heartbeat_us, 99) / 1000, m.fleet.heartbeat_us.size());
  std::printf("  %-46s bench+coordinator %5.0f  PostgreSQL %5.0f  (heartbeats included)\n",
              ("CPU us per lease, " + fleet).c_str(), m.fleet.bench_cpu_us_per_lease,
              m.fleet.pg_cpu_us_per_lease);
}

// --loop=paced: the paced lease run alone, `rounds` times (durable unless
// --no-sync-only), with its percentiles and CPU per lease: for a profiler,
// and to compare builds quickly.
int paced_loop(Bench& bench, const Options& o) {
  bench.set_durable(!o.no_sync_only);
  bench.grpc_lease(1000, 0ms);  // untimed: starts the server's threads
  const int jobs = o.agents * o.paced_leases;
  const auto think = std::chrono::milliseconds(o.paced_think_ms);
  std::vector<double> all, store;
  for (int round = 1; round <= o.rounds; ++round) {
    const double from = monotonic_seconds();
    LeaseRun r = bench.grpc_lease(jobs, think);
    const double to = monotonic_seconds();
    append(all, r.latency_us);
    append(store, r.store_us);
    std::printf(
        "  paced %d agents: p50 %.2f ms  p90 %.2f ms  p99 %.2f ms  max %.2f ms;"
        " store.lease_job p50 %.2f ms  p99 %.2f ms;"
        " CPU us per lease: bench %.0f, PostgreSQL %.0f; timed %.6f,%.6f\n",
        o.agents, percentile(r.latency_us, 50) / 1000, percentile(r.latency_us, 90) / 1000,
        percentile(r.latency_us, 99) / 1000, percentile(r.latency_us, 100) / 1000,
        percentile(r.store_us, 50) / 1000, percentile(r.store_us, 99) / 1000,
        r.bench_cpu_us_per_lease, r.pg_cpu_us_per_lease, from, to);
    std::fflush(stdout);
  }
  print_latency("all rounds, " + std::to_string(o.agents) + " agents paced", all);
  print_latency("  of which store.lease_job, in the coordinator", store);
  return 0;
}

int run(const Options& o) {
  std::printf("setup: PostgreSQL, coordinator, %d agents on %d connections\n", o.agents,
              o.channels);
  std::fflush(stdout);
  Bench bench(o);
  const auto outcomes = Bench::make_outcomes(o.ingest_outcomes);
  if (o.loop == "paced") return paced_loop(bench, o);
  if (!o.loop.empty()) {
    // One side only, `rounds` times, under the durable setting unless told
    // otherwise: for `perf record -p`.
    bench.set_durable(!o.no_sync_only);
    for (int round = 1; round <= o.rounds; ++round) {
      IngestRun r;
      if (o.loop == "raw") {
        r = bench.raw_ingest(outcomes);
      } else if (o.loop == "store") {
        r = bench.store_ingest(outcomes, o.ingest_clients.front());
      } else {
        bench.store_view().discard_reports = o.loop == "grpc-discard";
        r = bench.grpc_ingest(outcomes, o.ingest_clients.front());
      }
      // The timed part in CLOCK_MONOTONIC seconds, for `perf report -k
      // CLOCK_MONOTONIC --time START,END`.
      std::printf("  %s ingest: %.0f rows/s, CPU us per row: bench %.1f, PostgreSQL %.1f;"
                  " timed %.6f,%.6f\n",
                  o.loop.c_str(), r.rows_per_sec, r.cpu_us_per_row.bench, r.cpu_us_per_row.pg,
                  r.timed_from, r.timed_to);
      std::fflush(stdout);
    }
    return 0;
  }
  // Untimed: starts the server's threads and warms every connection's caches.
  bench.raw_lease(1000);
  bench.grpc_lease(1000, 0ms);
  const auto warm_up = Bench::make_outcomes(200);
  bench.raw_ingest(warm_up);
  bench.grpc_ingest(warm_up, *std::max_element(o.ingest_clients.begin(), o.ingest_clients.end()));
  std::vector<Mode> modes;
  if (!o.no_sync_only) {
    Mode durable;
    durable.title = "durable commits (fsync on: production settings), " +
                    std::to_string(o.durable_lease_jobs) + " jobs per lease run";
    durable.durable = true;
    durable.lease_jobs = o.durable_lease_jobs;
    modes.push_back(durable);
  }
  Mode no_sync;
  no_sync.title = "fsync off (CPU and round trips only), " + std::to_string(o.lease_jobs) +
                  " jobs per lease run";
  no_sync.lease_jobs = o.lease_jobs;
  modes.push_back(no_sync);
  for (auto& m : modes) measure(bench, o, outcomes, m);

  std::printf("\nmedians of %d rounds; ratio = gRPC / raw (median of the rounds' ratios)\n",
              o.rounds);
  std::printf("  %-46s %10s %10s %7s  %-7s %s\n", "", "raw", "gRPC", "ratio", ">= 0.8",
              "ratio range");
  for (auto& m : modes) print_mode(o, m);
  std::printf(
      "\nlease raw: the store's lease_job statement, one autocommit connection, until the\n"
      "queue is empty. lease gRPC: %d agents leasing in a loop (wait 0) through async calls on\n"
      "%d client connections; saturating latency is mostly queueing (agents / throughput).\n"
      "paced: each agent waits %d ms +-50%% between leases (%.0f leases/s offered); \"of which\n"
      "store.lease_job\": the store call inside the coordinator (the group lease's queue, its\n"
      "statement and commit), without gRPC, the agent service and the bench's clients.\n"
      "touching: the store also runs touch_agent before every lease (the agent service\n"
      "touches an agent at most once per heartbeat interval).\n"
      "fleet: %d agents, each leasing %d jobs, running each for %d ms +-50%% and heartbeating\n"
      "every %d ms meanwhile (%.0f leases/s and %.0f heartbeats/s offered); CPU per lease\n"
      "counts this process (the clients too) and PostgreSQL over the run.\n"
      "ingest: %d outcomes, %lld rows (20-50 violations each); raw = one COPY per table in one\n"
      "transaction; gRPC = ReportOutcome calls, serialized beforehand (agents build their "
      "requests\n"
      "on their own machines), while the raw side formats its COPY rows inside the timed part, as\n"
      "the coordinator formats its statement: each side times what the machine storing the rows\n"
      "does. CPU per row: this process (bench clients and coordinator) and PostgreSQL (all its\n"
      "processes) over the timed part. --floors adds gRPC storing nothing and the store called\n"
      "without gRPC (threads = calls in flight). Calls in flight: 200 is one report per agent of\n"
      "the lease side; an outcome is acknowledged once committed, so N in flight means at most N\n"
      "outcomes per commit, and the ceiling line divides the fewest commits a run needs\n"
      "(outcomes / N) times the measured commit latency into the rows, over the raw side.\n",
      o.agents, o.channels, o.paced_think_ms,
      o.agents * 1000.0 / static_cast<double>(o.paced_think_ms), o.fleet_agents, o.fleet_leases,
      o.fleet_think_ms, o.fleet_heartbeat_ms,
      o.fleet_agents * 1000.0 / static_cast<double>(o.fleet_think_ms),
      o.fleet_agents * 1000.0 / static_cast<double>(o.fleet_heartbeat_ms), o.ingest_outcomes,
      static_cast<long long>(Bench::rows_of(outcomes)));
  return 0;
}

}  // namespace
}  // namespace leapfrog::coord

int main(int argc, char** argv) {
  auto options = leapfrog::coord::parse_options(argc, argv);
  // Per-call info lines (job.lease, job.outcome) would measure the logger.
  spdlog::set_level(spdlog::level::warn);
  try {
    return leapfrog::coord::run(options);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "coordinator_bench: %s\n", e.what());
    return 1;
  }
}
