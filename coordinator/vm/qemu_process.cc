#include "coordinator/vm/qemu_process.h"

#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <spdlog/spdlog.h>
#include <boost/process.hpp>
#include <boost/process/extend.hpp>
#include <stdexcept>

namespace leapfrog::vm {

namespace bp = boost::process;

std::string shell_quote(const std::string& text) {
  std::string out = "'";
  for (char c : text) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

std::string clock_cmdline(bool kvm) {
  return kvm ? "" : "clocksource=tsc tsc=reliable no_timer_check";
}

std::string qemu_fingerprint(const std::string& qemu) {
  const std::string exe = bp::search_path(qemu).string();
  struct stat st {};
  if (exe.empty() || stat(exe.c_str(), &st) != 0)
    throw std::runtime_error("\"" + qemu + "\" is not installed (qemu-system-x86)");
  return exe + " " + std::to_string(st.st_size) + " " + std::to_string(st.st_ino) + " " +
         std::to_string(st.st_mtim.tv_sec) + "." + std::to_string(st.st_mtim.tv_nsec);
}

std::vector<std::string> qemu_argv(const QemuConfig& cfg) {
  std::vector<std::string> a = {cfg.qemu,
                                "-nodefaults",
                                "-no-user-config",
                                "-display",
                                "none",
                                "-no-reboot",
                                "-machine",
                                cfg.ram_file.empty() ? "pc" : "pc,memory-backend=lfram",
                                "-smp",
                                std::to_string(cfg.cpus),
                                "-m",
                                std::to_string(cfg.mem_mib)};
  if (!cfg.ram_file.empty()) {
    std::string path;  // a comma in an -object value is written twice
    for (char c : cfg.ram_file) path += c == ',' ? std::string(",,") : std::string(1, c);
    a.insert(a.end(), {"-object", "memory-backend-file,id=lfram,size=" + std::to_string(cfg.mem_mib) +
                                      "M,mem-path=" + path + ",share=" + (cfg.ram_shared ? "on" : "off")});
  }
  if (cfg.kvm) {
    a.insert(a.end(), {"-accel", "kvm", "-cpu", "host"});
  } else {
    a.insert(a.end(), {"-accel", "tcg", "-cpu", "max"});
  }
  a.insert(a.end(), {"-kernel", cfg.kernel, "-initrd", cfg.initrd, "-append", cfg.append, "-serial",
                     "file:" + cfg.console_log});
  if (!cfg.control_socket.empty())
    a.insert(a.end(), {"-chardev", "socket,id=lfctl,path=" + cfg.control_socket + ",server=on,wait=off",
                       "-serial", "chardev:lfctl"});
  if (!cfg.qmp_socket.empty()) a.insert(a.end(), {"-qmp", "unix:" + cfg.qmp_socket + ",server=on,wait=off"});
  if (!cfg.incoming.empty())
    a.insert(a.end(), {"-incoming", cfg.ram_file.empty() ? "exec:cat " + shell_quote(cfg.incoming) : "defer"});
  if (cfg.coordinator_port > 0) {
    const std::string p = std::to_string(cfg.coordinator_port);
    // cmd: opens one host connection per guest connection; a tcp: chardev
    // connects once, when QEMU starts, and the guest could never reconnect
    // (after a coordinator restart, or an agent restart in the guest).
    a.insert(a.end(), {"-netdev",
                       "user,id=n0,restrict=on,guestfwd=tcp:10.0.2.100:" + p +
                           "-cmd:" + cfg.busybox + " nc 127.0.0.1 " + p,
                       // No option ROM: it is for network boot, and the BIOS
                       // running it (iPXE under TCG) delays every boot.
                       "-device", "virtio-net-pci,netdev=n0,romfile="});
  }
  return a;
}

struct QemuProcess::Impl {
  bp::child child;
  int pidfd = -1;
};

QemuProcess::QemuProcess(const QemuConfig& cfg) : impl_(std::make_unique<Impl>()) {
  const auto argv = qemu_argv(cfg);
  std::vector<std::string> args(argv.begin() + 1, argv.end());
  const std::string exe = bp::search_path(cfg.qemu).string();
  if (exe.empty())
    throw std::runtime_error("\"" + cfg.qemu + "\" is not installed (qemu-system-x86)");
  std::error_code ec;
  // QEMU dies with the launcher: PDEATHSIG set in the child before exec.
  impl_->child = bp::child(
      bp::exe = exe, bp::args = args,
      bp::std_in<bp::null, (bp::std_out & bp::std_err)> cfg.stderr_log, ec,
      bp::extend::on_exec_setup = [](auto&) { prctl(PR_SET_PDEATHSIG, SIGKILL); });
  if (ec) throw std::runtime_error("cannot start \"" + exe + "\": " + ec.message());
  impl_->pidfd = static_cast<int>(syscall(SYS_pidfd_open, impl_->child.id(), 0));
  spdlog::info("qemu.start pid={} console={}", impl_->child.id(), cfg.console_log);
}

QemuProcess::~QemuProcess() {
  kill();
  if (impl_->pidfd >= 0) close(impl_->pidfd);
}

pid_t QemuProcess::pid() const {
  return impl_->child.id();
}

bool QemuProcess::wait_exit(std::chrono::milliseconds timeout) {
  if (status_ >= 0) return true;
  if (impl_->pidfd >= 0) {
    pollfd p{impl_->pidfd, POLLIN, 0};
    if (poll(&p, 1, static_cast<int>(timeout.count())) <= 0) return false;
  }
  int st = 0;
  const pid_t r = waitpid(impl_->child.id(), &st, impl_->pidfd >= 0 ? 0 : WNOHANG);
  if (r != impl_->child.id()) return false;
  status_ = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  impl_->child.detach();
  return true;
}

void QemuProcess::kill() {
  if (status_ >= 0) return;
  ::kill(impl_->child.id(), SIGKILL);
  wait_exit(std::chrono::milliseconds(10'000));
}

}  // namespace leapfrog::vm
