#include "scenarios/fs/loop_device.h"

#include <fcntl.h>
#include <linux/loop.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "scenarios/fs/sys_util.h"
#include "scenarios/fs/workspace.h"

namespace leapfrog::fs {

namespace {

// Other processes (parallel runs, udisks, losetup) take free devices too: the
// device LOOP_CTL_GET_FREE named may be bound before our LOOP_CONFIGURE lands.
constexpr int kAttachAttempts = 64;

class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }
  int release() {
    int fd = fd_;
    fd_ = -1;
    return fd;
  }

 private:
  int fd_;
};

}  // namespace

std::string attach_loop_device(const std::string& image, int* fd_out) {
  Fd backing(open(image.c_str(), O_RDWR | O_CLOEXEC));
  if (backing.get() < 0) throw SetupError(errno_message("open image '" + image + "'", errno));
  Fd control(open("/dev/loop-control", O_RDWR | O_CLOEXEC));
  if (control.get() < 0) {
    throw SetupError(
        errno_message("loop devices are not available: open /dev/loop-control", errno));
  }

  int last_err = 0;
  for (int attempt = 0; attempt < kAttachAttempts; ++attempt) {
    int n = ioctl(control.get(), LOOP_CTL_GET_FREE);
    if (n < 0)
      throw SetupError(errno_message("find a free loop device (LOOP_CTL_GET_FREE)", errno));
    std::string dev = "/dev/loop" + std::to_string(n);
    Fd loop(open(dev.c_str(), O_RDWR | O_CLOEXEC));
    if (loop.get() < 0) {
      // The node may not have been created by devtmpfs yet.
      last_err = errno;
      if (errno == ENOENT) continue;
      throw SetupError(errno_message("open " + dev, errno));
    }
    struct loop_config config;
    std::memset(&config, 0, sizeof config);
    config.fd = static_cast<__u32>(backing.get());
    config.info.lo_flags = LO_FLAGS_AUTOCLEAR;
    std::strncpy(reinterpret_cast<char*>(config.info.lo_file_name), image.c_str(),
                 LO_NAME_SIZE - 1);
    if (ioctl(loop.get(), LOOP_CONFIGURE, &config) == 0) {
      // Hold the device through a read-only open, and let the writable one
      // go: a kernel that blocks writes to mounted devices (6.8 and later
      // without CONFIG_BLK_DEV_WRITE_MOUNTED, as allnoconfig builds are, or
      // booted with bdev_allow_write_mounted=0) refuses to mount a device
      // someone holds open for writing, with EBUSY. Both fds are openers
      // while the second opens, so autoclear does not detach in between.
      Fd hold(open(dev.c_str(), O_RDONLY | O_CLOEXEC));
      if (hold.get() < 0) throw SetupError(errno_message("open " + dev + " read-only", errno));
      *fd_out = hold.release();
      return dev;
    }
    last_err = errno;
    if (errno != EBUSY) throw SetupError(errno_message("attach '" + image + "' to " + dev, errno));
  }
  throw SetupError(errno_message("attach '" + image + "' to a loop device after " +
                                     std::to_string(kAttachAttempts) + " attempts",
                                 last_err));
}

}  // namespace leapfrog::fs
