#pragma once
// Two views of one tree (--view): mutators change it through one path and
// observers look it up through another, so that a lookup can be checked for
// coherence across mounts of the same objects.
//
//   bind     two bind mounts of one folder of the file system under test;
//   overlay  an overlay mount over lower/upper folders of it: the scenario
//            builds its tree in the lower layer, mutators work through the
//            merged view (so each first change copies the object up), and
//            observers look up through a bind mount of the merged view;
//   idmap    observers look up through an idmapped bind mount
//            (mount_setattr MOUNT_ATTR_IDMAP). The id map is the identity,
//            split in two extents (the kernel refuses the initial map): it
//            exercises every idmapped-mount translation on the lookup path
//            without changing what a model of the tree allows;
//   overlay-lower  a positive control, never offered by an agent: mutators
//            change the lower layer underneath the mounted overlay, which
//            overlayfs documents as undefined. Its dentry cache keeps
//            names a rename in the lower layer moved away, and the oracle
//            reports them (tests/agent_e2e_test.cc).

#include <memory>
#include <string>

#include "scenarios/fs/workspace.h"

namespace leapfrog::fs {

// Parses "bind", "overlay", "idmap", "overlay-lower" (and "none"). Throws SetupError naming
// the accepted values.
FsView parse_fs_view(const std::string& name);
const char* to_string(FsView view);

// Why `view` cannot be set up over `kind` here, or "" when it can.
std::string view_unavailable_reason(FsKind kind, FsView view);

// Wraps `base` (mounted under `workdir`) in `view`. Throws SetupError.
std::unique_ptr<Workspace> make_view(std::unique_ptr<Workspace> base, FsView view,
                                     const std::string& workdir);

}  // namespace leapfrog::fs
