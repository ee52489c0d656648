#pragma once
// The world model the oracle reasons about: nodes of a small tree, the mutable
// objects that decide each lookup step (a directory's attributes, a directory
// entry, a node's parent for "..", a mount point), and the values they take.
// Pure data; no syscalls here.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace leapfrog {

using NodeId = uint32_t;
inline constexpr NodeId kNoNode = UINT32_MAX;

// Nanoseconds on CLOCK_MONOTONIC.
using TimeNs = int64_t;
inline constexpr TimeNs kTimeMin = INT64_MIN / 4;
inline constexpr TimeNs kTimeMax = INT64_MAX / 4;
// The times a history may hold: |t| <= kMaxTimeNs (2^60 ns, about 36.5 years),
// and a guard band of at most kMaxEpsilonNs (2^58 ns). A window widened by the
// band then stays within +-1.25 * 2^60, far from the sentinels above (+-2^61),
// and differences of two times cannot overflow.
inline constexpr TimeNs kMaxTimeNs = TimeNs{1} << 60;
inline constexpr TimeNs kMaxEpsilonNs = TimeNs{1} << 58;

enum class NodeKind : uint8_t { Dir, File, Symlink };

// Identity a lookup can observe. A node whose `any_other_dev` is set is the root
// (or a file) of a file system instance that is created afresh by each mount: it
// matches any st_dev other than the base one, whatever the inode number.
struct NodeIdentity {
  uint64_t dev = 0;
  uint64_t ino = 0;
  bool any_other_dev = false;
};

struct Node {
  NodeId id = 0;
  NodeKind kind = NodeKind::Dir;
  std::string name;            // human label, e.g. "a/b" (for reports only)
  NodeIdentity identity;       // as seen through the lookup view
  std::string symlink_target;  // target, for symlinks (absolute ones start with '/')
  // A /proc magic link (e.g. /proc/self/fd/N): following it jumps to this
  // node, whatever symlink_target says. kNoNode: an ordinary symlink.
  NodeId magic_target = kNoNode;
};

// One extended POSIX ACL entry (ACL_USER or ACL_GROUP); perms are rwx bits (4/2/1).
struct AclEntry {
  enum class Tag : uint8_t { User, Group } tag = Tag::User;
  uint32_t id = 0;
  uint8_t perms = 0;
  bool operator==(const AclEntry&) const = default;
};

// A node's permission-relevant attributes. With extended ACL entries present the
// group class bits of `mode` act as the ACL mask, as in POSIX.1e.
struct Attr {
  uint32_t mode = 0755;
  uint32_t uid = 0;
  uint32_t gid = 0;
  std::vector<AclEntry> acl;
  bool operator==(const Attr&) const = default;
};

// Credentials of an observer process.
struct Cred {
  uint32_t uid = 65534;
  uint32_t gid = 65534;
  std::vector<uint32_t> groups;
};

// Permission bits as in access(2).
inline constexpr uint8_t kMayExec = 1;
inline constexpr uint8_t kMayWrite = 2;
inline constexpr uint8_t kMayRead = 4;

// Does `attr` grant every bit of `want` (rwx) to `cred`? Unprivileged caller;
// follows the POSIX.1e access check algorithm.
bool permits(const Attr& attr, const Cred& cred, uint8_t want);

// Could an exec of a file with `attr` by `caller` run with effective ids
// euid/egid? Set-uid (04000) gives the file's owner, set-gid with group exec
// (02010) its group; the caller's own ids are always possible (a nosuid
// mount or no_new_privs ignores the bits).
bool exec_ids_possible(const Attr& attr, const Cred& caller, uint32_t euid, uint32_t egid);

enum class ObjectKind : uint8_t {
  Attr,    // attributes of `node`
  Entry,   // directory entry `name` in directory `node`
  Parent,  // what ".." of `node` leads to
  Mount,   // what is mounted on `node` (kNoNode: nothing)
};

struct ObjectKey {
  ObjectKind kind = ObjectKind::Attr;
  NodeId node = 0;
  std::string name;  // only for Entry
  bool operator==(const ObjectKey&) const = default;
};

// A value of an object. Attr objects use `attr`; the others use `target`
// (kNoNode = absent entry / nothing mounted).
struct Value {
  Attr attr;
  NodeId target = kNoNode;
  bool operator==(const Value&) const = default;
};

struct ObjectSet {
  ObjectKey key;
  Value value;
};

const char* to_string(NodeKind k);
const char* to_string(ObjectKind k);
std::string describe(const ObjectKey& key, const std::vector<Node>& nodes);
std::string describe(const Value& v, ObjectKind kind, const std::vector<Node>& nodes);

}  // namespace leapfrog
