// acl-exec-deny: a directory whose mode bits allow search gets (and loses) a
// POSIX ACL entry "user:<observer>:---". The observer must be refused while it
// is there; a second observer without an entry must keep succeeding. With
// static=1 the entry stays and the mutator flips the mode bits instead: the
// deny must hold throughout (the ZFS fast exec check bug class).

#include <sys/stat.h>

#include <cstring>
#include <functional>
#include <memory>

#include "scenarios/catalogue/catalogue.h"
#include "scenarios/catalogue/common.h"
#include "scenarios/sys/posix_ops.h"

namespace leapfrog::catalogue {
namespace {

class AclExecDeny : public Scenario {
 public:
  const char* name() const override { return "acl-exec-deny"; }
  const char* summary() const override {
    return "add/remove ACL user:<observer>:--- on a searchable directory; a second uid must keep "
           "access";
  }
  std::vector<ParamSpec> params() const override {
    return {{"depth", 3, 3, 8, "directories between the root and the file"},
            {"static", 0, 0, 1,
             "1: keep the deny entry and flip the mode bits (0755 <-> 0775) instead"},
            {"evict", 0, 0, 3,
             "1: drop the kernel's dentry and inode caches after each ACL change, so the next "
             "lookup reads the ACL from disk (get_acl against set_acl); 2: drop them just before "
             "each ACL change, in the same mutation, so that read races the change itself; 3 "
             "(xfs only): each change rewrites the current ACL, then writes the new one, both as "
             "xfs's raw trusted.SGI_ACL_FILE xattr, and each write forgets the cached ACL: a "
             "lookup between the two reads the old ACL from disk while the new one is written and "
             "forgotten (get_acl against set_acl and forget, no eviction needed)"},
            mutate_pct_param(),
            ops_param()};
  }
  uint32_t default_observers() const override { return 2; }

