#pragma once
// The saved-VM cache: VMs booted once and saved (backend.h, StartMode), under
// <cache>/snapshots/, keyed by everything the saved state depends on. A saved
// VM is two files: its devices (KEY.state) and its RAM (KEY.ram). The state
// holds no token and no name: each copy gets its identity once it runs.

#include <string>

namespace leapfrog::vm {

class SavedVms {
 public:
  explicit SavedVms(std::string cache_dir) : dir_(std::move(cache_dir) + "/snapshots") {}

  // The key of a saved VM of this kernel (its sha256), booted from `image`
  // with `command_line` by a pool of `traits` (Pool::saved_vm_traits); ""
  // when the image cannot be read.
  static std::string key_of(const std::string& kernel_sha256, const std::string& image,
                            const std::string& command_line, const std::string& traits);

  // The saved VM's devices.
  std::string state_file(const std::string& key) const { return dir_ + "/" + key + ".state"; }
  // The saved VM's RAM.
  std::string ram_file(const std::string& key) const { return dir_ + "/" + key + ".ram"; }
  // Where this process's template of `key` keeps its RAM until it is saved.
  std::string template_ram(const std::string& key) const;
  // Where this process saves the template's devices before commit().
  std::string temp_state(const std::string& key) const;
  // True when the saved VM `key` is there, both files readable.
  bool has(const std::string& key) const;
  // Creates the cache's folder; false with `why` set when it cannot.
  bool make_dir(std::string& why) const;
  // Puts this process's save of `key` in place: the RAM first, so that a
  // state is only ever beside its own RAM. Throws std::filesystem::filesystem_error.
  void commit(const std::string& key) const;
  // Removes what a failed save of `key` left.
  void discard_save(const std::string& key) const;
  // Removes the saved VM `key`.
  void remove(const std::string& key) const;
  // Keeps the newest saved VMs (~90 MB each), and no leftovers of a save
  // that was killed (temp files, a RAM file without its state).
  void prune() const;

 private:
  std::string dir_;
};

}  // namespace leapfrog::vm
