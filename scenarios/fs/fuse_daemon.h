#pragma once
// The file system inside the FUSE daemon process: an inode-based passthrough
// on the libfuse low-level API. Each FUSE inode holds an O_PATH fd of its
// backing object, and every request works relative to the fd of the inode the
// kernel named, never by path. So each answer is about that object at one
// instant, whatever renames happen in the backing tree meanwhile.

#include <functional>

#include "scenarios/fs/fuse_passthrough.h"

namespace leapfrog::fs {

// Mounts `options.backing` at `options.view`, calls `mounted` once the mount
// is in place, and serves requests until the mount goes away. Returns the exit
// code for the daemon (0: the mount was detached); errors go to stderr. Call it
// only in the dedicated daemon process: it sets the umask and fd limit, and
// leaves the session to process exit.
int serve_passthrough(const FuseOptions& options, const std::function<void()>& mounted);

}  // namespace leapfrog::fs
