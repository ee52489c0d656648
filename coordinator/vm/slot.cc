#include "coordinator/vm/slot.h"

#include <sys/stat.h>

#include <spdlog/spdlog.h>

#include <cctype>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include "coordinator/vm/launcher.h"

namespace leapfrog::vm {
namespace {

namespace stdfs = std::filesystem;
using Wall = std::chrono::system_clock;
using std::chrono::milliseconds;

// What a snapshot template's /init prints (deploy/vm/init, lf.snapshot=1).
constexpr const char* kSnapshotReady = "leapfrog-init: snapshot-ready";
constexpr const char* kSnapshotUnavailable = "leapfrog-init: snapshot-unavailable";
constexpr const char* kIdentityTaken = "leapfrog-init: identity ";

// True when `word` can travel in the identity line as one word.
bool identity_word(const std::string& word) {
  if (word.empty()) return false;
  for (char c : word)
    if (!std::isalnum(static_cast<unsigned char>(c)) &&
        std::string("._:+/=~@-").find(c) == std::string::npos)
      return false;
  return true;
}

std::string trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
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

int64_t wall_seconds() {
  return std::chrono::duration_cast<std::chrono::seconds>(Wall::now().time_since_epoch()).count();
}

}  // namespace

std::string read_from(const std::string& path, size_t offset) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return {};
  in.seekg(static_cast<std::streamoff>(offset));
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

bool VmSlots::enable_saved_vms(std::string& why) {
  if (!identity_word(opts_.token))
    why = "the token has characters the identity line cannot carry";
  else if (!identity_word(opts_.kernel_label))
    why = "the kernel label has characters the identity line cannot carry";
  else
    traits_ = pool_.saved_vm_traits(why);
  snapshots_ = why.empty();
  update_snapshot_key();
  return snapshots_;
}

void VmSlots::use_image(const BootImage& image) {
  image_ = image;
  update_snapshot_key();
}

void VmSlots::update_snapshot_key() {
  snapshot_key_ = snapshots_ ? SavedVms::key_of(image_.sha256, image_.image,
                                                pool_.command_line(template_append()), traits_)
                             : "";
}

void VmSlots::snapshots_off(const std::string& why) {
  failure_ = why;
  snapshots_ = false;
}

std::string VmSlots::template_append() const {
  return "lf.snapshot=1" + (image_.cmdline.empty() ? std::string() : " " + image_.cmdline);
}

std::string VmSlots::boot_append(const Slot& s) const {
  std::string append = "lf.port=" + std::to_string(opts_.port) + " lf.name=" + s.name +
                       " lf.kernel=" + opts_.kernel_label;
  if (opts_.selftest) append += " lf.selftest=1";
  if (!image_.cmdline.empty()) append += " " + image_.cmdline;
  return append;
}

bool VmSlots::snapshotting(const Slot& s) {
  return s.phase == Slot::Phase::kTemplate || s.phase == Slot::Phase::kRestore ||
         s.phase == Slot::Phase::kHandoff;
}

void VmSlots::release(Slot& s) {
  if (s.vm) host_load_.forget(s.vm->pid());
  s.vm.reset();
}

void VmSlots::start(Slot& s) {
  release(s);
  if (opts_.prepare_only && (!snapshots_ || snapshot_key_.empty())) {
    if (failure_.empty()) failure_ = "the VM could not be saved (see the log)";
    s.stopped = true;
    return;
  }
  if (snapshots_ && !snapshot_key_.empty()) {
    s.snapshot_key = snapshot_key_;
    if (saved_.has(snapshot_key_)) {
      if (opts_.prepare_only) {
        spdlog::info("vm.saved_vm_ready kernel={} file={}", opts_.kernel_label,
                     saved_.state_file(snapshot_key_));
        saved_vm_ready_ = true;
        s.stopped = true;
        return;
      }
      launch(s, Slot::Phase::kRestore);
      return;
    }
    if (making_key_ == snapshot_key_) {
      s.phase = Slot::Phase::kWaiting;
      spdlog::info("vm.waiting_for_snapshot agent={}", s.name);
      return;
    }
    std::string why;
    if (saved_.make_dir(why)) {
      making_key_ = snapshot_key_;
      launch(s, Slot::Phase::kTemplate);
      return;
    }
    spdlog::warn("vm.snapshots_off agent={} reason=\"{}\": every VM boots in full", s.name, why);
    snapshots_off(why);
    if (opts_.prepare_only) {
      s.stopped = true;
      return;
    }
  }
  launch(s, Slot::Phase::kBoot);
}

void VmSlots::launch(Slot& s, Slot::Phase phase) {
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
  s.kernel_sha256 = image_.sha256;
  InstanceSpec spec;
  spec.index = s.index;
  spec.kernel = image_.kernel;
  spec.console = s.console;
  if (phase == Slot::Phase::kBoot) {
    spec.mode = StartMode::kBoot;
    spec.initrd = image_.initrd;
    spec.append = boot_append(s);
  } else {
    // The template and its copies boot the image without the token, with
    // the same command line: the saved state must match the machine it is
    // loaded into.
    spec.mode = phase == Slot::Phase::kTemplate ? StartMode::kTemplate : StartMode::kRestore;
    spec.initrd = image_.image;
    spec.append = template_append();
    spec.ram_file = phase == Slot::Phase::kTemplate ? saved_.template_ram(s.snapshot_key)
                                                    : saved_.ram_file(s.snapshot_key);
    if (phase == Slot::Phase::kRestore) spec.state_file = saved_.state_file(s.snapshot_key);
  }
  static const char* const kModes[] = {"boot", "template", "restore", "handoff", "waiting"};
  const char* mode = kModes[static_cast<int>(phase)];
  spdlog::info("vm.boot agent={} generation={} mode={} console={}", s.name, s.generation, mode,
               s.console);
  if (opts_.events) opts_.events->vm_started(opts_.kernel_label, mode);
  try {
    s.vm = pool_.create(spec);
  } catch (const VmError& e) {
    if (phase != Slot::Phase::kRestore) throw;
    restore_failed(s, e.what());
  }
}

bool VmSlots::advance(Slot& s, Steady::time_point now, bool exited) {
  switch (s.phase) {
    case Slot::Phase::kWaiting:
      // The template saved the VM (or failed to: start() then boots).
      if (making_key_ != snapshot_key_ || !snapshots_) start(s);
      return false;
    case Slot::Phase::kTemplate: {
      const std::string text = read_from(s.console, 0);
      if (exited && text.find(kSnapshotUnavailable) != std::string::npos) {
        spdlog::warn(
            "vm.snapshots_off agent={} reason=\"the guest has no second serial port\": every VM "
            "boots in full",
            s.name);
        snapshots_off("the guest has no second serial port");
        making_key_.clear();
        start(s);
        return false;
      }
      if (exited && text.empty()) {
        // The emulator itself gave up (e.g. the cache's filesystem cannot
        // hold a shared RAM file): not the kernel's fault. A full boot tells.
        const std::string said = trim(read_from(s.console + ".qemu", 0));
        spdlog::warn(
            "vm.snapshots_off agent={} reason=\"QEMU exited (status {}) before the template's "
            "console said anything: {}\": every VM boots in full",
            s.name, s.vm->exit_status(), said);
        snapshots_off("QEMU exited before the VM printed anything: " + said);
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
        restore_failed(
            s, "QEMU exited with status " + std::to_string(s.vm->exit_status()) +
                   " while loading the saved VM: " + trim(read_from(s.console + ".qemu", 0)));
        return false;
      }
      // Sent already while the state loads: the line that arrives once the
      // VM runs is the one it takes, with no round trip lost.
      if (now - s.last_send >= milliseconds(50)) send_identity(s);
      bool running = false;
      try {
        running = s.vm->loaded();
      } catch (const VmError& e) {
        restore_failed(s, e.what());
        return false;
      }
      if (running) {
        spdlog::info("vm.restored agent={} generation={} ms={}", s.name, s.generation,
                     std::chrono::duration_cast<milliseconds>(now - s.started).count());
        to_handoff(s);
      } else if (now - s.phase_started > milliseconds(30'000)) {
        restore_failed(s, "the saved VM did not load within 30 s");
      }
      return false;
    }
    case Slot::Phase::kHandoff: {
      if (exited) {
        if (!s.restored) return true;  // the template died: a boot failure
        restore_failed(s, "QEMU exited with status " + std::to_string(s.vm->exit_status()) +
                              " before the restored VM took its identity");
        return false;
      }
      if (read_from(s.console, 0).find(kIdentityTaken + s.name) != std::string::npos) {
        s.phase = Slot::Phase::kBoot;
        spdlog::info("vm.identity_taken agent={} generation={} restored={} ms={} sends={}", s.name,
                     s.generation, s.restored,
                     std::chrono::duration_cast<milliseconds>(now - s.started).count(), s.sends);
        return true;
      }
      if (now - s.phase_started > milliseconds(20'000)) {
        if (s.restored) {
          restore_failed(s, "the restored VM did not take its identity within 20 s");
        } else {
          spdlog::warn(
              "vm.snapshots_off agent={} reason=\"the template did not take its identity within "
              "20 s\": every VM boots in full",
              s.name);
          snapshots_ = false;
          start(s);
        }
        return false;
      }
      const auto every =
          now - s.phase_started < milliseconds(2000) ? milliseconds(50) : milliseconds(250);
      if (now - s.last_send >= every) send_identity(s);
      return false;
    }
    case Slot::Phase::kBoot:
      return true;
  }
  return true;
}

// The template reached the point every VM of its key starts from: save it,
// and start the slot again from the saved VM like every other. (It cannot
// run on: its RAM file is now the saved VM's.) If the save fails, the
// template runs on and takes its identity, and VMs boot in full.
void VmSlots::save_template(Slot& s) {
  const auto t0 = Steady::now();
  try {
    s.vm->save(saved_.temp_state(s.snapshot_key));
    saved_.commit(s.snapshot_key);
    const std::string file = saved_.state_file(s.snapshot_key);
    spdlog::info("vm.snapshot_saved agent={} file={} bytes={} ram_bytes={} ms={}", s.name, file,
                 file_size_or_zero(file), allocated_bytes(saved_.ram_file(s.snapshot_key)),
                 std::chrono::duration_cast<milliseconds>(Steady::now() - t0).count());
    making_key_.clear();
    saved_.prune();
    s.vm->kill();
    start(s);
    return;
  } catch (const std::exception& e) {  // VmError, std::filesystem::filesystem_error
    saved_.discard_save(s.snapshot_key);
    spdlog::warn("vm.snapshot_failed agent={} error=\"{}\": every VM boots in full from now on",
                 s.name, e.what());
    snapshots_off(std::string("saving the VM failed: ") + e.what());
  }
  making_key_.clear();
  if (opts_.prepare_only) {  // stops the slot
    start(s);
    return;
  }
  try {
    s.vm->resume();
  } catch (const VmError& e) {
    spdlog::warn("vm.template_lost agent={} error=\"{}\"", s.name, e.what());
    start(s);
    return;
  }
  to_handoff(s);
}

void VmSlots::to_handoff(Slot& s) {
  s.phase = Slot::Phase::kHandoff;
  s.phase_started = Steady::now();
  s.last_send = Steady::time_point();
}

// Sends the VM its identity on its ttyS1 (again: bytes that arrive while a
// restore still loads are lost, and /init takes only a whole line).
void VmSlots::send_identity(Slot& s) {
  s.last_send = Steady::now();
  std::random_device rd;
  char seed[65];
  for (int i = 0; i < 8; ++i) std::snprintf(seed + 8 * i, 9, "%08x", rd());
  const std::string line = "lf-identity name=" + s.name + " port=" + std::to_string(opts_.port) +
                           " kernel=" + opts_.kernel_label +
                           " selftest=" + (opts_.selftest ? "1" : "0") +
                           " time=" + std::to_string(wall_seconds()) + " seed=" + seed +
                           " token=" + opts_.token + " end\n";
  if (s.vm->send_control(line)) ++s.sends;
}

// The guest cannot see the host's load outside it, and lookup-scale records
// it with every point (scenarios/catalogue/scale_host.h). A line the UART
// cannot take now is dropped; the guest then treats the host's load as
// unknown, never as idle.
void VmSlots::send_host_view(Slot& s, Steady::time_point now) {
  if (!s.vm || now - s.last_host_view < milliseconds(1000)) return;
  s.last_host_view = now;
  const std::string line = host_load_.line_for(s.vm->pid(), static_cast<uint32_t>(opts_.cpus));
  if (!line.empty()) s.vm->send_control(line);
}

void VmSlots::restore_failed(Slot& s, const std::string& why) {
  spdlog::warn(
      "vm.snapshot_restore_failed agent={} generation={} error=\"{}\": the saved VM is removed "
      "and every VM boots in full from now on",
      s.name, s.generation, why);
  if (s.vm) s.vm->kill();
  saved_.remove(s.snapshot_key);
  snapshots_ = false;
  start(s);
}

bool VmSlots::boot_failed(Slot& s) {
  const bool template_died =
      opts_.prepare_only || s.phase == Slot::Phase::kTemplate || s.phase == Slot::Phase::kHandoff;
  if (template_died) making_key_.clear();
  release(s);
  s.stopped = true;
  return template_died;
}

}  // namespace leapfrog::vm
