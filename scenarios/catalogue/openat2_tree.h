#pragma once
// The tree that beneath-lookup and cached-lookup race openat2(2) walks in:
// a lookup root r/ beside an outside folder o/, a directory r/a/m that the
// mutator moves out of the root (to o/m) and back, a symlink r/l swapped
// between a relative target, one climbing out with "..", and an absolute
// one, a tmpfs mounted on r/mnt for the whole run, and the /proc magic link
// of the observers' dirfd of r.

#include <string>
#include <vector>

#include "scenarios/catalogue/common.h"

namespace leapfrog::catalogue {

// The "resolve" parameter: which openat2 flag sets the observers use, one bit
// each (a set is one RESOLVE_ flag, or none).
inline constexpr int64_t kSetBeneath = 1, kSetInRoot = 2, kSetNoXdev = 4, kSetNoSymlinks = 8,
                         kSetNoMagiclinks = 16, kSetNone = 32, kSetAll = 63;
ParamSpec resolve_sets_param(int64_t def);

class Openat2Tree {
 public:
  // Builds the tree on disk and in plan.model, and adds the renames and
  // symlink swaps to plan.mutations. Throws fs::SetupError.
  Openat2Tree(const DiskTree& disk, RacePlan& plan);
  ~Openat2Tree();
  Openat2Tree(const Openat2Tree&) = delete;
  Openat2Tree& operator=(const Openat2Tree&) = delete;

  // A chmod of r/a between 0755 and 0700 (two templates).
  void add_chmod(RacePlan& plan) const;
  // Every walk of the tree under each flag set of `sets` (kSet* bits), with
  // `extra` resolve bits added (kResolveCached), named `op`.
  void add_queries(RacePlan& plan, int64_t sets, uint8_t extra, const std::string& op) const;

 private:
  const DiskTree& disk_;
  int rootfd_ = -1;  // O_PATH dirfd of r, inherited by the observers
  std::string mnt_;  // the tmpfs mount point (lookup view)
  NodeId r_ = 0, a_ = 0, procfd_ = 0;
};

}  // namespace leapfrog::catalogue
