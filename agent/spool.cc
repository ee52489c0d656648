#include "agent/spool.h"

#include <fcntl.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <spdlog/spdlog.h>
#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "common/outcome/legacy.h"

namespace leapfrog {
namespace {

namespace stdfs = std::filesystem;

// An outcome may be a few MiB (violations): room for several.
constexpr uint64_t kMinFreeBytes = 32ull << 20;

// Writes `bytes` to `name` through a fsynced temporary file; on failure
// removes the temporary file and throws.
void write_durably(const std::string& name, const std::string& bytes) {
  const std::string tmp = name + ".tmp";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0)
    throw std::runtime_error("cannot write spool file \"" + tmp + "\": " + std::strerror(errno));
  bool ok = ::write(fd, bytes.data(), bytes.size()) == static_cast<ssize_t>(bytes.size()) &&
            ::fsync(fd) == 0;
  int err = errno;
  ok = ::close(fd) == 0 && ok;
  if (ok && ::rename(tmp.c_str(), name.c_str()) != 0) {
    ok = false;
    err = errno;
  }
  if (ok) return;
  ::unlink(tmp.c_str());
  throw std::runtime_error("cannot write spool file \"" + name +
                           "\": " + std::strerror(err ? err : EIO));
}

}  // namespace

Spool::Spool(std::string dir) : dir_(std::move(dir)) {
  stdfs::create_directories(dir_);
}

void Spool::put(const v1::ReportOutcomeRequest& req) {
  const std::string name = file_for(req.job_id(), req.attempt());
  write_durably(name, req.SerializeAsString());
}

void Spool::check() const {
  const std::string probe = dir_ + "/.probe";
  write_durably(probe, std::string(4096, 'x'));
  ::unlink(probe.c_str());
  struct statvfs st {};
  if (::statvfs(dir_.c_str(), &st) != 0)
    throw std::runtime_error("spool \"" + dir_ + "\": statvfs: " + std::strerror(errno));
  const uint64_t free_bytes = static_cast<uint64_t>(st.f_bavail) * st.f_frsize;
  if (free_bytes < kMinFreeBytes)
    throw std::runtime_error("spool \"" + dir_ + "\" has " + std::to_string(free_bytes >> 10) +
                             " KiB free, want at least " + std::to_string(kMinFreeBytes >> 20) +
                             " MiB");
}

void Spool::remove_partial() const {
  for (const auto& e : stdfs::directory_iterator(dir_)) {
    const std::string name = e.path().filename();
    const bool tmp = e.path().extension() == ".tmp";
    const bool run = e.is_directory() && name.rfind("job-", 0) == 0;
    if (!tmp && !run) continue;
    std::error_code ec;
    stdfs::remove_all(e.path(), ec);
    spdlog::info("agent.spool_cleaned path={} error=\"{}\"", e.path().string(), ec.message());
  }
}

std::vector<std::string> Spool::pending() const {
  std::vector<std::string> out;
  for (const auto& e : stdfs::directory_iterator(dir_))
    if (e.path().extension() == ".outcome") out.push_back(e.path());
  std::sort(out.begin(), out.end());
  return out;
}

bool Spool::load(const std::string& file, v1::ReportOutcomeRequest& req) {
  std::ifstream in(file, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  if (!req.ParseFromString(ss.str())) return false;
  // An outcome spooled by an agent older than this one: its old fields typed.
  upgrade_legacy(*req.mutable_outcome());
  for (auto& v : *req.mutable_outcome()->mutable_violations()) upgrade_legacy(v);
  return true;
}

std::string Spool::file_for(int64_t job, uint32_t attempt) const {
  char buf[64];
  std::snprintf(buf, sizeof buf, "/%012lld-%04u.outcome", static_cast<long long>(job), attempt);
  return dir_ + buf;
}

}  // namespace leapfrog
