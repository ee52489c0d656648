#pragma once
// Builds the model half of a history: the tree's nodes, their initial values,
// and the effects of mutation templates. Scenarios describe their tree with it;
// tests and benchmarks build synthetic histories with it.

#include <string>
#include <vector>

#include "scenarios/history.h"

namespace leapfrog {

class TreeModel {
 public:
  // The root directory of the test tree (node 0).
  explicit TreeModel(const Attr& root_attr = Attr{});

  NodeId root() const { return 0; }
  NodeId add_dir(NodeId parent, const std::string& name, const Attr& attr);
  NodeId add_file(NodeId parent, const std::string& name, const Attr& attr);
  NodeId add_symlink(NodeId parent, const std::string& name, const std::string& target);
  // A node outside the tree, not linked anywhere yet (a rename source, a
  // symlink that replaces another, the root of a file system mounted later).
  NodeId add_detached(NodeKind kind, const std::string& label, const Attr& attr, const std::string& target = "");
  // Declares that `mountpoint` may get things mounted on it (nothing initially).
  void declare_mount_point(NodeId mountpoint);
  // Declares that `fs_root` is mounted on `mountpoint` from the start.
  void declare_mounted(NodeId mountpoint, NodeId fs_root);
  // Records an entry that is initially absent (so lookups of it are modelled).
  void declare_absent(NodeId dir, const std::string& name);
  // Declares where ".." of `n` initially leads, for a node that no add_dir
  // linked: the root of a mounted file system, whose ".." is the parent of
  // its mount point (a mount move changes it with the mount objects).
  void declare_parent(NodeId n, NodeId parent);

  void set_identity(NodeId n, const NodeIdentity& id) { nodes_.at(n).identity = id; }
  // Makes symlink `link` a /proc magic link that jumps to `target`.
  void set_magic(NodeId link, NodeId target) { nodes_.at(link).magic_target = target; }
  const std::vector<Node>& nodes() const { return nodes_; }
  const Attr& attr(NodeId n) const;

  // Effects of mutation templates.
  Effect chmod(NodeId n, const Attr& attr) const;
  // The same object change, named for the syscall that makes it.
  Effect chown_effect(NodeId n, const Attr& attr) const;
  Effect setfacl_effect(NodeId n, const Attr& attr) const;
  // rename(from_dir/from_name -> to_dir/to_name) of `moved`, which must be what
  // from_name names; whatever to_name named before is replaced.
  Effect rename(NodeId moved, NodeId from_dir, const std::string& from_name, NodeId to_dir, const std::string& to_name) const;
  // RENAME_EXCHANGE of dir_a/name_a (node a) and dir_b/name_b (node b).
  Effect exchange(NodeId a, NodeId dir_a, const std::string& name_a, NodeId b, NodeId dir_b,
                  const std::string& name_b) const;
  Effect mount(NodeId mountpoint, NodeId fs_root) const;
  Effect umount(NodeId mountpoint) const;

  // Fills nodes and initial values into `h`.
  void fill_header(HistoryHeader& h) const;

 private:
  NodeId add_node(NodeKind kind, const std::string& label, const Attr& attr, const std::string& target);
  void link(NodeId parent, const std::string& name, NodeId child);

  std::vector<Node> nodes_;
  std::vector<Attr> attrs_;
  std::vector<ObjectSet> initial_;
};

}  // namespace leapfrog
