#pragma once
// A recorded history: the header (tree model, initial values, actors) and every
// timed operation. This is what the oracle checks and what the JSON Lines history
// format (docs/history-format.md) serialises.

#include <cstdint>
#include <string>
#include <vector>

#include "scenarios/model.h"

namespace leapfrog {

struct Actor {
  uint32_t id = 0;
  std::string role;  // "mutator" or "observer"
  Cred cred;         // observers: credentials the lookups ran with
  // "fuzzy": met the others at the barrier each round; "free": ran free
  // (mixed alignment runs both kinds); empty: not recorded.
  std::string align;
};

// A mutation's effect: the objects it sets atomically. Shared by every record of
// the same mutation template.
struct Effect {
  std::string op;  // "chmod", "rename", "mount", ...
  std::vector<ObjectSet> sets;
};

// openat2(2) resolve flags (Query::resolve), as RESOLVE_* in <linux/openat2.h>
// but numbered for the history only.
inline constexpr uint8_t kResolveBeneath = 1;
inline constexpr uint8_t kResolveInRoot = 2;
inline constexpr uint8_t kResolveNoXdev = 4;
inline constexpr uint8_t kResolveNoSymlinks = 8;
inline constexpr uint8_t kResolveNoMagiclinks = 16;
inline constexpr uint8_t kResolveCached = 32;
inline constexpr uint8_t kResolveAll = 63;
// "beneath", "in-root", "no-xdev", "no-symlinks", "no-magiclinks", "cached".
const char* resolve_flag_name(uint8_t bit);

// A lookup template: where it starts, the path it walks, the final check.
struct Query {
  std::string op;  // "stat", "access", "open", "openat", ...
  NodeId start = 0;
  std::vector<std::string> path;  // components; "." and ".." allowed
  uint8_t final_access = 0;       // rwx bits checked on the final node (0: none)
  bool follow_final = true;       // follow a symlink in the last component
  // openat2(2): the walk follows its resolve rules and EXDEV/EAGAIN are judged
  // results. For RESOLVE_BENEATH/RESOLVE_IN_ROOT the root is `start`.
  bool openat2 = false;
  uint8_t resolve = 0;  // kResolve* bits (openat2 only)
};

struct MutationRecord {
  uint32_t actor = 0;
  uint32_t effect = 0;  // index into History::effects
  TimeNs invoke = 0;
  TimeNs complete = 0;
  int32_t err = 0;  // errno; a failed mutation changes nothing
  uint32_t round = 0;
};

struct LookupRecord {
  uint32_t actor = 0;
  uint32_t query = 0;  // index into History::queries
  TimeNs invoke = 0;
  TimeNs complete = 0;
  int32_t err = 0;  // errno of the lookup; 0 on success
  uint32_t round = 0;
  uint64_t dev = 0;  // observed st_dev / st_ino on success
  uint64_t ino = 0;
  // execve of a program that reports its credentials: on success, the
  // effective ids it ran with (judged against the final node's set-id bits).
  bool has_ids = false;
  uint32_t euid = 0;
  uint32_t egid = 0;
};

// Shared-file-offset operation: a read of one block, or lseek(fd, 0, SEEK_CUR).
struct OffsetRecord {
  enum class Kind : uint8_t { Read, Seek } kind = Kind::Read;
  uint32_t actor = 0;
  uint32_t epoch = 0;  // bumped each time the actors rewind the file together
  TimeNs invoke = 0;
  TimeNs complete = 0;
  int32_t err = 0;
  int64_t offset = 0;  // Read: offset encoded in the block read (-1 at EOF); Seek: result
  uint32_t length = 0; // Read: bytes returned
};

struct HistoryHeader {
  std::string scenario;
  uint64_t seed = 0;
  std::string fs;
  std::string clock_source;  // e.g. "tsc"
  TimeNs epsilon_ns = 0;     // guard band added to both ends of every lookup window
  uint64_t base_dev = 0;     // st_dev of the lookup view
  std::vector<Node> nodes;
  std::vector<ObjectSet> initial;  // objects' values before the first mutation
  std::vector<Actor> actors;
  uint32_t block_size = 0;  // foffset: bytes per block
  uint64_t blocks = 0;      // foffset: blocks in the file
};

struct History {
  HistoryHeader header;
  std::vector<Effect> effects;
  std::vector<Query> queries;
  std::vector<MutationRecord> mutations;
  std::vector<LookupRecord> lookups;
  std::vector<OffsetRecord> offsets;
};

}  // namespace leapfrog
