#include "scenarios/registry.h"

#include "scenarios/catalogue/catalogue.h"

namespace leapfrog {

const std::vector<std::unique_ptr<Scenario>>& scenarios() {
  static const std::vector<std::unique_ptr<Scenario>> table = [] {
    std::vector<std::unique_ptr<Scenario>> t;
    t.push_back(catalogue::make_setattr_lookup());
    t.push_back(catalogue::make_chown_lookup());
    t.push_back(catalogue::make_acl_exec_deny());
    t.push_back(catalogue::make_rename_lookup());
    t.push_back(catalogue::make_mount_lookup());
    t.push_back(catalogue::make_dotdot_lookup());
    t.push_back(catalogue::make_symlink_lookup());
    t.push_back(catalogue::make_dirfd_lookup());
    t.push_back(catalogue::make_foffset());
    t.push_back(catalogue::make_lookup_scale());
    t.push_back(catalogue::make_beneath_lookup());
    t.push_back(catalogue::make_cached_lookup());
    t.push_back(catalogue::make_typeflip_lookup());
    t.push_back(catalogue::make_exec_setid());
    t.push_back(catalogue::make_mount_move_dotdot());
    t.push_back(catalogue::make_rename_umount());
    return t;
  }();
  return table;
}

const Scenario& find_scenario(const std::string& name) {
  std::string known;
  for (const auto& s : scenarios()) {
    if (name == s->name()) return *s;
    known += (known.empty() ? "" : ", ") + std::string(s->name());
  }
  throw UsageError("unknown scenario \"" + name + "\", want one of: " + known);
}

}  // namespace leapfrog
