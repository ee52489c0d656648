// VM snapshots with the real QEMU and the Debian kernel (skipped without
// one): a VM booted to a waiting /init is saved through QMP, a second QEMU
// starts from the file, and the restored guest reads the line the host hands
// it on ttyS1 and carries on; it never boots (its console has no boot line).

#include "coordinator/vm/qmp.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "coordinator/pg/test_dir.h"
#include "common/kernel/kernel_image.h"
#include "coordinator/vm/qemu_process.h"
#include "tests/process_util.h"

namespace leapfrog::vm {
namespace {

namespace stdfs = std::filesystem;
using coord::testing::TestDir;
using namespace std::chrono_literals;

// Polls the file until it holds `text`.
bool wait_for_text(const std::string& path, const std::string& text, std::chrono::milliseconds limit) {
  return testing::poll_until([&] { return testing::slurp(path).find(text) != std::string::npos; }, limit, 20ms);
}

// busybox and an /init that opens ttyS1, says it is ready, and prints the
// first line from ttyS1 that carries "lf:" (a restored serial port may drop
// what arrives first), then powers off.
std::string waiting_initramfs(const std::string& dir) {
  return testing::busybox_initramfs(dir,
                                    "#!/bin/busybox sh\n"
                                    "/bin/busybox mount -t devtmpfs dev /dev\n"
                                    "exec 3< /dev/ttyS1\n"
                                    "echo \"qmp-test: ready\"\n"
                                    "while read -r line <&3; do\n"
                                    "  case \"$line\" in *lf:*) echo \"qmp-test: got ${line#*lf:}\"; break ;; esac\n"
                                    "done\n"
                                    "/bin/busybox poweroff -f\n");
}

// Connects to the VM's ttyS1 socket. -1 if QEMU never offers it.
int connect_control(const std::string& socket_path) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, socket_path.c_str(), sizeof addr.sun_path - 1);
  for (int i = 0; i < 500; ++i) {
    const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0) return fd;
    close(fd);
    std::this_thread::sleep_for(10ms);
  }
  return -1;
}

// Boots a template, saves it, starts a clone from the save and checks that
// the clone carries on. `ram_file`: guest RAM in a file (shared in the
// template, private in the clone), left out of the state file.
void save_and_restore(bool ram_file) {
  const std::string image = testing::stock_boot_kernel();
  if (image.empty()) GTEST_SKIP() << "no /boot/vmlinuz-6.1.*";
  TestDir dir;
  const StoredKernel k = store_kernel(dir / "store", image, "");
  const std::string initrd = waiting_initramfs(dir.path());
  ASSERT_FALSE(initrd.empty());
  const std::string ram = dir / "vm.ram";
  auto config = [&](const std::string& tag) {
    QemuConfig c;
    c.kernel = k.vmlinux.empty() ? k.image : k.vmlinux;
    c.initrd = initrd;
    c.append = kBaseCmdline;
    c.console_log = dir / (tag + ".console.log");
    c.stderr_log = c.console_log + ".qemu";
    c.qmp_socket = dir / (tag + ".qmp");
    c.control_socket = dir / (tag + ".ctl");
    if (ram_file) c.ram_file = ram;
    return c;
  };
  const std::string state = dir / "vm.state";
  {
    QemuConfig c = config("template");
    c.ram_shared = true;
    QemuProcess qemu(c);
    ASSERT_TRUE(wait_for_text(c.console_log, "qmp-test: ready", 120s)) << testing::slurp(c.console_log);
    QmpClient qmp(c.qmp_socket, 10s);
    EXPECT_EQ(qmp.execute("query-status").value("status", ""), "running");
    try {
      qmp.execute("no-such-command");
      ADD_FAILURE() << "QEMU accepted an unknown command";
    } catch (const QmpError& e) {
      EXPECT_NE(std::string(e.what()).find("no-such-command"), std::string::npos) << e.what();
    }
    save_vm_state(qmp, state, 120s, ram_file);
  }
  stdfs::file_time_type ram_written;
  if (ram_file) {
    // The RAM is in its file, and only the devices are in the state.
    EXPECT_LT(stdfs::file_size(state), 4u << 20);
    ASSERT_EQ(stdfs::file_size(ram), 512u << 20);
    ram_written = stdfs::last_write_time(ram);
  } else {
    ASSERT_GT(stdfs::file_size(state), 1u << 20);
  }
  QemuConfig c = config("clone");
  c.incoming = state;
  QemuProcess clone(c);
  // Bytes that reach the serial port before the state is loaded are lost:
  // the line goes once the clone runs, and again until the guest has it.
  QmpClient qmp(c.qmp_socket, 10s);
  if (ram_file) load_vm_state(qmp, state);
  const auto until = std::chrono::steady_clock::now() + 60s;
  // The save stopped the VM, so the loaded copy is paused until `cont`.
  while (qmp.execute("query-status").value("status", "") != "paused" &&
         std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(10ms);
  EXPECT_EQ(qmp.execute("query-status").value("status", ""), "paused");
  qmp.execute("cont");
  EXPECT_EQ(qmp.execute("query-status").value("status", ""), "running");
  const int ctl = connect_control(c.control_socket);
  ASSERT_GE(ctl, 0) << "no ttyS1 socket";
  bool got = false;
  for (int i = 0; i < 30 && !got; ++i) {
    const std::string line = "\nlf:clone-1\n";
    ASSERT_EQ(write(ctl, line.data(), line.size()), static_cast<ssize_t>(line.size()));
    got = wait_for_text(c.console_log, "qmp-test: got clone-1", 2s);
  }
  close(ctl);
  EXPECT_TRUE(got) << testing::slurp(c.console_log);
  EXPECT_TRUE(clone.wait_exit(30'000ms)) << "the restored VM did not power off";
  // Restored, not booted: the clone's console never saw /init start.
  EXPECT_EQ(testing::slurp(c.console_log).find("qmp-test: ready"), std::string::npos)
      << testing::slurp(c.console_log);
  // The clone ran on a private copy: the saved RAM file was not written (a
  // write through a shared mapping sets its mtime).
  if (ram_file) {
    EXPECT_TRUE(stdfs::last_write_time(ram) == ram_written) << "the clone wrote the saved RAM file";
  }
}

TEST(VmSnapshot, ARestoredVmCarriesOnWithoutBooting) {
  save_and_restore(false);
}

TEST(VmSnapshot, ARestoredVmMapsTheSavedRamFileCopyOnWrite) {
  save_and_restore(true);
}

TEST(VmSnapshot, NoQemuBehindTheSocketIsAClearError) {
  TestDir dir;
  try {
    QmpClient qmp(dir / "missing.qmp", 100ms);
    FAIL() << "connected to nothing";
  } catch (const QmpError& e) {
    EXPECT_NE(std::string(e.what()).find("missing.qmp"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace leapfrog::vm
