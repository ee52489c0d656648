#include "coordinator/vm/qemu_backend.h"

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <spdlog/spdlog.h>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "coordinator/vm/qemu_process.h"
#include "coordinator/vm/qmp.h"

namespace leapfrog::vm {
namespace {

using std::chrono::milliseconds;

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

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

class QemuInstance : public Instance {
 public:
  QemuInstance(const QemuConfig& cfg, StartMode mode) : cfg_(cfg), qemu_(cfg) {
    if (mode != StartMode::kRestore) return;
    try {
      qmp_ = std::make_unique<QmpClient>(cfg_.qmp_socket, milliseconds(10'000));
      load_vm_state(*qmp_, cfg_.incoming);
    } catch (const QmpError& e) {
      throw VmError(e.what());
    }
  }
  ~QemuInstance() override {
    if (control_fd_ >= 0) close(control_fd_);
  }

  pid_t pid() const override { return qemu_.pid(); }
  bool exited() override { return qemu_.wait_exit(milliseconds(0)); }
  int exit_status() const override { return qemu_.exit_status(); }
  void kill() override { qemu_.kill(); }

  bool send_control(const std::string& line) override {
    if (control_fd_ < 0 && !cfg_.control_socket.empty())
      control_fd_ = connect_unix(cfg_.control_socket);
    if (control_fd_ < 0) return false;
    // Never blocks: QEMU reads the socket only as fast as the guest's UART
    // takes bytes. A line cut short is ignored by the guest.
    const ssize_t n = send(control_fd_, line.data(), line.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK) {
      close(control_fd_);
      control_fd_ = -1;
    }
    return true;
  }

  bool loaded() override {
    try {
      std::string status = qmp().execute("query-status").value("status", "");
      // Loaded: the template was saved stopped (qmp.h), so its copy starts
      // stopped too.
      if (status == "paused") {
        qmp().execute("cont");
        status = "running";
      }
      return status == "running";
    } catch (const QmpError& e) {
      throw VmError(e.what());
    }
  }

  void save(const std::string& state_file) override {
    try {
      save_vm_state(qmp(), state_file, milliseconds(60'000), true);
    } catch (const QmpError& e) {
      throw VmError(e.what());
    }
  }

  void resume() override {
    try {
      qmp().execute("cont");  // a saved VM stays paused
    } catch (const QmpError& e) {
      throw VmError(e.what());
    }
  }

 private:
  QmpClient& qmp() {
    if (cfg_.qmp_socket.empty()) throw QmpError("no QMP connection");
    if (!qmp_) qmp_ = std::make_unique<QmpClient>(cfg_.qmp_socket, milliseconds(10'000));
    return *qmp_;
  }

  QemuConfig cfg_;
  QemuProcess qemu_;
  std::unique_ptr<QmpClient> qmp_;
  int control_fd_ = -1;
};

}  // namespace

std::string QemuPool::socket_path(int index, const char* kind) const {
  // A unix socket path has 107 bytes at most: short names.
  return opts_.socket_dir + "/s" + std::to_string(index) + "." + kind;
}

std::string QemuPool::command_line(const std::string& append) const {
  const std::string clock = clock_cmdline(opts_.kvm);
  return std::string(kBaseCmdline) + (clock.empty() ? "" : " " + clock) + " " + append;
}

std::unique_ptr<Instance> QemuPool::create(const InstanceSpec& spec) {
  QemuConfig c;
  c.kernel = spec.kernel;
  c.initrd = spec.initrd;
  c.append = command_line(spec.append);
  c.cpus = opts_.cpus;
  c.mem_mib = opts_.mem_mib;
  c.kvm = opts_.kvm;
  c.coordinator_port = opts_.coordinator_port;
  c.console_log = spec.console;
  c.stderr_log = spec.console + ".qemu";
  // The control port (ttyS1) carries the host's load, and a saved VM's
  // copies their identity.
  c.control_socket = socket_path(spec.index, "ctl");
  unlink(c.control_socket.c_str());
  if (spec.mode != StartMode::kBoot) {
    c.qmp_socket = socket_path(spec.index, "qmp");
    unlink(c.qmp_socket.c_str());
    // The template's RAM becomes the saved VM's RAM file; each copy maps
    // that file copy-on-write instead of reading its RAM from the state.
    c.ram_file = spec.ram_file;
    c.ram_shared = spec.mode == StartMode::kTemplate;
    if (spec.mode == StartMode::kRestore) c.incoming = spec.state_file;
  }
  try {
    return std::make_unique<QemuInstance>(c, spec.mode);
  } catch (const VmError&) {
    throw;
  } catch (const std::runtime_error& e) {  // QemuProcess could not start
    throw VmError(e.what());
  }
}

std::string QemuPool::saved_vm_traits(std::string& why) const {
  if (socket_path(64, "qmp").size() >= sizeof(sockaddr_un::sun_path)) {
    why = "the run folder's path is too long for a unix socket";
    return "";
  }
  std::string qemu;
  try {
    qemu = qemu_fingerprint(QemuConfig().qemu);
  } catch (const std::runtime_error& e) {
    why = e.what();
    return "";
  }
  return "machine " + std::to_string(opts_.cpus) + " " + std::to_string(opts_.mem_mib) + " " +
         (opts_.kvm ? "kvm" : "tcg") + "\nqemu " + qemu + "\n";
}

bool probe_kvm(const std::string& mode, const std::string& kernel, const std::string& initrd,
               const std::string& console) {
  if (mode == "off") return false;
  if (access("/dev/kvm", R_OK | W_OK) != 0) {
    if (mode == "on") throw std::runtime_error("--kvm on, but /dev/kvm is not usable");
    return false;
  }
  try {
    QemuConfig c;
    c.kernel = kernel;
    c.initrd = initrd;
    c.append = std::string(kBaseCmdline) + " lf.probe=1";
    c.kvm = true;
    c.console_log = console;
    c.stderr_log = console + ".qemu";
    QemuProcess probe(c);
    const bool exited = probe.wait_exit(milliseconds(20'000));
    const bool ok = exited && slurp(console).find("leapfrog-probe-ok") != std::string::npos;
    spdlog::info("vm.kvm_probe usable={} exited={}", ok, exited);
    if (!ok && mode == "on")
      throw std::runtime_error("--kvm on, but a probe boot under KVM failed");
    return ok;
  } catch (const std::runtime_error& e) {
    if (mode == "on") throw;
    spdlog::warn("vm.kvm_probe_failed error=\"{}\"", e.what());
    return false;
  }
}

}  // namespace leapfrog::vm
