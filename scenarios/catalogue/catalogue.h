#pragma once
// Factories of the catalogue's scenarios; the registry lists them by name.

#include <memory>

#include "scenarios/scenario.h"

namespace leapfrog::catalogue {

std::unique_ptr<Scenario> make_setattr_lookup();
std::unique_ptr<Scenario> make_chown_lookup();
std::unique_ptr<Scenario> make_acl_exec_deny();
std::unique_ptr<Scenario> make_rename_lookup();
std::unique_ptr<Scenario> make_mount_lookup();
std::unique_ptr<Scenario> make_dotdot_lookup();
std::unique_ptr<Scenario> make_symlink_lookup();
std::unique_ptr<Scenario> make_dirfd_lookup();
std::unique_ptr<Scenario> make_foffset();
std::unique_ptr<Scenario> make_lookup_scale();
// openat2 resolve flags (beneath_lookup.cc, cached_lookup.cc).
std::unique_ptr<Scenario> make_beneath_lookup();
std::unique_ptr<Scenario> make_cached_lookup();
std::unique_ptr<Scenario> make_typeflip_lookup();
std::unique_ptr<Scenario> make_exec_setid();
// mount moves and unmounts against lockless walks (Linux aed434ada685, 20aac6c60981).
std::unique_ptr<Scenario> make_mount_move_dotdot();
std::unique_ptr<Scenario> make_rename_umount();

}  // namespace leapfrog::catalogue
