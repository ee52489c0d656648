#include "agent/shared_progress.h"

#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <new>
#include <stdexcept>
#include <string>

namespace leapfrog {

// Atomics in memory two processes map work only when they need no lock.
static_assert(std::atomic<uint64_t>::is_always_lock_free);

SharedProgress::SharedProgress() {
  fd_ = memfd_create("leapfrog-progress", MFD_CLOEXEC);
  if (fd_ < 0) return;
  void* p = MAP_FAILED;
  if (ftruncate(fd_, sizeof(RunProgress)) == 0)
    p = mmap(nullptr, sizeof(RunProgress), PROT_READ | PROT_WRITE, MAP_SHARED, fd_, 0);
  if (p == MAP_FAILED) {
    close(fd_);
    fd_ = -1;
    return;
  }
  progress_ = new (p) RunProgress();
}

SharedProgress::~SharedProgress() {
  if (progress_) munmap(progress_, sizeof(RunProgress));
  if (fd_ >= 0) close(fd_);
}

RunProgress* map_shared_progress(int fd) {
  struct stat st {};
  if (fstat(fd, &st) != 0)
    throw std::runtime_error("--progress-fd " + std::to_string(fd) + ": " + std::strerror(errno));
  if (st.st_size < static_cast<off_t>(sizeof(RunProgress)))
    throw std::runtime_error("--progress-fd " + std::to_string(fd) + ": " +
                             std::to_string(st.st_size) + " bytes, want " +
                             std::to_string(sizeof(RunProgress)));
  void* p = mmap(nullptr, sizeof(RunProgress), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  const int err = errno;
  close(fd);
  if (p == MAP_FAILED)
    throw std::runtime_error("--progress-fd " + std::to_string(fd) + ": mmap: " + std::strerror(err));
  // Made (and zeroed) by SharedProgress: the same object, seen from here.
  return static_cast<RunProgress*>(p);
}

}  // namespace leapfrog
