#include "coordinator/vm/saved_vms.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <sstream>
#include <utility>
#include <vector>

#include "common/kernel/kernel_image.h"

namespace leapfrog::vm {
namespace {

namespace stdfs = std::filesystem;

// Saved VMs kept in the cache; the oldest go first.
constexpr size_t kSavedVmsKept = 8;

}  // namespace

std::string SavedVms::key_of(const std::string& kernel_sha256, const std::string& image,
                             const std::string& command_line, const std::string& traits) {
  struct stat st {};
  if (stat(image.c_str(), &st) != 0) return "";
  // Nothing of the run: port, token and names come after.
  std::ostringstream m;
  m << "leapfrog-vm-snapshot 2\nkernel " << kernel_sha256 << "\nimage " << image << " "
    << st.st_size << " " << st.st_ino << " " << st.st_mtim.tv_sec << "." << st.st_mtim.tv_nsec
    << "\nappend " << command_line << "\n"
    << traits;
  return sha256_text(m.str());
}

std::string SavedVms::template_ram(const std::string& key) const {
  return ram_file(key) + ".tmp" + std::to_string(getpid());
}

std::string SavedVms::temp_state(const std::string& key) const {
  return state_file(key) + ".tmp" + std::to_string(getpid());
}

bool SavedVms::has(const std::string& key) const {
  return access(state_file(key).c_str(), R_OK) == 0 && access(ram_file(key).c_str(), R_OK) == 0;
}

bool SavedVms::make_dir(std::string& why) const {
  std::error_code ec;
  stdfs::create_directories(dir_, ec);
  if (ec) why = "cannot create " + dir_ + ": " + ec.message();
  return !ec;
}

void SavedVms::commit(const std::string& key) const {
  stdfs::rename(template_ram(key), ram_file(key));
  stdfs::rename(temp_state(key), state_file(key));
}

void SavedVms::discard_save(const std::string& key) const {
  std::error_code ec;
  stdfs::remove(temp_state(key), ec);
  stdfs::remove(template_ram(key), ec);  // the template's mapping lives on
}

void SavedVms::remove(const std::string& key) const {
  std::error_code ec;
  stdfs::remove(state_file(key), ec);
  stdfs::remove(ram_file(key), ec);
}

void SavedVms::prune() const {
  std::vector<std::pair<stdfs::file_time_type, std::string>> saved;  // keys
  std::error_code ec;
  const auto now = stdfs::file_time_type::clock::now();
  for (const auto& e : stdfs::directory_iterator(dir_, ec)) {
    const auto t = e.last_write_time(ec);
    if (ec) continue;
    const stdfs::path name = e.path().filename();
    const bool old = now - t > std::chrono::hours(1);
    if (name.extension() == ".state")
      saved.emplace_back(t, name.stem().string());
    else if (name.string().find(".tmp") != std::string::npos && old)
      stdfs::remove(e.path(), ec);
    else if (name.extension() == ".ram" && old &&
             !stdfs::exists(dir_ + "/" + name.stem().string() + ".state", ec))
      stdfs::remove(e.path(), ec);
  }
  std::sort(saved.begin(), saved.end(),
            [](const auto& a, const auto& b) { return a.first > b.first; });
  for (size_t i = kSavedVmsKept; i < saved.size(); ++i) remove(saved[i].second);
}

}  // namespace leapfrog::vm
