#pragma once
// QEMU's machine protocol (QMP) over its unix socket, and VM snapshots built
// on it: a VM booted once is saved to a file (live migration to
// `exec:cat > FILE`), and later VMs start from that file with `-incoming`
// instead of booting, running in ~0.6 s instead of ~3 s under TCG. The launcher
// (launcher.h) starts VMs this way.

#include <chrono>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>

namespace leapfrog::vm {

// QEMU refused a command, or the socket failed; the message says which.
class QmpError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class QmpClient {
 public:
  // Connects (retrying until `timeout`: QEMU creates the socket as it
  // starts), reads the greeting and leaves capabilities negotiation.
  QmpClient(const std::string& socket_path, std::chrono::milliseconds timeout);
  ~QmpClient();
  QmpClient(const QmpClient&) = delete;
  QmpClient& operator=(const QmpClient&) = delete;

  // Runs `command` and returns its "return" member; events that arrive
  // meanwhile are skipped. Throws QmpError with QEMU's error description.
  nlohmann::json execute(const std::string& command, const nlohmann::json& arguments = nullptr);

 private:
  nlohmann::json read_message();
  int fd_ = -1;
  std::string buffer_;
  std::chrono::steady_clock::time_point deadline_;
  std::chrono::milliseconds timeout_;
};

// Saves the VM behind `qmp` into `file`. The VM is stopped for the save and
// stays stopped (QMP `cont` resumes it). `ram_in_file`: the VM's RAM is a
// shared RAM file (QemuConfig::ram_file), which then holds it, and the state
// file only the devices (QEMU's x-ignore-shared): the RAM file must not be
// written again (the VM must not resume).
// Throws QmpError if the migration fails or outlasts `timeout`.
void save_vm_state(QmpClient& qmp, const std::string& file, std::chrono::milliseconds timeout,
                   bool ram_in_file = false);

// Starts loading `file` (saved with ram_in_file) into the VM behind `qmp`,
// started with a private RAM file holding the saved RAM and `-incoming
// defer`. Returns at once; the VM is loaded when query-status says
// "paused". Throws QmpError if QEMU refuses.
void load_vm_state(QmpClient& qmp, const std::string& file);

}  // namespace leapfrog::vm
