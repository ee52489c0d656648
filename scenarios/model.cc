#include "scenarios/model.h"

#include <algorithm>
#include <cstdio>

namespace leapfrog {

bool permits(const Attr& attr, const Cred& cred, uint8_t want) {
  const uint8_t owner = (attr.mode >> 6) & 7;
  const uint8_t group_or_mask = (attr.mode >> 3) & 7;
  const uint8_t other = attr.mode & 7;
  auto grants = [want](uint8_t perms) { return (perms & want) == want; };
  auto in_group = [&cred](uint32_t gid) {
    return cred.gid == gid || std::find(cred.groups.begin(), cred.groups.end(), gid) != cred.groups.end();
  };

  if (cred.uid == attr.uid) return grants(owner);
  if (attr.acl.empty()) {
    if (in_group(attr.gid)) return grants(group_or_mask);
    return grants(other);
  }
  // POSIX.1e: named user entries, then any matching group entry (owning group
  // uses the group bits stored in the ACL, which we keep as the owning group
  // entry when present, else the mode's group bits), then other.
  const uint8_t mask = group_or_mask;
  for (const auto& e : attr.acl) {
    if (e.tag == AclEntry::Tag::User && e.id == cred.uid) return grants(e.perms & mask);
  }
  bool matched_group = false;
  for (const auto& e : attr.acl) {
    if (e.tag == AclEntry::Tag::Group && in_group(e.id)) {
      matched_group = true;
      if (grants(e.perms & mask)) return true;
    }
  }
  if (in_group(attr.gid)) {
    // Without an explicit owning-group entry we take the owning group's perms
    // to equal the mask, which is what setfacl produces for "u:X:---" on a
    // directory whose group bits were not narrowed.
    matched_group = true;
    if (grants(group_or_mask)) return true;
  }
  if (matched_group) return false;
  return grants(other);
}

bool exec_ids_possible(const Attr& attr, const Cred& caller, uint32_t euid, uint32_t egid) {
  const bool uid_ok = euid == caller.uid || ((attr.mode & 04000) && attr.uid == euid);
  const bool gid_ok = egid == caller.gid || ((attr.mode & 02010) == 02010 && attr.gid == egid);
  return uid_ok && gid_ok;
}

const char* to_string(NodeKind k) {
  switch (k) {
    case NodeKind::Dir: return "dir";
    case NodeKind::File: return "file";
    case NodeKind::Symlink: return "symlink";
  }
  return "?";
}

const char* to_string(ObjectKind k) {
  switch (k) {
    case ObjectKind::Attr: return "attr";
    case ObjectKind::Entry: return "entry";
    case ObjectKind::Parent: return "parent";
    case ObjectKind::Mount: return "mount";
  }
  return "?";
}

static std::string node_label(NodeId id, const std::vector<Node>& nodes) {
  if (id == kNoNode) return "(none)";
  if (id < nodes.size() && !nodes[id].name.empty()) return nodes[id].name;
  return "#" + std::to_string(id);
}

std::string describe(const ObjectKey& key, const std::vector<Node>& nodes) {
  const std::string n = node_label(key.node, nodes);
  switch (key.kind) {
    case ObjectKind::Attr: return "attr(" + n + ")";
    case ObjectKind::Entry: return "entry(" + n + ", \"" + key.name + "\")";
    case ObjectKind::Parent: return "parent(" + n + ")";
    case ObjectKind::Mount: return "mount(" + n + ")";
  }
  return "?";
}

std::string describe(const Value& v, ObjectKind kind, const std::vector<Node>& nodes) {
  if (kind != ObjectKind::Attr) return node_label(v.target, nodes);
  char buf[64];
  std::snprintf(buf, sizeof buf, "mode=%04o uid=%u gid=%u", v.attr.mode, v.attr.uid, v.attr.gid);
  std::string s = buf;
  for (const auto& e : v.attr.acl) {
    s += e.tag == AclEntry::Tag::User ? " user:" : " group:";
    s += std::to_string(e.id) + ":";
    s += (e.perms & 4) ? 'r' : '-';
    s += (e.perms & 2) ? 'w' : '-';
    s += (e.perms & 1) ? 'x' : '-';
  }
  return s;
}

}  // namespace leapfrog
