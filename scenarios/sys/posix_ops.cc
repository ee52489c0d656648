#include "scenarios/sys/posix_ops.h"

#include <acl/libacl.h>
#include <endian.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/fs.h>
#include <stdio.h>
#include <sys/acl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <cerrno>
#include <string>
#include <system_error>

namespace leapfrog::sys {

int rename_exchange(const char* a, const char* b) {
  return syscall(SYS_renameat2, AT_FDCWD, a, AT_FDCWD, b, RENAME_EXCHANGE) == 0 ? 0 : errno;
}

int rename_path(const char* from, const char* to) { return ::rename(from, to) == 0 ? 0 : errno; }

int mount_tmpfs(const char* target, mode_t root_mode) {
  char opts[64];
  snprintf(opts, sizeof opts, "mode=%04o,size=1m,nr_inodes=64", static_cast<unsigned>(root_mode));
  return ::mount("leapfrog-mnt", target, "tmpfs", MS_NOSUID | MS_NODEV, opts) == 0 ? 0 : errno;
}

int move_mount(const char* from, const char* to) {
  return ::mount(from, to, nullptr, MS_MOVE, nullptr) == 0 ? 0 : errno;
}

int bind_mount(const char* from, const char* to) {
  return ::mount(from, to, nullptr, MS_BIND, nullptr) == 0 ? 0 : errno;
}

int unmount(const char* target) { return ::umount2(target, MNT_DETACH) == 0 ? 0 : errno; }

int drop_caches() {
  const int fd = ::open("/proc/sys/vm/drop_caches", O_WRONLY | O_CLOEXEC);
  if (fd < 0) return errno;
  const int rc = ::write(fd, "2\n", 2) == 2 ? 0 : errno;
  ::close(fd);
  return rc;
}

AccessAcl::AccessAcl(const Attr& attr) {
  acl_t acl = acl_from_mode(attr.mode);
  if (!acl) throw std::system_error(errno, std::generic_category(), "acl_from_mode");
  for (const auto& e : attr.acl) {
    acl_entry_t entry;
    acl_permset_t perms;
    acl_create_entry(&acl, &entry);
    acl_set_tag_type(entry, e.tag == AclEntry::Tag::User ? ACL_USER : ACL_GROUP);
    id_t id = e.id;
    acl_set_qualifier(entry, &id);
    acl_get_permset(entry, &perms);
    acl_clear_perms(perms);
    if (e.perms & 4) acl_add_perm(perms, ACL_READ);
    if (e.perms & 2) acl_add_perm(perms, ACL_WRITE);
    if (e.perms & 1) acl_add_perm(perms, ACL_EXECUTE);
  }
  if (!attr.acl.empty()) {
    // The mask is the group bits of the mode, as chmod would leave it.
    acl_entry_t mask;
    acl_permset_t perms;
    acl_create_entry(&acl, &mask);
    acl_set_tag_type(mask, ACL_MASK);
    acl_get_permset(mask, &perms);
    acl_clear_perms(perms);
    const unsigned g = (attr.mode >> 3) & 7;
    if (g & 4) acl_add_perm(perms, ACL_READ);
    if (g & 2) acl_add_perm(perms, ACL_WRITE);
    if (g & 1) acl_add_perm(perms, ACL_EXECUTE);
  }
  if (acl_valid(acl) != 0) {
    acl_free(acl);
    throw std::system_error(EINVAL, std::generic_category(), "invalid ACL for the scenario");
  }
  acl_ = acl;
}

AccessAcl::~AccessAcl() {
  if (acl_) acl_free(acl_);
}

int AccessAcl::apply(const char* path) const {
  return acl_set_file(path, ACL_TYPE_ACCESS, static_cast<acl_t>(acl_)) == 0 ? 0 : errno;
}

namespace {

// xfs's on-disk ACL entry (struct xfs_acl_entry): tag, id, perm, padding.
void put_xfs_entry(std::string& out, uint32_t tag, uint32_t id, uint16_t perm) {
  const uint32_t t = htobe32(tag), i = htobe32(id);
  const uint16_t p = htobe16(perm), pad = 0;
  out.append(reinterpret_cast<const char*>(&t), 4);
  out.append(reinterpret_cast<const char*>(&i), 4);
  out.append(reinterpret_cast<const char*>(&p), 2);
  out.append(reinterpret_cast<const char*>(&pad), 2);
}

constexpr uint32_t kUndefinedId = 0xffffffffu;
constexpr size_t kXfsEntryBytes = 12;  // put_xfs_entry's 4 + 4 + 2 + 2
constexpr long kXfsMagic = 0x58465342;  // "XFSB"

}  // namespace

XfsRawAcl::XfsRawAcl(const Attr& attr) {
  // Entries in the order the permission walk expects them: owner, named
  // users, owning group, named groups, mask, other (the POSIX tag values).
  // The mode alone is the minimal ACL (no mask): the xattr is always there,
  // so rewriting it always forgets.
  std::string entries;
  put_xfs_entry(entries, 0x01, kUndefinedId, (attr.mode >> 6) & 7);
  for (const auto& e : attr.acl)
    if (e.tag == AclEntry::Tag::User) put_xfs_entry(entries, 0x02, e.id, e.perms);
  put_xfs_entry(entries, 0x04, kUndefinedId, (attr.mode >> 3) & 7);
  for (const auto& e : attr.acl)
    if (e.tag == AclEntry::Tag::Group) put_xfs_entry(entries, 0x08, e.id, e.perms);
  if (!attr.acl.empty()) put_xfs_entry(entries, 0x10, kUndefinedId, (attr.mode >> 3) & 7);
  put_xfs_entry(entries, 0x20, kUndefinedId, attr.mode & 7);
  const uint32_t count = htobe32(static_cast<uint32_t>(entries.size() / kXfsEntryBytes));
  bytes_.assign(reinterpret_cast<const char*>(&count), 4);
  bytes_ += entries;
}

int XfsRawAcl::apply(const char* path) const {
  return ::setxattr(path, "trusted.SGI_ACL_FILE", bytes_.data(), bytes_.size(), 0) == 0 ? 0 : errno;
}

bool on_xfs(const char* path) {
  struct statfs s;
  return ::statfs(path, &s) == 0 && s.f_type == kXfsMagic;
}

int read_attr(const char* path, Attr& attr) {
  struct stat st;
  if (lstat(path, &st) != 0) return errno;
  attr.mode = st.st_mode & 07777;
  attr.uid = st.st_uid;
  attr.gid = st.st_gid;
  attr.acl.clear();
  acl_t acl = acl_get_file(path, ACL_TYPE_ACCESS);
  if (!acl) return errno == ENOTSUP || errno == EOPNOTSUPP ? 0 : errno;
  acl_entry_t entry;
  for (int which = ACL_FIRST_ENTRY; acl_get_entry(acl, which, &entry) == 1; which = ACL_NEXT_ENTRY) {
    acl_tag_t tag;
    acl_get_tag_type(entry, &tag);
    if (tag != ACL_USER && tag != ACL_GROUP) continue;
    auto* q = static_cast<id_t*>(acl_get_qualifier(entry));
    acl_permset_t perms;
    acl_get_permset(entry, &perms);
    AclEntry e;
    e.tag = tag == ACL_USER ? AclEntry::Tag::User : AclEntry::Tag::Group;
    e.id = q ? *q : 0;
    e.perms = static_cast<uint8_t>((acl_get_perm(perms, ACL_READ) ? 4 : 0) | (acl_get_perm(perms, ACL_WRITE) ? 2 : 0) |
                                   (acl_get_perm(perms, ACL_EXECUTE) ? 1 : 0));
    if (q) acl_free(q);
    attr.acl.push_back(e);
  }
  acl_free(acl);
  return 0;
}

void drop_privileges(const Cred& cred) {
  std::vector<gid_t> groups(cred.groups.begin(), cred.groups.end());
  if (setgroups(groups.size(), groups.data()) != 0)
    throw std::system_error(errno, std::generic_category(), "setgroups");
  if (setresgid(cred.gid, cred.gid, cred.gid) != 0)
    throw std::system_error(errno, std::generic_category(), "setresgid " + std::to_string(cred.gid));
  if (setresuid(cred.uid, cred.uid, cred.uid) != 0)
    throw std::system_error(errno, std::generic_category(), "setresuid " + std::to_string(cred.uid));
  if (cred.uid != 0 && setresuid(0, 0, 0) == 0)
    throw std::system_error(EPERM, std::generic_category(), "privileges were not dropped");
}

}  // namespace leapfrog::sys
