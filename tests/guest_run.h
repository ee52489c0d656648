#pragma once
// A shell script run once in a Leapfrog VM, with no coordinator: the
// kernel's vmlinux from the kernel store, the launcher's VM image (built by
// build-initramfs.sh, cached) plus a second cpio holding the script as
// /etc/leapfrog/run and any extra files, booted with `lf.run=1` on the
// launcher's machine and command line (deploy/vm/init runs the script once
// the modules are loaded, prints "leapfrog-run: exit STATUS" and powers
// off). Used by tests/guest_clock_e2e_test.cc and bench/vm_bench.cc.

#include <sys/stat.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>

#include "common/kernel/kernel_image.h"
#include "coordinator/vm/qemu_process.h"
#include "tests/process_util.h"

namespace leapfrog::testing {

struct GuestImage {
  std::string vmlinux;  // the ELF vmlinux (PVH boot), else the image itself
  std::string initrd;   // the cached VM image, without a token
  std::string release;
  std::string error;  // why there is none
};

// Stores `kernel_image` in `cache` and builds the VM image for it with
// `static_agent`, as `leapfrog kernel add` and the launcher do.
inline GuestImage guest_image(const std::string& kernel_image, const std::string& cache,
                              const std::string& image_script, const std::string& static_agent,
                              const std::string& logs) {
  GuestImage g;
  try {
    const vm::StoredKernel k = vm::store_kernel(cache, kernel_image, "");
    g.vmlinux = k.vmlinux.empty() ? k.dir + "/image" : k.vmlinux;
    g.release = k.release;
    std::vector<std::string> argv = {image_script, "image",   "--agent", static_agent,
                                     "--release",  k.release, "--cache", cache + "/images"};
    if (!k.modules.empty()) argv.insert(argv.end(), {"--modules", k.modules});
    const Result r = run_to_end(argv, logs, std::chrono::seconds(300));
    if (r.exit != 0) {
      g.error = "build-initramfs.sh failed: " + r.err;
      return g;
    }
    g.initrd = r.out.substr(0, r.out.find('\n'));
  } catch (const std::exception& e) {
    g.error = e.what();
  }
  return g;
}

struct GuestRun {
  std::string console;  // the whole serial console
  int exit = -1;        // the script's status; -1 if it did not end
  bool timed_out = false;
};

// Boots `image` with `script` (and `files`: guest path -> host file, copied
// into the second cpio with their modes) and waits for QEMU to power off
// within `timeout`. `clock` replaces the launcher's clock words
// (vm::clock_cmdline) when set: the bench's before/after.
inline GuestRun run_in_guest(const GuestImage& image, const std::string& dir,
                             const std::string& script,
                             const std::map<std::string, std::string>& files,
                             std::chrono::milliseconds timeout, const std::string* clock = nullptr,
                             int cpus = 2, int mem_mib = 512) {
  namespace stdfs = std::filesystem;
  GuestRun run;
  const std::string stage = dir + "/stage";
  stdfs::remove_all(stage);
  stdfs::create_directories(stage + "/etc/leapfrog");
  std::ofstream(stage + "/etc/leapfrog/run") << script;
  for (const auto& [guest, host] : files) {
    stdfs::create_directories(stdfs::path(stage + guest).parent_path());
    stdfs::copy_file(host, stage + guest, stdfs::copy_options::overwrite_existing);
  }
  const std::string extra = dir + "/run.cpio", initrd = dir + "/initrd.cpio";
  const std::string cmd =
      "cd " + stage +
      " && find etc bin -mindepth 0 2>/dev/null | cpio --quiet -o -H newc -R 0:0 > " + extra +
      " && cat " + image.initrd + " " + extra + " > " + initrd;
  if (std::system(cmd.c_str()) != 0) {
    run.console = "could not pack the script's cpio";
    return run;
  }
  vm::QemuConfig cfg;
  cfg.kernel = image.vmlinux;
  cfg.initrd = initrd;
  const std::string words = clock ? *clock : vm::clock_cmdline(false);
  cfg.append = std::string(vm::kBaseCmdline) + (words.empty() ? "" : " " + words) + " lf.run=1";
  cfg.cpus = cpus;
  cfg.mem_mib = mem_mib;
  cfg.console_log = dir + "/console.log";
  cfg.stderr_log = dir + "/qemu.log";
  {
    vm::QemuProcess qemu(cfg);
    run.timed_out = !qemu.wait_exit(timeout);
  }  // killed if still running
  run.console = slurp(cfg.console_log);
  const std::string tag = "leapfrog-run: exit ";
  const size_t at = run.console.rfind(tag);
  if (at != std::string::npos) run.exit = std::atoi(run.console.c_str() + at + tag.size());
  return run;
}

// The text after `prefix` on the console's last line that starts with it, or "".
inline std::string console_value(const std::string& console, const std::string& prefix) {
  size_t at = console.rfind("\n" + prefix);
  if (at == std::string::npos)
    return console.rfind(prefix, 0) == 0
               ? console.substr(prefix.size(), console.find('\n') - prefix.size())
               : "";
  at += 1 + prefix.size();
  std::string line = console.substr(at, console.find('\n', at) - at);
  while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.pop_back();
  return line;
}

}  // namespace leapfrog::testing
