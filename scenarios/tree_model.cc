#include "scenarios/tree_model.h"

#include <stdexcept>

namespace leapfrog {

TreeModel::TreeModel(const Attr& root_attr) { add_node(NodeKind::Dir, ".", root_attr, ""); }

NodeId TreeModel::add_node(NodeKind kind, const std::string& label, const Attr& attr, const std::string& target) {
  Node n;
  n.id = static_cast<NodeId>(nodes_.size());
  n.kind = kind;
  n.name = label;
  n.symlink_target = target;
  nodes_.push_back(n);
  attrs_.push_back(attr);
  initial_.push_back(ObjectSet{ObjectKey{ObjectKind::Attr, n.id, ""}, Value{attr, kNoNode}});
  return n.id;
}

void TreeModel::link(NodeId parent, const std::string& name, NodeId child) {
  if (nodes_.at(parent).kind != NodeKind::Dir) throw std::logic_error("link into a non-directory");
  initial_.push_back(ObjectSet{ObjectKey{ObjectKind::Entry, parent, name}, Value{{}, child}});
  if (nodes_[child].kind == NodeKind::Dir)
    initial_.push_back(ObjectSet{ObjectKey{ObjectKind::Parent, child, ""}, Value{{}, parent}});
}

static std::string child_label(const Node& parent, const std::string& name) {
  return parent.id == 0 ? name : parent.name + "/" + name;
}

NodeId TreeModel::add_dir(NodeId parent, const std::string& name, const Attr& attr) {
  NodeId id = add_node(NodeKind::Dir, child_label(nodes_.at(parent), name), attr, "");
  link(parent, name, id);
  return id;
}

NodeId TreeModel::add_file(NodeId parent, const std::string& name, const Attr& attr) {
  NodeId id = add_node(NodeKind::File, child_label(nodes_.at(parent), name), attr, "");
  link(parent, name, id);
  return id;
}

NodeId TreeModel::add_symlink(NodeId parent, const std::string& name, const std::string& target) {
  NodeId id = add_node(NodeKind::Symlink, child_label(nodes_.at(parent), name), Attr{0777, 0, 0, {}}, target);
  link(parent, name, id);
  return id;
}

NodeId TreeModel::add_detached(NodeKind kind, const std::string& label, const Attr& attr, const std::string& target) {
  return add_node(kind, label, attr, target);
}

void TreeModel::declare_mount_point(NodeId mountpoint) {
  initial_.push_back(ObjectSet{ObjectKey{ObjectKind::Mount, mountpoint, ""}, Value{{}, kNoNode}});
}

void TreeModel::declare_mounted(NodeId mountpoint, NodeId fs_root) {
  initial_.push_back(ObjectSet{ObjectKey{ObjectKind::Mount, mountpoint, ""}, Value{{}, fs_root}});
}

void TreeModel::declare_absent(NodeId dir, const std::string& name) {
  initial_.push_back(ObjectSet{ObjectKey{ObjectKind::Entry, dir, name}, Value{{}, kNoNode}});
}

void TreeModel::declare_parent(NodeId n, NodeId parent) {
  initial_.push_back(ObjectSet{ObjectKey{ObjectKind::Parent, n, ""}, Value{{}, parent}});
}

const Attr& TreeModel::attr(NodeId n) const { return attrs_.at(n); }

Effect TreeModel::chmod(NodeId n, const Attr& attr) const {
  return Effect{"chmod", {ObjectSet{ObjectKey{ObjectKind::Attr, n, ""}, Value{attr, kNoNode}}}};
}

Effect TreeModel::chown_effect(NodeId n, const Attr& attr) const {
  Effect e = chmod(n, attr);
  e.op = "chown";
  return e;
}

Effect TreeModel::setfacl_effect(NodeId n, const Attr& attr) const {
  Effect e = chmod(n, attr);
  e.op = "setfacl";
  return e;
}

Effect TreeModel::rename(NodeId moved, NodeId from_dir, const std::string& from_name, NodeId to_dir,
                         const std::string& to_name) const {
  Effect e{"rename", {}};
  e.sets.push_back(ObjectSet{ObjectKey{ObjectKind::Entry, from_dir, from_name}, Value{{}, kNoNode}});
  e.sets.push_back(ObjectSet{ObjectKey{ObjectKind::Entry, to_dir, to_name}, Value{{}, moved}});
  if (nodes_.at(moved).kind == NodeKind::Dir && from_dir != to_dir)
    e.sets.push_back(ObjectSet{ObjectKey{ObjectKind::Parent, moved, ""}, Value{{}, to_dir}});
  return e;
}

Effect TreeModel::exchange(NodeId a, NodeId dir_a, const std::string& name_a, NodeId b, NodeId dir_b,
                           const std::string& name_b) const {
  Effect e{"rename-exchange", {}};
  e.sets.push_back(ObjectSet{ObjectKey{ObjectKind::Entry, dir_a, name_a}, Value{{}, b}});
  e.sets.push_back(ObjectSet{ObjectKey{ObjectKind::Entry, dir_b, name_b}, Value{{}, a}});
  if (dir_a != dir_b) {
    if (nodes_.at(a).kind == NodeKind::Dir)
      e.sets.push_back(ObjectSet{ObjectKey{ObjectKind::Parent, a, ""}, Value{{}, dir_b}});
    if (nodes_.at(b).kind == NodeKind::Dir)
      e.sets.push_back(ObjectSet{ObjectKey{ObjectKind::Parent, b, ""}, Value{{}, dir_a}});
  }
  return e;
}

Effect TreeModel::mount(NodeId mountpoint, NodeId fs_root) const {
  return Effect{"mount", {ObjectSet{ObjectKey{ObjectKind::Mount, mountpoint, ""}, Value{{}, fs_root}}}};
}

Effect TreeModel::umount(NodeId mountpoint) const {
  return Effect{"umount", {ObjectSet{ObjectKey{ObjectKind::Mount, mountpoint, ""}, Value{{}, kNoNode}}}};
}

void TreeModel::fill_header(HistoryHeader& h) const {
  h.nodes = nodes_;
  h.initial = initial_;
}

}  // namespace leapfrog
