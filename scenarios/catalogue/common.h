#pragma once
// Helpers the catalogue's scenarios share: building the tree on disk next to
// its model, and the lookup templates observers run.

#include <functional>
#include <string>
#include <vector>

#include "scenarios/lookup_race.h"

namespace leapfrog::catalogue {

// The tree on disk, in both views: mutators use m(), observers (relative to
// their cwd, the lookup root) the plain relative path.
class DiskTree {
 public:
  explicit DiskTree(const fs::Workspace& ws)
      : mroot_(ws.mutate_root()), lroot_(ws.lookup_root()), sroot_(ws.setup_root()) {}
  std::string m(const std::string& rel) const { return rel.empty() ? mroot_ : mroot_ + "/" + rel; }
  std::string l(const std::string& rel) const { return rel.empty() ? lroot_ : lroot_ + "/" + rel; }
  const std::string& lookup_root() const { return lroot_; }

  // The initial tree, built under the workspace's setup root (the overlay
  // view's lower layer; else the mutate view). Each throws fs::SetupError.
  void mkdir(const std::string& rel, mode_t mode) const;
  // A regular file holding `tag`.
  void file(const std::string& rel, mode_t mode, const std::string& tag) const;
  void symlink(const std::string& target, const std::string& rel) const;

 private:
  std::string s(const std::string& rel) const { return rel.empty() ? sroot_ : sroot_ + "/" + rel; }
  std::string mroot_, lroot_, sroot_;
};

// The same on an absolute path (inside a file system a scenario mounted
// itself); each throws fs::SetupError.
void mkdir_at(const std::string& path, mode_t mode);
void file_at(const std::string& path, mode_t mode, const std::string& tag);

// Observer lookups, relative to the observer's cwd (or to `dirfd`).
QueryTemplate stat_query(NodeId start, const std::string& path, int dirfd = -1);
QueryTemplate access_query(NodeId start, const std::string& path, int dirfd = -1);  // R_OK
QueryTemplate open_query(NodeId start, const std::string& path, int dirfd = -1);    // O_RDONLY
// stat, access and open of the same path, those of plan.query_ops.
void add_query_mix(RacePlan& plan, NodeId start, const std::string& path, int dirfd = -1);
// The query mix as a parameter (minimization narrows it to the op that fails).
inline constexpr uint32_t kOpStat = 1, kOpAccess = 2, kOpOpen = 4;
ParamSpec ops_param();

// The parameter every lookup race takes: how often the mutator acts.
ParamSpec mutate_pct_param();
// An empty plan over a 0755 root, with the mutate probability from the params.
RacePlan new_plan(const RunContext& ctx);

// A chain of directories d0/d1/.../d<depth-1> holding a file f, on disk and in
// the model. `mode_of(i)` is directory i's mode.
struct Chain {
  std::vector<NodeId> dirs;            // model nodes of d0..
  std::vector<std::string> dir_paths;  // their paths under the mutate view
  std::string file;                    // "d0/.../f", relative
};
Chain build_chain(const DiskTree& disk, TreeModel& model, int depth,
                  const std::function<mode_t(int)>& mode_of);

// A mutation that chmods `path` (mutate view) to `mode`, modelled on node `n`.
MutationTemplate chmod_template(const TreeModel& model, NodeId n, const std::string& path,
                                mode_t mode);

// One observer per ctx.observers, all with the user's observer credentials.
void assign_observers(RacePlan& plan, const RunContext& ctx);

Attr mode_attr(mode_t mode, uint32_t uid = 0, uint32_t gid = 0);

// Opens `path` as O_PATH|O_DIRECTORY for held-dirfd lookups; throws SetupError.
int open_dirfd(const std::string& path);

}  // namespace leapfrog::catalogue
