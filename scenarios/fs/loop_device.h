#pragma once
// Attaching an image file to a free loop device.

#include <string>

namespace leapfrog::fs {

// Attaches `image` to a free /dev/loopN with LO_FLAGS_AUTOCLEAR and returns a
// read-only fd on the device (written to *fd) and its path. (Read-only: a
// writer holding the device makes its mount fail with EBUSY on kernels that
// block writes to mounted devices.) The device detaches itself
// when the last user goes away: close the fd once the file system is mounted
// (the mount then holds it), and it frees itself at unmount, even if we are
// killed. Throws SetupError.
std::string attach_loop_device(const std::string& image, int* fd);

}  // namespace leapfrog::fs
