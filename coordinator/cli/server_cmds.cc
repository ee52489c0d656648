#include "coordinator/cli/server_cmds.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <spdlog/spdlog.h>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <thread>

#include "common/kernel/kernel_image.h"
#include "common/process.h"
#include "common/token.h"
#include "coordinator/cli/vm_cmds.h"
#include "coordinator/export/nightly.h"
#include "coordinator/http/http_server.h"
#include "coordinator/metrics/coordinator_metrics.h"
#include "coordinator/notify/notifier.h"
#include "coordinator/notify/notify_api.h"
#include "coordinator/notify/notify_service.h"
#include "coordinator/pg/embedded_postgres.h"
#include "coordinator/server.h"
#include "coordinator/store/pg_store.h"
#include "coordinator/triage/pg_triage_store.h"

namespace leapfrog::cli {
namespace {

namespace stdfs = std::filesystem;

std::string self_dir() {
  std::error_code ec;
  const auto exe = stdfs::read_symlink("/proc/self/exe", ec);
  return ec ? "." : exe.parent_path().string();
}

// Writes `text` to `path` (mode), replacing it atomically.
void write_file(const std::string& path, const std::string& text, mode_t mode) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    if (!out) throw std::runtime_error("cannot write \"" + tmp + "\"");
    out << text << '\n';
  }
  chmod(tmp.c_str(), mode);
  if (rename(tmp.c_str(), path.c_str()) != 0) throw std::runtime_error("cannot write \"" + path + "\"");
}

// The token in `path`, generated (mode 0600) if the file does not exist.
std::string load_or_create_token(const std::string& path) {
  if (access(path.c_str(), F_OK) == 0) return read_token_file(path);
  const std::string token = generate_token();
  write_file(path, token, 0600);
  return token;
}

// True if nothing listens on 127.0.0.1:port.
bool loopback_port_free(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  // Connections of the last run in TIME_WAIT do not make the port busy (gRPC
  // binds with SO_REUSEADDR too); a listener does.
  const int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  const bool ok = bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
  close(fd);
  return ok;
}

// `listen` with its port 0 replaced by the one kept in `port_file`, when
// there is one and it is free; else `listen` as given.
std::string kept_listen(const std::string& listen, const std::string& port_file) {
  const auto colon = listen.rfind(':');
  if (colon == std::string::npos || listen.substr(colon + 1) != "0") return listen;
  std::ifstream in(port_file);
  int port = 0;
  if (!(in >> port) || port <= 0 || port > 65535 || !loopback_port_free(port)) return listen;
  return listen.substr(0, colon + 1) + std::to_string(port);
}

// A server on the port kept in `port_file` when `options.listen` asks for
// port 0 and that port is free, else on `options.listen`; `make(options)`
// starts one (throwing std::runtime_error when it cannot listen). Afterwards
// a port-0 listen records the port it got, for the next run.
template <typename Options, typename Make>
auto on_kept_port(const Options& options, const std::string& port_file, const char* what,
                  Make make) -> decltype(make(options)) {
  const std::string kept = kept_listen(options.listen, port_file);
  decltype(make(options)) server;
  if (kept != options.listen) {
    Options on_kept = options;
    on_kept.listen = kept;
    try {
      server = make(on_kept);
    } catch (const std::runtime_error& e) {
      spdlog::warn("{}.kept_port_taken listen={} error=\"{}\"", what, kept, e.what());
    }
  }
  if (!server) server = make(options);
  const std::string& l = options.listen;
  if (l.size() >= 2 && l.compare(l.size() - 2, 2, ":0") == 0)
    write_file(port_file, std::to_string(server->port()), 0644);
  return server;
}

sigset_t block_stop_signals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  return set;
}

// Local agents of `leapfrog up`, restarted if they die.
class AgentFleet {
 public:
  AgentFleet(std::string exe, std::string address, std::string token_file, std::string data_dir)
      : exe_(std::move(exe)), address_(std::move(address)), token_file_(std::move(token_file)),
        data_dir_(std::move(data_dir)) {}
  ~AgentFleet() { stop(); }

  void start(int n) {
    pids_.assign(n, -1);
    for (int i = 0; i < n; ++i) spawn(i);
  }

