#pragma once
// `leapfrog kernel add` (register a kernel image) and `leapfrog vm run` (boot
// VMs of a kernel with the agent inside); `leapfrog up --vms` starts the
// latter as a child.

#include <sys/types.h>

#include <CLI/CLI.hpp>
#include <string>

#include "coordinator/cli/client.h"
#include "coordinator/vm/launcher.h"

namespace leapfrog::cli {

class VmCommands {
 public:
  // Adds the verbs to `app`.
  explicit VmCommands(CLI::App& app);
  bool parsed() const;
  // Runs the parsed verb; returns the exit code. Throws std::runtime_error.
  int run(const Endpoint& ep, const std::string& data_dir, bool json);

 private:
  int kernel_add(const Endpoint& ep, const std::string& data_dir, bool json);
  int vm_run(const Endpoint& ep, const std::string& data_dir);

  CLI::App* kernel_ = nullptr;
  CLI::App* kernel_add_ = nullptr;
  CLI::App* vm_ = nullptr;
  CLI::App* vm_run_ = nullptr;
  std::string label_, image_, modules_, cache_dir_, cmdline_;
  std::string metrics_listen_;  // vm run: serve /metrics there
  vm::LauncherOptions launch_;
  double boot_timeout_s_ = 90, hang_timeout_s_ = 30, add_boot_timeout_s_ = 90;
  bool die_with_parent_ = false;
  bool prepare_ = true;  // kernel add: make the kernel's saved VM
};

// `leapfrog up --vms N --kernel LABEL`: starts `leapfrog vm run` for the
// coordinator at `address`; it dies with the caller. Returns its pid.
pid_t spawn_vm_launcher(const std::string& address, const std::string& token_file,
                        const std::string& data_dir, const std::string& kernel, int count);

}  // namespace leapfrog::cli