  Outcome run(RunContext& ctx) const override {
    const int depth = static_cast<int>(ctx.param("depth"));
    const bool fixed = ctx.param("static") != 0;
    const int target = static_cast<int>(ctx.rng.below(depth));
    const uint32_t denied = ctx.opts.observer.uid;
    const uint32_t other = ctx.opts.second_uid;
    if (denied == other)
      throw UsageError("the second observer uid must differ from the observer uid");

    Attr plain = mode_attr(0755);
    Attr deny = plain;
    deny.acl.push_back(AclEntry{AclEntry::Tag::User, denied, 0});
    Attr deny_wide = mode_attr(0775);
    deny_wide.acl = deny.acl;

    DiskTree disk(ctx.ws);
    RacePlan plan = new_plan(ctx);
    // Built once; the mutator's closures keep them alive.
    const auto a_plain = std::make_shared<const sys::AccessAcl>(plain);
    const auto a_deny = std::make_shared<const sys::AccessAcl>(deny);

    NodeId dir = plan.model.root();
    std::string path, target_path;
    NodeId target_node = 0;
    for (int i = 0; i < depth; ++i) {
      path += (i ? "/d" : "d") + std::to_string(i);
      disk.mkdir(path, 0755);
      const bool is_target = i == target;
      if (is_target && fixed) {
        if (int e = a_deny->apply(disk.m(path).c_str()))
          throw fs::SetupError(std::string("this file system does not take POSIX ACLs: ") +
                               std::strerror(e));
      }
      dir = plan.model.add_dir(dir, "d" + std::to_string(i), is_target && fixed ? deny : plain);
      if (is_target) {
        target_node = dir;
        target_path = disk.m(path);
      }
    }
    const std::string file = path + "/f";
    disk.file(file, 0644, "f");
    const NodeId f = plan.model.add_file(dir, "f", mode_attr(0644));
    identify(plan.model, f, disk.l(file));

    const bool raw = ctx.param("evict") == 3;
    if (raw && (fixed || !sys::on_xfs(target_path.c_str()) || !sys::on_xfs(disk.l(path).c_str())))
      throw fs::SetupError(fixed ? "evict=3 changes the ACL, static=1 keeps it: pick one"
                                 : "evict=3 writes xfs's own ACL xattr: it needs xfs on both "
                                   "the mutate and the lookup side");
    // Each ACL as libacl sets it.
    auto set = [&](const Attr& attr) -> std::function<int()> {
      auto acl = std::make_shared<const sys::AccessAcl>(attr);
      return [target_path, acl] { return acl->apply(target_path.c_str()); };
    };
    // evict=3: xfs's raw xattr. Each change rewrites the ACL the previous
    // change set, then writes its own: one mutation, whose window holds both
    // writes.
    std::shared_ptr<const sys::XfsRawAcl> raw_deny, raw_plain;
    if (raw) {
      raw_deny = std::make_shared<const sys::XfsRawAcl>(deny);
      raw_plain = std::make_shared<const sys::XfsRawAcl>(plain);
    }
    auto rewrite_then = [&](std::shared_ptr<const sys::XfsRawAcl> now,
                            std::shared_ptr<const sys::XfsRawAcl> next) -> std::function<int()> {
      return [target_path, now, next] {
        if (int e = now->apply(target_path.c_str())) return e;
        return next->apply(target_path.c_str());
      };
    };
    if (fixed) {
      plan.mutations.push_back(
          {plan.model.setfacl_effect(target_node, deny_wide), set(deny_wide), {}});
      plan.mutations.push_back({plan.model.setfacl_effect(target_node, deny), set(deny), {}});
    } else if (raw) {
      plan.mutations.push_back(
          {plan.model.setfacl_effect(target_node, deny), rewrite_then(raw_plain, raw_deny), {}});
      plan.mutations.push_back(
          {plan.model.setfacl_effect(target_node, plain), rewrite_then(raw_deny, raw_plain), {}});
    } else {
      plan.mutations.push_back({plan.model.setfacl_effect(target_node, deny), set(deny), {}});
      plan.mutations.push_back({plan.model.setfacl_effect(target_node, plain), set(plain), {}});
    }
    if (ctx.param("evict") == 2) {
      // The drop and the change are one mutation: its window holds both
      // versions, and a lookup that starts after the drop loads the ACL
      // while setfacl replaces it.
      for (auto& m : plan.mutations) {
        m.apply = [apply = m.apply] {
          if (int e = sys::drop_caches()) return e;
          return apply();
        };
      }
    } else if (ctx.param("evict") == 1) {
      // Eviction changes no object: a mutation with no effect, between each
      // ACL change and the next, after which a cached ACL is gone and the
      // next permission check loads it again while the mutator sets it.
      // drop_caches is machine-wide; on a disk file system it evicts the
      // tree's unused inodes, ACLs included (tmpfs keeps its inodes).
      const MutationTemplate evict{Effect{"drop_caches", {}}, [] { return sys::drop_caches(); }, {}};
      std::vector<MutationTemplate> with_evictions;
      for (const auto& m : plan.mutations) {
        with_evictions.push_back(m);
        with_evictions.push_back(evict);
      }
      plan.mutations = std::move(with_evictions);
    }
    add_query_mix(plan, plan.model.root(), file);
    assign_observers(plan, ctx);
    for (size_t i = 1; i < plan.observers.size(); i += 2)
      plan.observers[i] = Cred{other, other, {}};
    if (raw) {
      // The raw bytes must mean the ACL the model says: read it back through
      // the generic ACL interface.
      Attr back;
      if (int e = raw_deny->apply(target_path.c_str()))
        throw fs::SetupError(std::string("cannot write trusted.SGI_ACL_FILE: ") + std::strerror(e));
      if (int e = sys::read_attr(target_path.c_str(), back);
          e != 0 || back.mode != deny.mode || back.acl.size() != 1 || back.acl[0].id != denied ||
          back.acl[0].perms != 0)
        throw fs::SetupError("xfs did not read the raw ACL back as user:" + std::to_string(denied) +
                             ":---");
      if (int e = raw_plain->apply(target_path.c_str()))
        throw fs::SetupError(std::string("cannot write trusted.SGI_ACL_FILE: ") + std::strerror(e));
    } else if (!fixed) {
      // Fail early, with a clear reason, where ACLs are not supported.
      if (int e = a_deny->apply(target_path.c_str()))
        throw fs::SetupError(std::string("this file system does not take POSIX ACLs: ") +
                             std::strerror(e));
      a_plain->apply(target_path.c_str());
    }
    return run_lookup_race(plan, ctx);
  }
};

}  // namespace

std::unique_ptr<Scenario> make_acl_exec_deny() {
  return std::make_unique<AclExecDeny>();
}

}  // namespace leapfrog::catalogue
