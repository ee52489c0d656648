#pragma once
// The legal history the oracle benches judge: a chmod every fourth operation
// on a directory of a depth-4 path, lookups racing it (each legal).

#include <cerrno>
#include <memory>
#include <string>

#include "scenarios/history.h"
#include "scenarios/tree_model.h"

namespace leapfrog::bench {

inline std::unique_ptr<History> make_history(int64_t ops) {
  const Attr open{0755, 0, 0, {}}, closed{0700, 0, 0, {}};
  TreeModel tree(open);
  NodeId d = tree.root(), target = 0;
  for (int i = 0; i < 3; ++i) {
    d = tree.add_dir(d, "d" + std::to_string(i), open);
    if (i == 1) target = d;
  }
  const NodeId f = tree.add_file(d, "f", Attr{0644, 0, 0, {}});
  for (const auto& n : tree.nodes()) tree.set_identity(n.id, NodeIdentity{1, 100 + n.id, false});
  auto h = std::make_unique<History>();
  tree.fill_header(h->header);
  h->header.base_dev = 1;
  h->header.actors = {Actor{0, "mutator", Cred{0, 0, {}}, ""},
                      Actor{1, "observer", Cred{65534, 65534, {}}, ""}};
  h->effects = {tree.chmod(target, closed), tree.chmod(target, open)};
  h->queries = {Query{"stat", 0, {"d0", "d1", "d2", "f"}, 0, true}};
  h->mutations.reserve(ops / 4 + 1);
  h->lookups.reserve(ops);
  bool is_open = true;
  TimeNs last_complete = -1;
  for (int64_t i = 0; i < ops; ++i) {
    const TimeNs t = i * 250;
    if (i % 4 == 0) {
      h->mutations.push_back(MutationRecord{0, is_open ? 0u : 1u, t, t + 300, 0, 0});
      is_open = !is_open;
      last_complete = t + 300;
    } else {
      // Overlapping the last mutation either answer is legal; after it, the new one.
      const bool open_now = t > last_complete ? is_open : !is_open;
      if (open_now)
        h->lookups.push_back(LookupRecord{1, 0, t, t + 200, 0, 0, 1, 100 + f});
      else
        h->lookups.push_back(LookupRecord{1, 0, t, t + 200, EACCES, 0, 0, 0});
    }
  }
  return h;
}

}  // namespace leapfrog::bench