  // Restarts agents that exited.
  void supervise() {
    for (size_t i = 0; i < pids_.size(); ++i) {
      if (pids_[i] <= 0) continue;
      int status = 0;
      if (waitpid(pids_[i], &status, WNOHANG) == pids_[i]) {
        spdlog::warn("agent.died index={} pid={} status={}", i, pids_[i], status);
        spawn(static_cast<int>(i));
      }
    }
  }

  void stop() {
    for (pid_t p : pids_)
      if (p > 0) kill(p, SIGTERM);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    for (pid_t& p : pids_) {
      while (p > 0) {
        int status = 0;
        const pid_t r = waitpid(p, &status, WNOHANG);
        if (r == p || (r < 0 && errno == ECHILD)) {
          p = -1;
          break;
        }
        if (std::chrono::steady_clock::now() > deadline) {
          kill(p, SIGKILL);
          waitpid(p, &status, 0);
          p = -1;
          break;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
    }
  }

  const std::vector<pid_t>& pids() const { return pids_; }

 private:
  void spawn(int i) {
    const std::string name = "local-" + std::to_string(i);
    std::vector<std::string> argv = {exe_,          "connect",           "--coordinator", address_,
                                     "--token-file", token_file_,         "--name",        name,
                                     "--spool",      data_dir_ + "/spool-" + name, "--die-with-parent"};
    SpawnOptions opts;
    opts.reset_signal_mask = true;
    int rc = 0;
    const pid_t pid = spawn_process(argv, opts, &rc);
    if (pid < 0)
      throw std::runtime_error("cannot start agent \"" + exe_ + "\": " + std::strerror(rc));
    pids_[i] = pid;
    spdlog::info("agent.spawn index={} pid={}", i, pid);
  }

  std::string exe_, address_, token_file_, data_dir_;
  std::vector<pid_t> pids_;
};

// Keeps the embedded PostgreSQL running: started again when it dies, with
// a backoff while it cannot be (the coordinator reports NOT_SERVING meanwhile),
// and adopted when someone else restarted it.
class PostgresSupervisor {
 public:
  explicit PostgresSupervisor(coord::EmbeddedPostgres& pg) : pg_(pg) {}

  void supervise() {
    const auto now = std::chrono::steady_clock::now();
    if (now < next_try_) return;
    try {
      pg_.supervise();
      backoff_ = kFirstBackoff;
    } catch (const std::exception& e) {
      spdlog::warn("pg_restart_failed retry_ms={} error=\"{}\"", backoff_.count(), e.what());
      next_try_ = now + backoff_;
      backoff_ = std::min(backoff_ * 2, kMaxBackoff);
    }
  }

 private:
  static constexpr std::chrono::milliseconds kFirstBackoff{250};
  static constexpr std::chrono::milliseconds kMaxBackoff{10'000};
  coord::EmbeddedPostgres& pg_;
  std::chrono::milliseconds backoff_ = kFirstBackoff;
  std::chrono::steady_clock::time_point next_try_{};
};

// Waits for SIGINT/SIGTERM, supervising the fleet and the database meanwhile.
void wait_for_stop(const sigset_t& set, AgentFleet* fleet, PostgresSupervisor* pg) {
  for (;;) {
    timespec ts{0, 250'000'000};
    const int sig = sigtimedwait(&set, nullptr, &ts);
    if (sig == SIGINT || sig == SIGTERM) {
      spdlog::info("coordinator.signal signal={}", sig);
      return;
    }
    if (pg) pg->supervise();
    if (fleet) fleet->supervise();
  }
}

// Where the dashboard's links in mails, webhooks and nightly exports point:
// --link-base when given (the address people reach), else the --http one.
std::string public_link_base(const ServeOptions& opts, const std::string& http) {
  return opts.link_base.empty() ? http : opts.link_base;
}

// The nightly export folder's loop (--export-dir), on a thread of its own:
// a tick every few seconds, stopped by stop().
class NightlyExports {
 public:
  NightlyExports(const ServeOptions& opts, coord::Store& store, coord::triage::TriageEngine* triage,
                 const std::string& link_base) {
    if (opts.export_dir.empty()) return;
    coord::exports::NightlyOptions no;
    no.dir = opts.export_dir;
    no.formats.clear();
    for (const auto& f : opts.export_formats) no.formats.push_back(coord::exports::parse_format(f));
    no.export_options.origin = opts.export_origin;
    no.export_options.link_base = link_base;
    exporter_ = std::make_unique<coord::exports::NightlyExporter>(store, triage, no);
    thread_ = std::thread([this] { loop(); });
  }
  ~NightlyExports() { stop(); }

  void stop() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopping_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
  }

 private:
  void loop() {
    std::unique_lock<std::mutex> lock(mu_);
    while (!stopping_) {
      lock.unlock();
      try {
        exporter_->tick();
      } catch (const std::exception& e) {
        spdlog::warn("export.nightly_failed error=\"{}\"", e.what());
      }
      lock.lock();
      cv_.wait_for(lock, std::chrono::seconds(5), [this] { return stopping_; });
    }
  }

  std::unique_ptr<coord::exports::NightlyExporter> exporter_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  std::thread thread_;
};

// The notifier's settings from the flags; the SMTP password from its file.
coord::notify::NotifierOptions notifier_options(const ServeOptions& opts, const std::string& http,
                                                const coord::notify::WebhookPolicy& webhooks) {
  coord::notify::NotifierOptions no;
  no.webhooks = webhooks;
  no.link_base = public_link_base(opts, http);
  no.smtp.url = opts.smtp_url;
  no.smtp.from = opts.smtp_from;
  no.smtp.user = opts.smtp_user;
  if (!opts.smtp_password_file.empty())
    no.smtp.password = read_token_file(opts.smtp_password_file);
  no.smtp.require_tls = opts.smtp_require_tls;
  no.retry.first = std::chrono::milliseconds(opts.notify_retry_ms);
  no.poll_every = std::chrono::milliseconds(opts.notify_poll_ms);
  no.unserved_after = std::chrono::seconds(opts.notify_unserved_after_s);
  no.offline_after = 3 * std::chrono::milliseconds(opts.heartbeat_ms);
  return no;
}

}  // namespace

int serve(const ServeOptions& opts) {
  // First: a bad --webhook-allow entry stops the start (std::invalid_argument).
  const coord::notify::WebhookPolicy webhooks(opts.webhook_allow);
  const sigset_t set = block_stop_signals();
  stdfs::create_directories(opts.data_dir);
  std::unique_ptr<coord::EmbeddedPostgres> pg;
  std::string url = opts.database;
  if (url.empty()) {
    pg = std::make_unique<coord::EmbeddedPostgres>();
    pg->start(opts.data_dir + "/postgres");
    url = pg->url();
  }
  const std::string token_file = opts.token_file.empty() ? opts.data_dir + "/token" : opts.token_file;
  const std::string token = load_or_create_token(token_file);
  coord::PgStore store(url);
  coord::triage::PgTriageStore triage_store(url);
  coord::SystemClock clock;
  coord::notify::PgNotifyStore notify_store(url);
  coord::notify::NotifyServiceImpl notify_service(notify_store, clock, token, webhooks);
  coord::ServerOptions so;
  so.triage_store = &triage_store;
  so.extra_services.push_back(&notify_service);
  so.events = &notify_store;
  so.listen = opts.listen;
  so.token = token;
  so.service.lease_duration = std::chrono::milliseconds(opts.lease_ms);
  so.retain_for = std::chrono::hours(24) * opts.retain_days;
  so.service.heartbeat_interval = std::chrono::milliseconds(opts.heartbeat_ms);
  metrics::CoordinatorMetricsOptions mo;
  mo.offline_after = 3 * std::chrono::milliseconds(opts.heartbeat_ms);
  metrics::CoordinatorMetrics coord_metrics(&store, clock, mo);
  so.metrics = &coord_metrics;
  // Port 0 (`up` without --port): the port of the last run in this folder
  // while it is free, so agents and waiting clients find it again.
  const auto server_ptr =
      on_kept_port(so, opts.data_dir + "/port", "coordinator", [&](const coord::ServerOptions& o) {
        return std::make_unique<coord::CoordinatorServer>(store, clock, o);
      });
  coord::CoordinatorServer& server = *server_ptr;
  write_file(opts.data_dir + "/address", server.address(), 0644);
  coord::HttpOptions ho;
  ho.listen = opts.http_listen;
  ho.token = token;
  ho.assets_dir = opts.dashboard_dir.empty() ? self_dir() + "/../dashboard/dist" : opts.dashboard_dir;
  ho.offline_after = 3 * std::chrono::milliseconds(opts.heartbeat_ms);
  ho.build_caches = opts.build_caches;
  ho.build_caches.insert(ho.build_caches.begin(), vm::default_cache_dir());
  ho.allowed_hosts = opts.http_allowed_hosts;
  ho.export_origin = opts.export_origin;
  ho.link_base = opts.link_base;
  ho.extra_api.push_back([&](coord::ApiRouter& router) {
    coord::notify::register_notify_api(router, notify_store, clock, webhooks);
  });
  // The dashboard's port too: open tabs, bookmarks and issue links find it again.
  const auto http_ptr =
      on_kept_port(ho, opts.data_dir + "/http-port", "http", [&](const coord::HttpOptions& o) {
        return std::make_unique<coord::HttpServer>(store, clock, o, server.triage(),
                                                   &coord_metrics);
      });
  coord::HttpServer& http = *http_ptr;
  write_file(opts.data_dir + "/http", http.url(), 0644);
  // `leapfrog export` on this machine links where the nightly files do.
  write_file(opts.data_dir + "/link-base", public_link_base(opts, http.url()), 0644);
  NightlyExports nightly(opts, store, server.triage(), public_link_base(opts, http.url()));
  coord::notify::Notifier notifier(store, notify_store, clock, notifier_options(opts, http.url(), webhooks));
  notifier.start();

  std::unique_ptr<AgentFleet> fleet;
  if (opts.agents > 0) {
    fleet = std::make_unique<AgentFleet>(self_dir() + "/leapfrog-agent", server.address(), token_file, opts.data_dir);
    fleet->start(opts.agents);
  }
  pid_t vm_launcher = -1;
  if (opts.vms > 0) {
    if (opts.vm_kernel.empty()) throw std::runtime_error("--vms needs --kernel LABEL");
    vm_launcher = spawn_vm_launcher(server.address(), token_file, opts.data_dir, opts.vm_kernel, opts.vms);
  }
  std::printf("leapfrog coordinator listening on %s\n", server.address().c_str());
  std::printf("  dashboard:  %s/\n", http.url().c_str());
  if (coord::listens_beyond_loopback(opts.http_listen.substr(0, opts.http_listen.rfind(':'))))
    std::printf(
        "  warning:    the dashboard is reachable beyond loopback; every HTTP request "
        "needs the token\n");
  std::printf("  token file: %s\n", token_file.c_str());
  std::printf("  database:   %s\n", pg ? ("embedded PostgreSQL in " + opts.data_dir + "/postgres").c_str() : "external");
  if (opts.agents > 0) std::printf("  agents:     %d local\n", opts.agents);
  if (opts.vms > 0) std::printf("  VMs:        %d of kernel %s\n", opts.vms, opts.vm_kernel.c_str());
  std::printf("  try: leapfrog campaign run --data-dir %s --scenario setattr-lookup --fs tmpfs --wait\n",
              opts.data_dir.c_str());
  std::fflush(stdout);

  std::optional<PostgresSupervisor> pg_supervisor;
  if (pg) pg_supervisor.emplace(*pg);
  wait_for_stop(set, fleet.get(), pg_supervisor ? &*pg_supervisor : nullptr);
  if (vm_launcher > 0) {
    kill(vm_launcher, SIGTERM);
    int status = 0;
    waitpid(vm_launcher, &status, 0);
  }
  if (fleet) fleet->stop();
  notifier.stop();
  nightly.stop();
  http.shutdown();
  server.shutdown();
  std::remove((opts.data_dir + "/address").c_str());
  std::remove((opts.data_dir + "/http").c_str());
  std::remove((opts.data_dir + "/link-base").c_str());
  if (pg) pg->stop();
  return 0;
}

}  // namespace leapfrog::cli
