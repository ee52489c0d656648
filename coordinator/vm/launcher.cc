#include "coordinator/vm/launcher.h"
#include "coordinator/channel.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include <grpcpp/grpcpp.h>
#include <spdlog/spdlog.h>
#include <algorithm>
#include <cctype>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <random>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "common/console/console_parser.h"
#include "common/kernel/kernel_image.h"
#include "common/process.h"
#include "coordinator/vm/host_load.h"
#include "coordinator/vm/qemu_process.h"
#include "coordinator/vm/qmp.h"
#include "leapfrog/v1/agent.grpc.pb.h"
#include "leapfrog/v1/control.grpc.pb.h"

namespace leapfrog::vm {
namespace {

namespace stdfs = std::filesystem;
using Steady = std::chrono::steady_clock;
using Wall = std::chrono::system_clock;
using std::chrono::milliseconds;

// The first line deploy/vm/init prints.
constexpr const char* kInitLine = "leapfrog-init: start";
// What a snapshot template's /init prints (deploy/vm/init, lf.snapshot=1).
constexpr const char* kSnapshotReady = "leapfrog-init: snapshot-ready";
constexpr const char* kSnapshotUnavailable = "leapfrog-init: snapshot-unavailable";
constexpr const char* kIdentityTaken = "leapfrog-init: identity ";
// Saved VMs kept in the cache (~90 MB each); the oldest go first.
constexpr size_t kSnapshotsKept = 8;

// True when `word` can travel in the identity line as one word.
bool identity_word(const std::string& word) {
  if (word.empty()) return false;
  for (char c : word)
    if (!std::isalnum(static_cast<unsigned char>(c)) && std::string("._:+/=~@-").find(c) == std::string::npos)
      return false;
  return true;
}

// A unix stream socket connected to `path`; -1 if it cannot connect.
int connect_unix(const std::string& path) {
  sockaddr_un addr{};
  if (path.size() >= sizeof addr.sun_path) return -1;
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

std::string read_from(const std::string& path, size_t offset) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return {};
  in.seekg(static_cast<std::streamoff>(offset));
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

size_t file_size_or_zero(const std::string& path) {
  std::error_code ec;
  const auto n = stdfs::file_size(path, ec);
  return ec ? 0 : static_cast<size_t>(n);
}

// The bytes a file takes on disk (a RAM file is sparse: the guest's untouched
// memory takes none).
uint64_t allocated_bytes(const std::string& path) {
  struct stat st {};
  return stat(path.c_str(), &st) == 0 ? static_cast<uint64_t>(st.st_blocks) * 512 : 0;
}

// Runs argv with stdout to `out` and stderr to `err`; returns the exit status.
int run_tool(const std::vector<std::string>& argv, const std::string& out, const std::string& err) {
  SpawnOptions opts;
  opts.stdin_path = "/dev/null";
  opts.stdout_path = out;
  opts.stderr_path = err;
  opts.search_path = true;
  return run_process(argv, opts);
}

std::string trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

int64_t micros(const google::protobuf::Timestamp& t) {
  return t.seconds() * 1'000'000 + t.nanos() / 1000;
}

int64_t wall_micros(Wall::time_point t) {
  return std::chrono::duration_cast<std::chrono::microseconds>(t.time_since_epoch()).count();
}

// The coordinator, as the launcher sees it: the control service (kernels,
// agents) and the agent service (failing a VM's job).
class Coordinator {
 public:
  Coordinator(const std::string& address, std::string token) : token_(std::move(token)) {
    auto channel = coord::coordinator_channel(address);
    control_ = v1::ControlService::NewStub(channel);
    agent_ = v1::AgentService::NewStub(channel);
  }

  // The kernel registered under `label`; nullopt when there is none (yet: a
  // campaign's build job may be building it). Throws when the coordinator
  // does not answer.
  std::optional<v1::Kernel> find_kernel(const std::string& label) {
    v1::ListKernelsResponse resp;
    auto c = ctx();
    const auto s = control_->ListKernels(c.get(), v1::ListKernelsRequest(), &resp);
    if (!s.ok()) throw std::runtime_error("cannot list kernels: " + s.error_message());
    for (const auto& k : resp.kernels())
      if (k.label() == label) return k;
    return std::nullopt;
  }

  // Agents by name; nullopt when the coordinator did not answer.
  std::optional<std::map<std::string, v1::AgentInfo>> agents() {
    v1::ListAgentsResponse resp;
    auto c = ctx();
    const auto s = control_->ListAgents(c.get(), v1::ListAgentsRequest(), &resp);
    if (!s.ok()) {
      spdlog::warn("vm.list_agents_failed error=\"{}\"", s.error_message());
      return std::nullopt;
    }
    std::map<std::string, v1::AgentInfo> out;
    for (const auto& a : resp.agents()) out[a.name()] = a;
    return out;
  }

  // Ends the job agent `name` holds (or `job_id`) with `outcome`, retrying a
  // few times while the coordinator is unavailable.
  void fail_job(const std::string& name, int64_t job_id, const v1::Outcome& outcome) {
    v1::FailAgentJobRequest req;
    req.set_agent_name(name);
    req.set_job_id(job_id);
    *req.mutable_outcome() = outcome;
    for (int attempt = 0; attempt < 5; ++attempt) {
      v1::FailAgentJobResponse resp;
      auto c = ctx();
      const auto s = agent_->FailAgentJob(c.get(), req, &resp);
      if (s.ok()) {
        spdlog::warn("vm.job_failed agent={} job={} attempt={} verdict={} error=\"{}\"", name,
                     resp.job_id(), resp.attempt(), v1::Verdict_Name(outcome.verdict()),
                     outcome.error());
        return;
      }
      if (s.error_code() != grpc::StatusCode::UNAVAILABLE) {
        spdlog::error("vm.fail_job_refused agent={} error=\"{}\"", name, s.error_message());
        return;
      }
      std::this_thread::sleep_for(milliseconds(500));
    }
  }

  // A VM that did not boot has no agent: the launcher registers under the
  // VM's agent name, leases one queued job of the kernel, and reports the
  // boot failure on it.
  void report_boot_failure(const std::string& name, const std::string& label,
                           const v1::Outcome& outcome) {
    v1::RegisterRequest reg;
    reg.set_name(name);
    auto* caps = reg.mutable_capabilities();
    caps->set_kernel_label(label);
    caps->add_filesystems("tmpfs");
    caps->set_root(true);
    caps->set_vm(true);
    caps->set_uname("(did not boot)");
    v1::RegisterResponse rr;
    auto c1 = ctx();
    auto s = agent_->Register(c1.get(), reg, &rr);
    if (!s.ok()) {
      spdlog::error("vm.boot_failure_unreported agent={} error=\"{}\"", name, s.error_message());
      return;
    }
    v1::LeaseRequest lr;
    lr.set_agent_id(rr.agent_id());
    lr.set_agent_secret(rr.agent_secret());
    lr.mutable_wait()->set_seconds(0);
    v1::LeaseResponse lease;
    auto c2 = ctx();
    s = agent_->Lease(c2.get(), lr, &lease);
    if (!s.ok() || !lease.has_job()) {
      spdlog::error("vm.boot_failure_no_job agent={} kernel={} error=\"{}\"", name, label,
                    outcome.error());
      return;
    }
    v1::ReportOutcomeRequest rep;
    rep.set_agent_id(rr.agent_id());
    rep.set_agent_secret(rr.agent_secret());
    rep.set_job_id(lease.job().job_id());
    rep.set_attempt(lease.job().attempt());
    *rep.mutable_outcome() = outcome;
    v1::ReportOutcomeResponse rresp;
    auto c3 = ctx();
    s = agent_->ReportOutcome(c3.get(), rep, &rresp);
    spdlog::error("vm.boot_failure agent={} kernel={} job={} reported={} error=\"{}\"", name, label,
                  lease.job().job_id(), s.ok(), outcome.error());
  }

 private:
  std::unique_ptr<grpc::ClientContext> ctx() {
    auto c = std::make_unique<grpc::ClientContext>();
    c->AddMetadata("authorization", "Bearer " + token_);
    c->set_deadline(Wall::now() + std::chrono::seconds(10));
    return c;
  }

  std::string token_;
  std::unique_ptr<v1::ControlService::Stub> control_;
  std::unique_ptr<v1::AgentService::Stub> agent_;
};

struct Slot {
  // How this generation started. kTemplate: booting to be saved; kRestore:
  // loading the saved state; kHandoff: running, taking its identity on
  // ttyS1; kWaiting: no QEMU yet, waiting for another slot's template;
  // kBoot: booted (or handed off), waiting for the agent and supervised.
  enum class Phase { kBoot, kTemplate, kRestore, kHandoff, kWaiting };

  int index = 0;
  std::string name;
  int generation = 0;
  Phase phase = Phase::kBoot;
  bool restored = false;       // this generation started from a saved VM
  std::string snapshot_key;    // kTemplate: the key it is saved under
  std::string qmp_socket, control_socket;
  std::unique_ptr<QmpClient> qmp;
  int control_fd = -1;         // kRestore, kHandoff: connection to the guest's ttyS1
  int sends = 0;               // identity lines sent this generation
  Steady::time_point phase_started, last_send;
  Steady::time_point last_host_view;  // last lf-host line sent (HostLoadMeter)
  std::unique_ptr<QemuProcess> qemu;
  std::string console;
  size_t console_size = 0;
  Steady::time_point started, last_output;
  Wall::time_point started_wall;
  bool registered = false;
  size_t registered_offset = 0;
  int64_t last_seen_us = 0;
  Steady::time_point last_seen_local;  // when last_seen last advanced
  int64_t job = 0;
  std::string kernel_sha256;  // of the image this generation booted
  std::optional<Steady::time_point> report_seen;
  bool stopped = false;
};

class Launcher {
 public:
  Launcher(const LauncherOptions& opts, const std::atomic<bool>& stop)
      : opts_(opts), stop_(stop), coord_(opts.coordinator, opts.token) {}

  int run() {
    if (!prepare()) return 0;  // stopped while waiting for the kernel
    if (opts_.prepare_only) return make_saved_vm();
    slots_.resize(static_cast<size_t>(opts_.count));
    for (int i = 0; i < opts_.count; ++i) {
      Slot& s = slots_[static_cast<size_t>(i)];
      s.index = i;
      s.name =
          "vm-" + opts_.kernel_label + "-" + std::to_string(getpid()) + "-" + std::to_string(i);
      start(s);
    }
    auto next_poll = Steady::now();
    auto next_kernel_poll = Steady::now() + milliseconds(2000);
    while (!stop_.load()) {
      if (Steady::now() >= next_kernel_poll) {
        next_kernel_poll = Steady::now() + milliseconds(2000);
        refresh_kernel();
      }
      if (Steady::now() >= next_poll) {
        if (auto a = coord_.agents()) agents_ = std::move(*a);
        // Faster while a VM boots: registration is what `up` waits for.
        bool booting = false;
        for (const auto& s : slots_) booting = booting || (!s.stopped && !s.registered);
        next_poll = Steady::now() + milliseconds(booting ? 100 : 500);
      }
      bool any = false;
      for (auto& s : slots_) {
        if (s.stopped) continue;
        any = true;
        supervise(s);
      }
      if (!any) break;
      // Faster while a VM is being saved, restored or handed its identity:
      // each step is a few milliseconds of work the VM waits for.
      bool snapshotting = false;
      for (const auto& s : slots_)
        snapshotting = snapshotting || s.phase == Slot::Phase::kTemplate ||
                       s.phase == Slot::Phase::kRestore || s.phase == Slot::Phase::kHandoff;
      std::this_thread::sleep_for(milliseconds(snapshotting ? 10 : 100));
    }
    for (auto& s : slots_) {
      close_control(s);
      s.qmp.reset();
      s.qemu.reset();
    }
    return ever_registered_ ? 0 : 2;
  }

  // Why prepare_only failed.
  const std::string& failure() const { return failure_; }

 private:
  // prepare_only: boots one template and saves it, unless the saved VM of
  // this key is there already.
  int make_saved_vm() {
    if (!snapshots_ || snapshot_key_.empty()) {
      failure_ = opts_.snapshot ? "this machine cannot save VMs (see the log)" : "snapshots are off";
      return 2;
    }
    slots_.resize(1);
    Slot& s = slots_[0];
    s.name = "vm-" + opts_.kernel_label + "-prepare-" + std::to_string(getpid());
    start(s);
    while (!stop_.load() && !s.stopped) {
      supervise(s);
      std::this_thread::sleep_for(milliseconds(10));
    }
    close_control(s);
    s.qmp.reset();
    s.qemu.reset();
    if (saved_) return 0;
    if (failure_.empty()) failure_ = "stopped before the VM was saved";
    return 2;
  }

  // Waits for the label's kernel (a campaign's build job may not have built
  // it yet), then prepares its image. False when stopped while waiting.
  bool prepare() {
    std::optional<v1::Kernel> k = coord_.find_kernel(opts_.kernel_label);
    if (!k) {
      spdlog::info("vm.waiting_for_kernel kernel={} reason=\"not registered yet: waiting for it to be built"
                   " (a campaign --build) or added (`leapfrog kernel add`)\"",
                   opts_.kernel_label);
      while (!k && !stop_.load()) {
        std::this_thread::sleep_for(milliseconds(1000));
        try {
          k = coord_.find_kernel(opts_.kernel_label);
        } catch (const std::runtime_error& e) {
          spdlog::warn("vm.kernel_poll_failed error=\"{}\"", e.what());
        }
      }
      if (!k) return false;
    }
    if (!k->status().empty() && k->status() != "ready") {
      throw std::runtime_error("kernel \"" + opts_.kernel_label + "\" cannot boot: it is a " + k->status() +
                               " (" + k->version() + ")");
    }
    use_kernel(*k);
    const auto colon = opts_.coordinator.rfind(':');
    if (opts_.coordinator.rfind("127.0.0.1:", 0) != 0 || colon == std::string::npos)
      throw std::runtime_error("VMs reach only a coordinator on 127.0.0.1, not \"" +
                               opts_.coordinator + "\"");
    port_ = std::stoi(opts_.coordinator.substr(colon + 1));
    kvm_ = decide_kvm();
    snapshots_ = snapshots_possible();
    update_snapshot_key();
    spdlog::info("vm.prepared kernel={} release={} boot={} image={} accel={}", opts_.kernel_label,
                 kernel_.release, kernel_.vmlinux.empty() ? kernel_.image : kernel_.vmlinux, initrd_,
                 kvm_ ? "kvm" : "tcg");
    return true;
  }

  // A rebuild replaced the label's kernel (its sha256 changed): prepare the
  // new image; supervise() reboots each VM into it once the VM is idle, so
  // the rebuilt kernel's jobs (which need its release) find agents. A
  // replacement that is a build-failure is ignored: the VMs keep the kernel
  // they have.
  void refresh_kernel() {
    std::optional<v1::Kernel> k;
    try {
      k = coord_.find_kernel(opts_.kernel_label);
    } catch (const std::runtime_error& e) {
      spdlog::warn("vm.kernel_poll_failed error=\"{}\"", e.what());
      return;
    }
    if (!k || k->sha256() == kernel_.sha256 || k->sha256() == ignored_sha256_) return;
    if (!k->status().empty() && k->status() != "ready") {
      spdlog::warn("vm.kernel_replacement_ignored kernel={} status={} version=\"{}\"", opts_.kernel_label,
                   k->status(), k->version());
      ignored_sha256_ = k->sha256();
      return;
    }
    try {
      use_kernel(*k);
      update_snapshot_key();
      spdlog::info("vm.kernel_replaced kernel={} release={} sha256={}: idle VMs reboot into it",
                   opts_.kernel_label, kernel_.release, kernel_.sha256);
    } catch (const std::runtime_error& e) {
      spdlog::error("vm.kernel_replacement_failed kernel={} error=\"{}\"", opts_.kernel_label, e.what());
      ignored_sha256_ = k->sha256();
    }
  }

  // Loads the kernel from this host's store and builds its initrd (the
  // image holds the release's modules). Throws std::runtime_error.
  void use_kernel(const v1::Kernel& k) {
    StoredKernel stored = load_kernel(opts_.cache_dir, k.sha256());
    stdfs::create_directories(opts_.run_dir);
    chmod(opts_.run_dir.c_str(), 0700);
    const std::string out = opts_.run_dir + "/image.path", err = opts_.run_dir + "/image.log";
    std::vector<std::string> argv = {
        opts_.image_script, "image",         "--agent", opts_.agent_exe,
        "--release",        stored.release, "--cache", opts_.cache_dir + "/images"};
    if (!stored.modules.empty()) argv.insert(argv.end(), {"--modules", stored.modules});
    if (run_tool(argv, out, err) != 0)
      throw std::runtime_error("cannot build the VM image: " + trim(read_from(err, 0)));
    const std::string image = trim(read_from(out, 0));
    // One initrd per kernel: VMs still running the previous one keep theirs
    // (the first keeps the name bench/vm_bench.cc looks for).
    const std::string initrd = initrd_.empty() ? opts_.run_dir + "/initrd.cpio"
                                               : opts_.run_dir + "/initrd-" + stored.sha256.substr(0, 16) + ".cpio";
    try {
      write_initrd_with_token(image, opts_.token, initrd);
    } catch (const ImageError& e) {
      throw std::runtime_error(std::string("cannot add the token to the VM image: ") + e.what());
    }
    kernel_ = std::move(stored);
    kernel_cmdline_ = k.cmdline();
    initrd_ = initrd;
    image_ = image;
  }

  // Whether VMs of this run can start from a saved VM; says why not.
  bool snapshots_possible() {
    if (!opts_.snapshot) return false;
    std::string why;
    if (!identity_word(opts_.token))
      why = "the token has characters the identity line cannot carry";
    else if (!identity_word(opts_.kernel_label))
      why = "the kernel label has characters the identity line cannot carry";
    else if (socket_path(64, "qmp").size() >= sizeof(sockaddr_un::sun_path))
      why = "the run folder's path is too long for a unix socket";
    if (why.empty()) {
      try {
        qemu_fingerprint_ = qemu_fingerprint(QemuConfig().qemu);
      } catch (const std::runtime_error& e) {
        why = e.what();
      }
    }
    if (!why.empty()) spdlog::warn("vm.snapshots_off reason=\"{}\": every VM boots in full", why);
    return why.empty();
  }

  // The key of the saved VM for the current kernel: everything the saved
  // state depends on (kernel, image, machine, accelerator, command line,
  // QEMU build). Nothing of the run: port, token and names come after.
  void update_snapshot_key() {
    struct stat st {};
    if (!snapshots_ || stat(image_.c_str(), &st) != 0) {
      snapshot_key_.clear();
      return;
    }
    std::ostringstream m;
    m << "leapfrog-vm-snapshot 1\nkernel " << kernel_.sha256 << "\nimage " << image_ << " " << st.st_size
      << " " << st.st_ino << " " << st.st_mtim.tv_sec << "." << st.st_mtim.tv_nsec << "\nmachine "
      << opts_.cpus << " " << opts_.mem_mib << " " << (kvm_ ? "kvm" : "tcg") << "\nappend "
      << config(template_append(), "", kvm_).append << "\nqemu " << qemu_fingerprint_ << "\n";
    snapshot_key_ = sha256_text(m.str());
  }

  // A saved VM is two files: its devices (.state) and its RAM (.ram).
  std::string snapshot_file(const std::string& key) const {
    return opts_.cache_dir + "/snapshots/" + key + ".state";
  }
  std::string snapshot_ram(const std::string& key) const {
    return opts_.cache_dir + "/snapshots/" + key + ".ram";
  }
  std::string template_ram(const std::string& key) const {
    return snapshot_ram(key) + ".tmp" + std::to_string(getpid());
  }

  void remove_snapshot(const std::string& key) {
    std::error_code ec;
    stdfs::remove(snapshot_file(key), ec);
    stdfs::remove(snapshot_ram(key), ec);
  }

  // Sockets have short names: a unix socket path has 107 bytes at most.
  std::string socket_path(int index, const char* kind) const {
    return opts_.run_dir + "/s" + std::to_string(index) + "." + kind;
  }

  std::string template_append() const {
    return "lf.snapshot=1" + (kernel_cmdline_.empty() ? std::string() : " " + kernel_cmdline_);
  }

  std::string boot_append(const Slot& s) const {
    std::string append = "lf.port=" + std::to_string(port_) + " lf.name=" + s.name +
                         " lf.kernel=" + opts_.kernel_label;
    if (opts_.selftest) append += " lf.selftest=1";
    if (!kernel_cmdline_.empty()) append += " " + kernel_cmdline_;
    return append;
  }

  QemuConfig config(const std::string& append, const std::string& console, bool kvm) const {
    QemuConfig c;
    c.kernel = kernel_.vmlinux.empty() ? kernel_.image : kernel_.vmlinux;
    c.initrd = initrd_;
    c.append = std::string(kBaseCmdline) + " " + append;
    c.cpus = opts_.cpus;
    c.mem_mib = opts_.mem_mib;
    c.kvm = kvm;
    c.coordinator_port = port_;
    c.console_log = console;
    c.stderr_log = console + ".qemu";
    return c;
  }

  // KVM only if a probe boot reaches /init in time: /dev/kvm may answer and
  // still be unable to run a stock kernel (PITFALLS.md).
  bool decide_kvm() {
    if (opts_.kvm == "off") return false;
    if (access("/dev/kvm", R_OK | W_OK) != 0) {
      if (opts_.kvm == "on") throw std::runtime_error("--kvm on, but /dev/kvm is not usable");
      return false;
    }
    const std::string console = opts_.run_dir + "/kvm-probe.console.log";
    try {
      QemuProcess probe(config("lf.probe=1", console, true));
      const bool exited = probe.wait_exit(milliseconds(20'000));
      const bool ok =
          exited && read_from(console, 0).find("leapfrog-probe-ok") != std::string::npos;
      spdlog::info("vm.kvm_probe usable={} exited={}", ok, exited);
      if (!ok && opts_.kvm == "on")
        throw std::runtime_error("--kvm on, but a probe boot under KVM failed");
      return ok;
    } catch (const std::runtime_error& e) {
      if (opts_.kvm == "on") throw;
      spdlog::warn("vm.kvm_probe_failed error=\"{}\"", e.what());
      return false;
    }
  }

  // Starts the slot's next VM: from the saved VM of the current key when
  // there is one; else as the template that saves it (other slots wait for
  // it rather than boot beside it on the same CPUs); else, with snapshots
  // off, by a full boot.
  void start(Slot& s) {
    close_control(s);
    s.qmp.reset();
    if (s.qemu) host_load_.forget(s.qemu->pid());
    s.qemu.reset();
    if (opts_.prepare_only && (!snapshots_ || snapshot_key_.empty())) {
      if (failure_.empty()) failure_ = "the VM could not be saved (see the log)";
      s.stopped = true;
      return;
    }
    if (snapshots_ && !snapshot_key_.empty()) {
      s.snapshot_key = snapshot_key_;
      const std::string file = snapshot_file(snapshot_key_);
      if (access(file.c_str(), R_OK) == 0 && access(snapshot_ram(snapshot_key_).c_str(), R_OK) == 0) {
        if (opts_.prepare_only) {
          spdlog::info("vm.saved_vm_ready kernel={} file={}", opts_.kernel_label, file);
          saved_ = true;
          s.stopped = true;
          return;
        }
        launch(s, Slot::Phase::kRestore, file);
        return;
      }
      if (making_key_ == snapshot_key_) {
        s.phase = Slot::Phase::kWaiting;
        spdlog::info("vm.waiting_for_snapshot agent={}", s.name);
        return;
      }
      std::error_code ec;
      stdfs::create_directories(stdfs::path(file).parent_path(), ec);
      if (!ec) {
        making_key_ = snapshot_key_;
        launch(s, Slot::Phase::kTemplate, "");
        return;
      }
      spdlog::warn("vm.snapshots_off agent={} reason=\"cannot create {}: {}\": every VM boots in full", s.name,
                   stdfs::path(file).parent_path().string(), ec.message());
      failure_ = "cannot create " + stdfs::path(file).parent_path().string() + ": " + ec.message();
      snapshots_ = false;
      if (opts_.prepare_only) {
        s.stopped = true;
        return;
      }
    }
    launch(s, Slot::Phase::kBoot, "");
  }

  void launch(Slot& s, Slot::Phase phase, const std::string& incoming) {
    ++s.generation;
    s.console = opts_.run_dir + "/" + s.name + "." + std::to_string(s.generation) + ".console.log";
    s.phase = phase;
    s.restored = phase == Slot::Phase::kRestore;
    s.sends = 0;
    s.last_send = Steady::time_point();
    s.registered = false;
    s.registered_offset = 0;
    s.console_size = 0;
    s.job = 0;
    s.report_seen.reset();
    s.started = s.last_output = s.last_seen_local = s.phase_started = Steady::now();
    s.started_wall = Wall::now();
    s.kernel_sha256 = kernel_.sha256;
    QemuConfig c;
    if (phase == Slot::Phase::kBoot) {
      c = config(boot_append(s), s.console, kvm_);
      // Its ttyS1 carries the host's load to the guest (send_host_view).
      s.control_socket = c.control_socket = socket_path(s.index, "ctl");
      unlink(c.control_socket.c_str());
    } else {
      // The template and its copies boot the image without the token, with
      // the same command line: the saved state must match the machine it is
      // loaded into.
      c = config(template_append(), s.console, kvm_);
      c.initrd = image_;
      s.qmp_socket = c.qmp_socket = socket_path(s.index, "qmp");
      s.control_socket = c.control_socket = socket_path(s.index, "ctl");
      unlink(c.qmp_socket.c_str());
      unlink(c.control_socket.c_str());
      c.incoming = incoming;
      // The template's RAM becomes the saved VM's RAM file; each copy maps
      // that file copy-on-write instead of reading its RAM from the state.
      if (phase == Slot::Phase::kTemplate) {
        c.ram_file = template_ram(s.snapshot_key);
        c.ram_shared = true;
      } else {
        c.ram_file = snapshot_ram(s.snapshot_key);
      }
    }
    s.qemu = std::make_unique<QemuProcess>(c);
    static const char* const kModes[] = {"boot", "template", "restore", "handoff", "waiting"};
    spdlog::info("vm.boot agent={} generation={} mode={} console={}", s.name, s.generation,
                 kModes[static_cast<int>(phase)], s.console);
    if (opts_.events) opts_.events->vm_started(opts_.kernel_label, kModes[static_cast<int>(phase)]);
    if (phase == Slot::Phase::kRestore) {
      try {
        s.qmp = std::make_unique<QmpClient>(s.qmp_socket, milliseconds(10'000));
        load_vm_state(*s.qmp, incoming);
      } catch (const QmpError& e) {
        restore_failed(s, e.what());
      }
    }
  }

  // The snapshot steps of a slot that is not yet booted (kTemplate,
  // kRestore, kHandoff). True when supervise() should go on with the usual
  // checks (boot deadline, QEMU exit) this round.
  bool advance_snapshot(Slot& s, Steady::time_point now, bool exited) {
    switch (s.phase) {
      case Slot::Phase::kTemplate: {
        const std::string text = read_from(s.console, 0);
        if (exited && text.find(kSnapshotUnavailable) != std::string::npos) {
          spdlog::warn("vm.snapshots_off agent={} reason=\"the guest has no second serial port\": every VM "
                       "boots in full",
                       s.name);
          snapshots_ = false;
          making_key_.clear();
          failure_ = "the guest has no second serial port";
          start(s);
          return false;
        }
        if (exited && text.empty()) {
          // QEMU itself gave up (e.g. the cache's filesystem cannot hold a
          // shared RAM file): not the kernel's fault. A full boot tells.
          const std::string qemu_said = trim(read_from(s.console + ".qemu", 0));
          spdlog::warn("vm.snapshots_off agent={} reason=\"QEMU exited (status {}) before the template's "
                       "console said anything: {}\": every VM boots in full",
                       s.name, s.qemu->exit_status(), qemu_said);
          failure_ = "QEMU exited before the VM printed anything: " + qemu_said;
          snapshots_ = false;
          making_key_.clear();
          start(s);
          return false;
        }
        if (exited || text.find(kSnapshotReady) == std::string::npos) return true;
        save_template(s);
        return false;
      }
      case Slot::Phase::kRestore: {
        if (exited) {
          restore_failed(s, "QEMU exited with status " + std::to_string(s.qemu->exit_status()) +
                                " while loading the saved VM: " + trim(read_from(s.console + ".qemu", 0)));
          return false;
        }
        // Sent already while the state loads: the line that arrives once the
        // VM runs is the one it takes, with no round trip lost.
        if (now - s.last_send >= milliseconds(50)) send_identity(s);
        std::string status;
        try {
          status = s.qmp->execute("query-status").value("status", "");
          // Loaded: the template was saved stopped (qmp.h), so its copy
          // starts stopped too.
          if (status == "paused") {
            s.qmp->execute("cont");
            status = "running";
          }
        } catch (const QmpError& e) {
          restore_failed(s, e.what());
          return false;
        }
        if (status == "running") {
          spdlog::info("vm.restored agent={} generation={} ms={}", s.name, s.generation,
                       std::chrono::duration_cast<milliseconds>(now - s.started).count());
          to_handoff(s);
        } else if (now - s.phase_started > milliseconds(30'000)) {
          restore_failed(s, "the saved VM did not load within 30 s (QEMU status \"" + status + "\")");
        }
        return false;
      }
      case Slot::Phase::kHandoff: {
        if (exited) {
          if (!s.restored) return true;  // the template died: a boot failure
          restore_failed(s, "QEMU exited with status " + std::to_string(s.qemu->exit_status()) +
                                " before the restored VM took its identity");
          return false;
        }
        if (read_from(s.console, 0).find(kIdentityTaken + s.name) != std::string::npos) {
          close_control(s);
          s.qmp.reset();
          s.phase = Slot::Phase::kBoot;
          spdlog::info("vm.identity_taken agent={} generation={} restored={} ms={} sends={}", s.name, s.generation,
                       s.restored, std::chrono::duration_cast<milliseconds>(now - s.started).count(), s.sends);
          return true;
        }
        if (now - s.phase_started > milliseconds(20'000)) {
          if (s.restored) {
            restore_failed(s, "the restored VM did not take its identity within 20 s");
          } else {
            spdlog::warn("vm.snapshots_off agent={} reason=\"the template did not take its identity within 20 "
                         "s\": every VM boots in full",
                         s.name);
            snapshots_ = false;
            start(s);
          }
          return false;
        }
        const auto every = now - s.phase_started < milliseconds(2000) ? milliseconds(50) : milliseconds(250);
        if (now - s.last_send >= every) send_identity(s);
        return false;
      }
      default:
        return true;
    }
  }

  // The template reached the point every VM of its key starts from: save
  // it, and start the slot again from the saved VM like every other. (It
  // cannot run on: its RAM file is now the saved VM's.) If the save fails,
  // the template runs on and takes its identity, and VMs boot in full.
  void save_template(Slot& s) {
    const auto t0 = Steady::now();
    const std::string file = snapshot_file(s.snapshot_key);
    const std::string tmp = file + ".tmp" + std::to_string(getpid());
    try {
      if (!s.qmp) s.qmp = std::make_unique<QmpClient>(s.qmp_socket, milliseconds(10'000));
      save_vm_state(*s.qmp, tmp, milliseconds(60'000), true);
      // The RAM first: a .state is only ever beside its own .ram.
      stdfs::rename(template_ram(s.snapshot_key), snapshot_ram(s.snapshot_key));
      stdfs::rename(tmp, file);
      spdlog::info("vm.snapshot_saved agent={} file={} bytes={} ram_bytes={} ms={}", s.name, file,
                   file_size_or_zero(file), allocated_bytes(snapshot_ram(s.snapshot_key)),
                   std::chrono::duration_cast<milliseconds>(Steady::now() - t0).count());
      making_key_.clear();
      prune_snapshots();
      s.qemu->kill();
      start(s);
      return;
    } catch (const std::exception& e) {  // QmpError, std::filesystem::filesystem_error
      std::error_code ec;
      stdfs::remove(tmp, ec);
      stdfs::remove(template_ram(s.snapshot_key), ec);  // its mapping lives on
      spdlog::warn("vm.snapshot_failed agent={} error=\"{}\": every VM boots in full from now on", s.name,
                   e.what());
      failure_ = std::string("saving the VM failed: ") + e.what();
      snapshots_ = false;
    }
    making_key_.clear();
    if (opts_.prepare_only) {  // stops the slot
      start(s);
      return;
    }
    try {
      if (!s.qmp) throw QmpError("no QMP connection");
      s.qmp->execute("cont");  // a saved VM stays paused
    } catch (const QmpError& e) {
      spdlog::warn("vm.template_lost agent={} error=\"{}\"", s.name, e.what());
      start(s);
      return;
    }
    to_handoff(s);
  }

  void to_handoff(Slot& s) {
    s.phase = Slot::Phase::kHandoff;
    s.phase_started = Steady::now();
    s.last_send = Steady::time_point();
  }

  // Sends the VM its identity on its ttyS1 (again: bytes that arrive while
  // a restore still loads are lost, and /init takes only a whole line).
  void send_identity(Slot& s) {
    s.last_send = Steady::now();
    if (s.control_fd < 0) s.control_fd = connect_unix(s.control_socket);
    if (s.control_fd < 0) return;
    std::random_device rd;
    char seed[65];
    for (int i = 0; i < 8; ++i) std::snprintf(seed + 8 * i, 9, "%08x", rd());
    const std::string line = "lf-identity name=" + s.name + " port=" + std::to_string(port_) +
                             " kernel=" + opts_.kernel_label + " selftest=" + (opts_.selftest ? "1" : "0") +
                             " time=" + std::to_string(wall_micros(Wall::now()) / 1'000'000) +
                             " seed=" + seed + " token=" + opts_.token + " end\n";
    ++s.sends;
    // Never blocks: QEMU reads the socket only as fast as the guest's UART
    // takes bytes. A line cut short is ignored by /init.
    const ssize_t n = send(s.control_fd, line.data(), line.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK) close_control(s);
  }

  // Once a second, tells a running VM how busy the host is outside it: its
  // guest cannot see that, and lookup-scale records it with every point
  // (scenarios/catalogue/scale_host.h). A line the UART cannot take now is
  // dropped; the guest then treats the host's load as unknown, never as idle.
  void send_host_view(Slot& s, Steady::time_point now) {
    if (s.control_socket.empty() || now - s.last_host_view < milliseconds(1000)) return;
    s.last_host_view = now;
    const std::string line = host_load_.line_for(s.qemu->pid(), static_cast<uint32_t>(opts_.cpus));
    if (line.empty()) return;
    if (s.control_fd < 0) s.control_fd = connect_unix(s.control_socket);
    if (s.control_fd < 0) return;
    const ssize_t n = send(s.control_fd, line.data(), line.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK) close_control(s);
  }

  void close_control(Slot& s) {
    if (s.control_fd >= 0) close(s.control_fd);
    s.control_fd = -1;
  }

  // A VM that did not come back from the saved state: drop the state (it
  // may not fit this machine any more) and boot in full from now on.
  void restore_failed(Slot& s, const std::string& why) {
    spdlog::warn("vm.snapshot_restore_failed agent={} generation={} error=\"{}\": the saved VM is removed and "
                 "every VM boots in full from now on",
                 s.name, s.generation, why);
    if (s.qemu) s.qemu->kill();
    remove_snapshot(s.snapshot_key);
    snapshots_ = false;
    start(s);
  }

  // Keeps the newest kSnapshotsKept saved VMs (and no leftovers of a save
  // that was killed: temp files, a RAM file without its state).
  void prune_snapshots() {
    std::vector<std::pair<stdfs::file_time_type, std::string>> saved;  // keys
    std::error_code ec;
    const auto now = stdfs::file_time_type::clock::now();
    const std::string dir = opts_.cache_dir + "/snapshots/";
    for (const auto& e : stdfs::directory_iterator(dir, ec)) {
      const auto t = e.last_write_time(ec);
      if (ec) continue;
      const stdfs::path name = e.path().filename();
      const bool old = now - t > std::chrono::hours(1);
      if (name.extension() == ".state")
        saved.emplace_back(t, name.stem().string());
      else if (name.string().find(".tmp") != std::string::npos && old)
        stdfs::remove(e.path(), ec);
      else if (name.extension() == ".ram" && old && !stdfs::exists(dir + name.stem().string() + ".state", ec))
        stdfs::remove(e.path(), ec);
    }
    std::sort(saved.begin(), saved.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
    for (size_t i = kSnapshotsKept; i < saved.size(); ++i) remove_snapshot(saved[i].second);
  }

  v1::Outcome outcome(v1::Verdict verdict, const std::string& error, const Slot& s) const {
    v1::Outcome o;
    o.set_verdict(verdict);
    o.set_error(error);
    o.set_console_tail(console_tail(read_from(s.console, 0)));
    const auto now = wall_micros(Wall::now());
    o.mutable_finished_at()->set_seconds(now / 1'000'000);
    o.mutable_finished_at()->set_nanos(static_cast<int32_t>(now % 1'000'000) * 1000);
    return o;
  }

  void supervise(Slot& s) {
    if (s.phase == Slot::Phase::kWaiting) {
      // The template saved the VM (or failed to: start() then boots).
      if (making_key_ != snapshot_key_ || !snapshots_) start(s);
      return;
    }
    const auto now = Steady::now();
    const size_t size = file_size_or_zero(s.console);
    if (size != s.console_size) {
      s.console_size = size;
      s.last_output = now;
    }
    const bool exited = s.qemu->wait_exit(milliseconds(0));
    if (s.phase != Slot::Phase::kBoot && !advance_snapshot(s, now, exited)) return;
    // A VM may register and die between two polls: ask again before calling
    // it a boot failure.
    if (exited && !s.registered)
      if (auto a = coord_.agents()) agents_ = std::move(*a);
    auto it = agents_.find(s.name);
    if (it != agents_.end()) {
      const int64_t seen = micros(it->second.last_seen());
      if (seen != s.last_seen_us) {
        s.last_seen_us = seen;
        s.last_seen_local = now;
        // Alive: what it holds now (0 once the job is done).
        s.job = it->second.current_job();
      } else if (it->second.current_job() != 0) {
        s.job = it->second.current_job();
      }
    }
    if (!s.registered) {
      if (it != agents_.end() && s.last_seen_us >= wall_micros(s.started_wall)) {
        s.registered = true;
        // Reports count from /init on (the agent may have crashed the kernel
        // before this poll saw it register); earlier ones are the boot's. A
        // restored VM's console starts after its boot.
        const size_t init = read_from(s.console, 0).find(kInitLine);
        s.registered_offset = s.restored ? 0 : init == std::string::npos ? size : init;
        s.last_seen_local = now;
        ever_registered_ = true;
        spdlog::info("vm.registered agent={} generation={} boot_ms={}", s.name, s.generation,
                     std::chrono::duration_cast<milliseconds>(now - s.started).count());
        if (opts_.events)
          opts_.events->vm_registered(opts_.kernel_label,
                                      std::chrono::duration_cast<milliseconds>(now - s.started));
      } else {
        // A restored VM that does not come up says nothing about the
        // kernel: boot it.
        if (s.restored && (exited || now - s.started > opts_.boot_timeout)) {
          restore_failed(s, exited ? "QEMU exited with status " + std::to_string(s.qemu->exit_status()) +
                                         " before the agent registered"
                                   : "the agent did not register in time");
          return;
        }
        if (exited) {
          boot_failure(s, "QEMU exited with status " + std::to_string(s.qemu->exit_status()) +
                              " before the agent registered");
        } else if (now - s.started > opts_.boot_timeout) {
          s.qemu->kill();
          boot_failure(s, "the agent did not register within " +
                              std::to_string(opts_.boot_timeout.count() / 1000) + " s of boot");
        }
        return;
      }
    }
    if (!exited) send_host_view(s, now);
    // The label's kernel was rebuilt: reboot into it between jobs.
    if (s.kernel_sha256 != kernel_.sha256 && s.job == 0 && !exited) {
      spdlog::info("vm.reboot_new_kernel agent={} old_sha256={} new_sha256={} release={}", s.name,
                   s.kernel_sha256.substr(0, 12), kernel_.sha256.substr(0, 12), kernel_.release);
      s.qemu->kill();
      start(s);
      return;
    }
    // Reports since the agent registered.
    std::vector<console::KernelReport> reports;
    if (exited || size > s.registered_offset)
      reports = console::parse_console(read_from(s.console, s.registered_offset));
    if (!reports.empty() && !s.report_seen) s.report_seen = now;
    const bool settled = exited || (s.report_seen && (now - s.last_output > milliseconds(1000) ||
                                                      now - *s.report_seen > milliseconds(5000)));
    if (!reports.empty() && settled) {
      s.qemu->kill();
      const auto& r = reports.front();
      spdlog::warn("vm.kernel_report agent={} kind={} title=\"{}\" reports={}", s.name, r.kind,
                   r.title, reports.size());
      coord_.fail_job(s.name, s.job, outcome(v1::VERDICT_KERNEL_CRASH, r.title, s));
      if (opts_.events) opts_.events->vm_failed(opts_.kernel_label, "kernel-crash");
      start(s);
      return;
    }
    if (exited) {
      coord_.fail_job(s.name, s.job,
                      outcome(v1::VERDICT_KERNEL_CRASH,
                              "the VM exited (status " + std::to_string(s.qemu->exit_status()) +
                                  ") with no kernel report in its console",
                              s));
      if (opts_.events) opts_.events->vm_failed(opts_.kernel_label, "kernel-crash");
      start(s);
      return;
    }
    const auto quiet = std::min(now - s.last_output, now - s.last_seen_local);
    if (quiet > opts_.hang_timeout) {
      s.qemu->kill();
      const auto secs = std::chrono::duration_cast<std::chrono::seconds>(quiet).count();
      spdlog::warn("vm.hang agent={} job={} quiet_s={}", s.name, s.job, secs);
      coord_.fail_job(
          s.name, s.job,
          outcome(v1::VERDICT_HANG,
                  "no heartbeat and no console output for " + std::to_string(secs) + " s", s));
      if (opts_.events) opts_.events->vm_failed(opts_.kernel_label, "hang");
      start(s);
    }
  }

  // The slot reports BOOT_FAILURE once and stops: booting a kernel that does
  // not boot again would only loop.
  // Slots waiting for this slot's template stop with it: the kernel they
  // wait to boot did not boot.
  void boot_failure(Slot& s, const std::string& why) {
    const v1::Outcome o = outcome(v1::VERDICT_BOOT_FAILURE, why, s);
    if (opts_.prepare_only) {
      failure_ = "the kernel did not boot: " + why + "; the console's end:\n" + o.console_tail();
      spdlog::warn("vm.prepare_failed kernel={} error=\"{}\"", opts_.kernel_label, why);
      making_key_.clear();
      s.qemu.reset();
      s.stopped = true;
      return;
    }
    coord_.report_boot_failure(s.name, opts_.kernel_label, o);
    if (opts_.events) opts_.events->vm_failed(opts_.kernel_label, "boot-failure");
    if (s.phase == Slot::Phase::kTemplate || s.phase == Slot::Phase::kHandoff) {
      making_key_.clear();
      for (auto& other : slots_) {
        if (other.phase != Slot::Phase::kWaiting || other.stopped) continue;
        v1::Outcome same = o;
        same.set_error("VM " + s.name + ", booting the same kernel, did not boot: " + why);
        coord_.report_boot_failure(other.name, opts_.kernel_label, same);
        other.stopped = true;
      }
    }
    close_control(s);
    s.qmp.reset();
    s.qemu.reset();
    s.stopped = true;
  }

  LauncherOptions opts_;
  HostLoadMeter host_load_;
  const std::atomic<bool>& stop_;
  Coordinator coord_;
  StoredKernel kernel_;
  std::string kernel_cmdline_;  // the registered kernel's extra boot words
  std::string ignored_sha256_;  // a replacement that cannot boot (build-failure)
  std::string initrd_;
  std::string image_;             // the cached image, without the token
  bool snapshots_ = false;        // VMs start from saved VMs (off after a failure)
  std::string qemu_fingerprint_;
  std::string snapshot_key_;      // of the current kernel; "" with snapshots off
  std::string making_key_;        // a template of this key is booting
  int port_ = 0;
  bool kvm_ = false;
  bool ever_registered_ = false;
  bool saved_ = false;   // prepare_only: the saved VM is there
  std::string failure_;  // prepare_only: why it is not
  std::vector<Slot> slots_;
  std::map<std::string, v1::AgentInfo> agents_;
};

}  // namespace

std::string console_tail(const std::string& text, size_t max_bytes) {
  if (text.size() <= max_bytes) return text;
  size_t start = text.size() - max_bytes;
  const size_t nl = text.find('\n', start);
  if (nl != std::string::npos && nl + 1 < text.size()) start = nl + 1;
  return text.substr(start);
}

int run_launcher(const LauncherOptions& in, const std::atomic<bool>& stop) {
  LauncherOptions opts = in;
  if (opts.cache_dir.empty()) opts.cache_dir = default_cache_dir();
  if (opts.count < 1) throw std::runtime_error("--count must be at least 1");
  Launcher launcher(opts, stop);
  return launcher.run();
}

int prepare_saved_vm(const LauncherOptions& in, const std::atomic<bool>& stop, std::string& why) {
  LauncherOptions opts = in;
  if (opts.cache_dir.empty()) opts.cache_dir = default_cache_dir();
  opts.prepare_only = true;
  opts.count = 1;
  Launcher launcher(opts, stop);
  const int code = launcher.run();
  why = launcher.failure();
  return code;
}

}  // namespace leapfrog::vm
