#include "coordinator/vm/launcher.h"

#include <sys/stat.h>
#include <unistd.h>

#include <spdlog/spdlog.h>
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <stdexcept>
#include <thread>

#include "common/console/console_parser.h"
#include "common/console/oom_kill.h"
#include "common/kernel/kernel_image.h"
#include "common/ktap/words.h"
#include "common/process.h"
#include "coordinator/vm/coordinator_client.h"
#include "coordinator/vm/qemu_backend.h"
#include "coordinator/vm/saved_vms.h"
#include "coordinator/vm/slot.h"

namespace leapfrog::vm {
namespace {

namespace stdfs = std::filesystem;
using Wall = std::chrono::system_clock;
using std::chrono::milliseconds;

// The first line deploy/vm/init prints.
constexpr const char* kInitLine = "leapfrog-init: start";
constexpr const char* kClockLine = "leapfrog-init: clocksource ";

// The guest's clock source, as /init printed it (deploy/vm/init), in the log:
// a warning with the kernel's reason when it refused the one asked for
// (qemu_process.h: clock_cmdline). The outcomes record it too.
void log_clock_source(const std::string& agent, const std::string& console) {
  const size_t at = console.rfind(kClockLine);
  if (at == std::string::npos) return;
  const size_t from = at + std::char_traits<char>::length(kClockLine);
  std::string line = console.substr(from, console.find('\n', from) - from);
  while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.pop_back();
  const size_t wanted = line.find(" wanted ");
  if (wanted == std::string::npos) {
    spdlog::info("vm.clocksource agent={} source={}", agent, line);
  } else {
    spdlog::warn("vm.clocksource_refused agent={} source={} reason=\"{}\"", agent,
                 line.substr(0, wanted), line.substr(wanted + 1));
  }
}
// Names tried for one slot before the launcher gives up (a name is taken
// when an agent or another launcher has it: a launcher of an earlier run
// with the same pid).
constexpr int kNameTries = 5;

size_t file_size_or_zero(const std::string& path) {
  std::error_code ec;
  const auto n = stdfs::file_size(path, ec);
  return ec ? 0 : static_cast<size_t>(n);
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

std::string random_suffix() {
  char buf[9];
  std::snprintf(buf, sizeof buf, "%08x", std::random_device{}());
  return buf;
}

// The supervisor: prepares the kernel's image, starts the slots (slot.h)
// over the QEMU backend, and watches each running VM through the
// coordinator (its agent's registration and heartbeats) and its console.
class Launcher {
 public:
  Launcher(const LauncherOptions& opts, const std::atomic<bool>& stop)
      : opts_(opts), stop_(stop), coord_(opts.coordinator, opts.token), saved_(opts.cache_dir) {}

  int run() {
    if (!prepare()) return 0;  // stopped while waiting for the kernel
    if (opts_.prepare_only) return make_saved_vm();
    coord_.register_launcher("vm-run-" + opts_.kernel_label + "-" + std::to_string(getpid()),
                             opts_.kernel_label);
    slots_.resize(static_cast<size_t>(opts_.count));
    for (int i = 0; i < opts_.count; ++i) {
      Slot& s = slots_[static_cast<size_t>(i)];
      s.index = i;
      s.name = claim_name("vm-" + opts_.kernel_label + "-" + std::to_string(getpid()) + "-" +
                          std::to_string(i));
      vms_->start(s);
    }
    auto next_poll = Steady::now();
    auto next_kernel_poll = Steady::now() + milliseconds(2000);
    while (!stop_.load()) {
      if (Steady::now() >= next_kernel_poll) {
        next_kernel_poll = Steady::now() + milliseconds(2000);
        refresh_kernel();
      }
      if (Steady::now() >= next_poll) {
        if (auto a = coord_.agents(slot_names())) agents_ = std::move(*a);
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
      for (const auto& s : slots_) snapshotting = snapshotting || VmSlots::snapshotting(s);
      std::this_thread::sleep_for(milliseconds(snapshotting ? 10 : 100));
    }
    for (auto& s : slots_) vms_->release(s);
    return ever_registered_ ? 0 : 2;
  }

  // Why prepare_only failed.
  std::string failure() const {
    if (!failure_.empty()) return failure_;
    return vms_ ? vms_->failure() : std::string();
  }
  bool saved() const { return vms_ && vms_->saved(); }

 private:
  // `name`, or, when an agent or another launcher has it, the same with a
  // random suffix. Throws std::runtime_error.
  std::string claim_name(const std::string& name) {
    std::string tried = name;
    for (int i = 0; i < kNameTries; ++i) {
      if (coord_.claim(tried)) return tried;
      tried = name + "-" + random_suffix();
    }
    throw std::runtime_error("cannot claim a VM agent name like \"" + name + "\": all taken");
  }

  // prepare_only: boots one template and saves it, unless the saved VM of
  // this key is there already.
  int make_saved_vm() {
    if (!saved_vms_on_) {
      failure_ =
          opts_.snapshot ? "this machine cannot save VMs (see the log)" : "snapshots are off";
      return 2;
    }
    slots_.resize(1);
    Slot& s = slots_[0];
    s.name = "vm-" + opts_.kernel_label + "-prepare-" + std::to_string(getpid());
    vms_->start(s);
    while (!stop_.load() && !s.stopped) {
      supervise(s);
      std::this_thread::sleep_for(milliseconds(10));
    }
    vms_->release(s);
    if (saved()) return 0;
    if (failure().empty()) failure_ = "stopped before the VM was saved";
    return 2;
  }

  // Waits for the label's kernel (a campaign's build job may not have built
  // it yet), then prepares its image and the VM pool. False when stopped
  // while waiting.
  bool prepare() {
    std::optional<v1::Kernel> k = coord_.find_kernel(opts_.kernel_label);
    if (!k) {
      spdlog::info(
          "vm.waiting_for_kernel kernel={} reason=\"not registered yet: waiting for it to be built"
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
    if (k->status() == v1::KERNEL_STATUS_BUILD_FAILURE) {
      throw std::runtime_error("kernel \"" + opts_.kernel_label + "\" cannot boot: it is a " +
                               ktap::kernel_status_word(k->status()) + " (" + k->version() + ")");
    }
    use_kernel(*k);
    const auto colon = opts_.coordinator.rfind(':');
    if (opts_.coordinator.rfind("127.0.0.1:", 0) != 0 || colon == std::string::npos)
      throw std::runtime_error("VMs reach only a coordinator on 127.0.0.1, not \"" +
                               opts_.coordinator + "\"");
    const int port = std::stoi(opts_.coordinator.substr(colon + 1));
    QemuPoolOptions po;
    po.cpus = opts_.cpus;
    po.mem_mib = opts_.mem_mib;
    po.kvm = probe_kvm(opts_.kvm, image_.kernel, image_.initrd,
                       opts_.run_dir + "/kvm-probe.console.log");
    po.coordinator_port = port;
    po.socket_dir = opts_.run_dir;
    pool_ = std::make_unique<QemuPool>(po);
    SlotOptions so;
    so.kernel_label = opts_.kernel_label;
    so.token = opts_.token;
    so.port = port;
    so.cpus = opts_.cpus;
    so.selftest = opts_.selftest;
    so.prepare_only = opts_.prepare_only;
    so.run_dir = opts_.run_dir;
    so.events = opts_.events;
    vms_ = std::make_unique<VmSlots>(so, *pool_, saved_);
    vms_->use_image(image_);
    if (opts_.snapshot) {
      std::string why;
      saved_vms_on_ = vms_->enable_saved_vms(why);
      if (!saved_vms_on_)
        spdlog::warn("vm.snapshots_off reason=\"{}\": every VM boots in full", why);
    }
    spdlog::info("vm.prepared kernel={} release={} boot={} image={} accel={}", opts_.kernel_label,
                 kernel_release_, image_.kernel, image_.initrd, po.kvm ? "kvm" : "tcg");
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
    if (!k || k->sha256() == image_.sha256 || k->sha256() == ignored_sha256_) return;
    if (k->status() == v1::KERNEL_STATUS_BUILD_FAILURE) {
      spdlog::warn("vm.kernel_replacement_ignored kernel={} status={} version=\"{}\"",
                   opts_.kernel_label, ktap::kernel_status_word(k->status()), k->version());
      ignored_sha256_ = k->sha256();
      return;
    }
    try {
      use_kernel(*k);
      vms_->use_image(image_);
      spdlog::info("vm.kernel_replaced kernel={} release={} sha256={}: idle VMs reboot into it",
                   opts_.kernel_label, kernel_release_, image_.sha256);
    } catch (const std::runtime_error& e) {
      spdlog::error("vm.kernel_replacement_failed kernel={} error=\"{}\"", opts_.kernel_label,
                    e.what());
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
        opts_.image_script, "image",        "--agent", opts_.agent_exe,
        "--release",        stored.release, "--cache", opts_.cache_dir + "/images"};
    if (!stored.modules.empty()) argv.insert(argv.end(), {"--modules", stored.modules});
    if (run_tool(argv, out, err) != 0)
      throw std::runtime_error("cannot build the VM image: " + trim(read_from(err, 0)));
    const std::string image = trim(read_from(out, 0));
    // One initrd per kernel: VMs still running the previous one keep theirs
    // (the first keeps the name bench/vm_bench.cc looks for).
    const std::string initrd =
        image_.initrd.empty() ? opts_.run_dir + "/initrd.cpio"
                              : opts_.run_dir + "/initrd-" + stored.sha256.substr(0, 16) + ".cpio";
    try {
      write_initrd_with_token(image, opts_.token, initrd);
    } catch (const ImageError& e) {
      throw std::runtime_error(std::string("cannot add the token to the VM image: ") + e.what());
    }
    image_.kernel = stored.vmlinux.empty() ? stored.image : stored.vmlinux;
    image_.sha256 = stored.sha256;
    image_.initrd = initrd;
    image_.image = image;
    image_.cmdline = k.cmdline();
    kernel_release_ = stored.release;
  }

  // The VM of `s` did not come up, with its console's end.
  static BootError boot_error(const Slot& s, const std::string& why) {
    return BootError(why, console_tail(read_from(s.console, 0)));
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

  // The last OOM kill of an agent process in the console since the agent's
  // last job ended, if any.
  static std::optional<console::OomKill> agent_oom_kill(const Slot& s) {
    std::optional<console::OomKill> last;
    for (auto& k : console::oom_kills_in(read_from(s.console, s.job_console_offset)))
      if (k.comm.rfind("leapfrog-agent", 0) == 0) last = std::move(k);
    return last;
  }

  // Ends the VM's job as `verdict` and replaces the VM.
  void fail(Slot& s, v1::Verdict verdict, const std::string& error, const char* kind) {
    coord_.fail_job(s.name, s.job, outcome(verdict, error, s));
    if (opts_.events) opts_.events->vm_failed(opts_.kernel_label, kind);
    vms_->start(s);
  }

  void supervise(Slot& s) {
    const auto now = Steady::now();
    if (s.phase == Slot::Phase::kWaiting) {
      vms_->advance(s, now, false);
      return;
    }
    const size_t size = file_size_or_zero(s.console);
    if (size != s.console_size) {
      s.console_size = size;
      s.last_output = now;
    }
    const bool exited = s.vm->exited();
    if (s.phase != Slot::Phase::kBoot && !vms_->advance(s, now, exited)) return;
    // A VM may register and die between two polls: ask again before calling
    // it a boot failure.
    if (exited && !s.registered)
      if (auto a = coord_.agents(slot_names())) agents_ = std::move(*a);
    auto it = agents_.find(s.name);
    const int64_t job_was = s.job;
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
    if (job_was != 0 && s.job != job_was) s.job_console_offset = size;
    if (!s.registered) {
      if (it != agents_.end() && s.last_seen_us >= wall_micros(s.started_wall)) {
        s.registered = true;
        // Reports count from /init on (the agent may have crashed the kernel
        // before this poll saw it register); earlier ones are the boot's. A
        // restored VM's console starts after its boot.
        const std::string console = read_from(s.console, 0);
        const size_t init = console.find(kInitLine);
        s.registered_offset = s.restored ? 0 : init == std::string::npos ? size : init;
        log_clock_source(s.name, console);
        s.job_console_offset = s.registered_offset;
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
          vms_->restore_failed(s, exited ? "QEMU exited with status " +
                                               std::to_string(s.vm->exit_status()) +
                                               " before the agent registered"
                                         : "the agent did not register in time");
          return;
        }
        if (exited) {
          boot_failure(
              s, boot_error(s, "QEMU exited with status " + std::to_string(s.vm->exit_status()) +
                                   " before the agent registered"));
        } else if (now - s.started > opts_.boot_timeout) {
          s.vm->kill();
          boot_failure(s, boot_error(s, "the agent did not register within " +
                                            std::to_string(opts_.boot_timeout.count() / 1000) +
                                            " s of boot"));
        }
        return;
      }
    }
    if (!exited) vms_->send_host_view(s, now);
    // The label's kernel was rebuilt: reboot into it between jobs.
    if (s.kernel_sha256 != image_.sha256 && s.job == 0 && !exited) {
      spdlog::info("vm.reboot_new_kernel agent={} old_sha256={} new_sha256={} release={}", s.name,
                   s.kernel_sha256.substr(0, 12), image_.sha256.substr(0, 12), kernel_release_);
      s.vm->kill();
      vms_->start(s);
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
      s.vm->kill();
      const auto& r = reports.front();
      spdlog::warn("vm.kernel_report agent={} kind={} title=\"{}\" reports={}", s.name, r.kind,
                   r.title, reports.size());
      fail(s, v1::VERDICT_KERNEL_CRASH, r.title, "kernel-crash");
      return;
    }
    // The guest's OOM killer took the agent itself (its runs' kills the agent
    // reports): an infrastructure failure that says so, not a hang or a crash.
    if (exited || std::min(now - s.last_output, now - s.last_seen_local) > opts_.hang_timeout) {
      if (const auto agent_oom = agent_oom_kill(s)) {
        s.vm->kill();
        spdlog::warn("vm.agent_out_of_memory agent={} job={} line=\"{}\"", s.name, s.job,
                     agent_oom->line);
        v1::Outcome o = outcome(v1::VERDICT_INFRA_FAILURE,
                                "out of memory: the guest's OOM killer killed the agent (" +
                                    agent_oom->line + ")",
                                s);
        o.mutable_killed()->set_reason(v1::RUN_KILL_OUT_OF_MEMORY);
        o.mutable_killed()->set_signal(9);
        o.mutable_killed()->set_line(agent_oom->line);
        coord_.fail_job(s.name, s.job, o);
        if (opts_.events) opts_.events->vm_failed(opts_.kernel_label, "out-of-memory");
        vms_->start(s);
        return;
      }
    }
    if (exited) {
      fail(s, v1::VERDICT_KERNEL_CRASH,
           "the VM exited (status " + std::to_string(s.vm->exit_status()) +
               ") with no kernel report in its console",
           "kernel-crash");
      return;
    }
    const auto quiet = std::min(now - s.last_output, now - s.last_seen_local);
    if (quiet > opts_.hang_timeout) {
      s.vm->kill();
      const auto secs = std::chrono::duration_cast<std::chrono::seconds>(quiet).count();
      spdlog::warn("vm.hang agent={} job={} quiet_s={}", s.name, s.job, secs);
      fail(s, v1::VERDICT_HANG,
           "no heartbeat and no console output for " + std::to_string(secs) + " s", "hang");
    }
  }

  // The slot reports BOOT_FAILURE once and stops: booting a kernel that does
  // not boot again would only loop. Slots waiting for this slot's template
  // stop with it: the kernel they wait to boot did not boot. Each ends one
  // queued job of the kernel, through the same call as a crash (no agent
  // ever registered: the coordinator picks the job).
  void boot_failure(Slot& s, const BootError& e) {
    const std::string why = e.what();
    v1::Outcome o = outcome(v1::VERDICT_BOOT_FAILURE, why, s);
    o.set_console_tail(e.console_tail());
    if (opts_.prepare_only) {
      failure_ = "the kernel did not boot: " + why + "; the console's end:\n" + e.console_tail();
      spdlog::warn("vm.prepare_failed kernel={} error=\"{}\"", opts_.kernel_label, why);
      vms_->boot_failed(s);
      return;
    }
    spdlog::error("vm.boot_failure agent={} kernel={} error=\"{}\"", s.name, opts_.kernel_label,
                  why);
    coord_.fail_job(s.name, 0, o);
    if (opts_.events) opts_.events->vm_failed(opts_.kernel_label, "boot-failure");
    if (!vms_->boot_failed(s)) return;
    for (auto& other : slots_) {
      if (other.phase != Slot::Phase::kWaiting || other.stopped) continue;
      v1::Outcome same = o;
      same.set_error("VM " + s.name + ", booting the same kernel, did not boot: " + why);
      coord_.fail_job(other.name, 0, same);
      other.stopped = true;
    }
  }

  // The agent names of this launcher's VMs: the only agents it asks about.
  std::vector<std::string> slot_names() const {
    std::vector<std::string> out;
    for (const auto& s : slots_) out.push_back(s.name);
    return out;
  }

  LauncherOptions opts_;
  const std::atomic<bool>& stop_;
  CoordinatorClient coord_;
  SavedVms saved_;
  std::unique_ptr<QemuPool> pool_;
  std::unique_ptr<VmSlots> vms_;
  BootImage image_;
  std::string kernel_release_;
  std::string ignored_sha256_;  // a replacement that cannot boot (build-failure)
  bool saved_vms_on_ = false;
  bool ever_registered_ = false;
  std::string failure_;  // prepare_only: why the saved VM is not there
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
