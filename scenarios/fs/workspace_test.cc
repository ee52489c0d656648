// Real mounts, real syscalls; runs as root. Every mount happens inside a
// run_sandboxed child, which reports each failed check as its own exit code
// (and a line on stderr), so the gtest process only compares exit statuses.

#include "scenarios/fs/workspace.h"

#include <dirent.h>
#include <fcntl.h>
#include <grp.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <set>
#include <stdexcept>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "scenarios/fs/test_support.h"
#include "scenarios/fs/view.h"

namespace leapfrog::fs {
namespace {

using namespace test_support;

// A small string the sandbox child can hand back to the test (the workdir).
class SharedText {
 public:
  SharedText() {
    mem_ = static_cast<char*>(
        mmap(nullptr, kSize, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0));
    if (mem_ == MAP_FAILED) throw std::runtime_error("mmap failed");
    mem_[0] = '\0';
  }
  ~SharedText() { munmap(mem_, kSize); }
  void set(const std::string& s) { std::snprintf(mem_, kSize, "%s", s.c_str()); }
  std::string get() const { return mem_; }

 private:
  static constexpr size_t kSize = 4096;
  char* mem_;
};

std::vector<std::string> read_lines(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// Mount points (field 5 of mountinfo) of the calling process.
std::vector<std::string> mount_points() {
  std::vector<std::string> points;
  for (const auto& line : read_lines("/proc/self/mountinfo")) {
    size_t pos = 0;
    for (int field = 0; field < 4 && pos != std::string::npos; ++field) {
      pos = line.find(' ', pos);
      if (pos != std::string::npos) ++pos;
    }
    if (pos == std::string::npos) continue;
    points.push_back(line.substr(pos, line.find(' ', pos) - pos));
  }
  return points;
}

bool mounted_below(const std::string& dir) {
  for (const auto& point : mount_points()) {
    if (point.rfind(dir + "/", 0) == 0) return true;
  }
  return false;
}

// Bound loop devices whose backing file lies under `dir`, as "loopN=path".
// Only meaningful inside the sandbox: outside it, the kernel shows a path
// relative to the (unreachable) mount, e.g. "/ext4.img".
std::string loops_backed_by(const std::string& dir) {
  std::string found;
  DIR* block = opendir("/sys/block");
  if (block == nullptr) return found;
  while (dirent* entry = readdir(block)) {
    std::string name = entry->d_name;
    if (name.rfind("loop", 0) != 0) continue;
    auto lines = read_lines("/sys/block/" + name + "/loop/backing_file");
    if (!lines.empty() && lines[0].rfind(dir + "/", 0) == 0) {
      found += (found.empty() ? "" : " ") + name + "=" + lines[0];
    }
  }
  closedir(block);
  return found;
}

// Of the "loopN=path" list, those still bound to a file named like `path`'s
// last component (as the host sees it).
std::vector<std::string> still_bound(const std::string& loops) {
  std::vector<std::string> bound;
  size_t start = 0;
  while (start < loops.size()) {
    size_t end = loops.find(' ', start);
    if (end == std::string::npos) end = loops.size();
    std::string item = loops.substr(start, end - start);
    start = end + 1;
    std::string name = item.substr(0, item.find('='));
    std::string file = item.substr(item.rfind('/'));
    auto lines = read_lines("/sys/block/" + name + "/loop/backing_file");
    if (!lines.empty() && lines[0].find(file) != std::string::npos) bound.push_back(item);
  }
  return bound;
}

// Sets a POSIX access ACL on `path` that denies uid 65534 everything while the
// mode bits (r-x for group and others) would allow it. Raw xattr format.
bool deny_observer_by_acl(const std::string& path) {
  struct Entry {
    uint16_t tag;
    uint16_t perm;
    uint32_t id;
  };
  constexpr uint32_t kUndefined = UINT32_MAX;
  struct {
    uint32_t version = 2;
    Entry entries[5] = {
        {0x01, 7, kUndefined},  // ACL_USER_OBJ rwx
        {0x02, 0, kObserver},   // ACL_USER 65534 ---
        {0x04, 5, kUndefined},  // ACL_GROUP_OBJ r-x
        {0x10, 5, kUndefined},  // ACL_MASK r-x
        {0x20, 5, kUndefined},  // ACL_OTHER r-x
    };
  } acl;
  return setxattr(path.c_str(), "system.posix_acl_access", &acl, sizeof acl, 0) == 0;
}

bool is_fuse(const std::string& kind) {
  return kind.rfind("fuse", 0) == 0;
}

class ProvisionTest : public ::testing::TestWithParam<const char*> {};

TEST_P(ProvisionTest, TreeIsVisibleThroughLookupRoot) {
  const std::string kind = GetParam();
  int status = run_sandboxed([&](const std::string& workdir) {
    FsSpec spec;
    spec.kind = parse_fs_kind(kind);
    auto ws = provision(spec, workdir);
    const std::string m = ws->mutate_root();
    const std::string l = ws->lookup_root();
    SANDBOX_CHECK(ws->name() == kind, 10);
    SANDBOX_CHECK(ws->two_views() == is_fuse(kind), 11);
    SANDBOX_CHECK((m != l) == is_fuse(kind), 12);

    struct stat root_m, root_l, parent;
    SANDBOX_CHECK(stat(m.c_str(), &root_m) == 0 && stat(l.c_str(), &root_l) == 0, 13);
    SANDBOX_CHECK((root_m.st_mode & 07777) == 0755 && (root_l.st_mode & 07777) == 0755, 14);
    SANDBOX_CHECK(root_l.st_dev == ws->lookup_dev(), 15);
    SANDBOX_CHECK(stat((workdir + "/..").c_str(), &parent) == 0, 16);
    SANDBOX_CHECK(ws->lookup_dev() != parent.st_dev, 17);

    // Pad the inode numbers, so FUSE node ids (2, 3, ...) cannot match them by luck.
    for (int i = 0; i < 16; ++i) {
      SANDBOX_CHECK(write_file(m + "/pad-" + std::to_string(i), ""), 19);
    }
    SANDBOX_CHECK(mkdir((m + "/d").c_str(), 0755) == 0, 20);
    SANDBOX_CHECK(write_file(m + "/d/f", "tag-1"), 21);
    struct stat st_m, st_l;
    SANDBOX_CHECK(stat((m + "/d/f").c_str(), &st_m) == 0, 22);
    SANDBOX_CHECK(stat((l + "/d/f").c_str(), &st_l) == 0, 23);
    SANDBOX_CHECK(st_m.st_ino == st_l.st_ino, 24);
    SANDBOX_CHECK(stat((m + "/d").c_str(), &st_m) == 0 && stat((l + "/d").c_str(), &st_l) == 0, 28);
    SANDBOX_CHECK(st_m.st_ino == st_l.st_ino, 29);
    SANDBOX_CHECK(count_prefixed(l, "pad-") == 16, 34);
    SANDBOX_CHECK(st_l.st_dev == ws->lookup_dev(), 25);
    SANDBOX_CHECK(read_file(l + "/d/f") == "tag-1", 26);
    SANDBOX_CHECK(observer_stat(l + "/d/f") == 0, 27);

    // The kernel enforces ACLs set on the mutate side, also through FUSE.
    SANDBOX_CHECK(mkdir((m + "/acl").c_str(), 0755) == 0, 30);
    SANDBOX_CHECK(write_file(m + "/acl/f", "tag-2"), 31);
    SANDBOX_CHECK(deny_observer_by_acl(m + "/acl"), 32);
    SANDBOX_CHECK(observer_stat(l + "/acl/f") == EACCES, 33);

    // RENAME_EXCHANGE through the lookup root reaches the mutate side.
    SANDBOX_CHECK(mkdir((l + "/x").c_str(), 0755) == 0, 40);
    SANDBOX_CHECK(
        renameat2(AT_FDCWD, (l + "/d").c_str(), AT_FDCWD, (l + "/x").c_str(), RENAME_EXCHANGE) == 0,
        41);
    SANDBOX_CHECK(read_file(m + "/x/f") == "tag-1", 42);
    SANDBOX_CHECK(access((m + "/d/f").c_str(), F_OK) != 0 && errno == ENOENT, 43);

    ws.reset();
    SANDBOX_CHECK(!mounted_below(workdir), 50);
    SANDBOX_CHECK(loops_backed_by(workdir).empty(), 51);
    return 0;
  });
  EXPECT_EQ(status, 0) << "kind " << kind;
}

INSTANTIATE_TEST_SUITE_P(AllKinds, ProvisionTest,
                         ::testing::Values("tmpfs", "ext4", "xfs", "btrfs", "fuse-cached",
                                           "fuse-direct"),
                         [](const auto& info) {
                           std::string name = info.param;
                           for (char& c : name) {
                             if (c == '-') c = '_';
                           }
                           return name;
                         });

class SandboxTest : public ::testing::Test {
 protected:
  void SetUp() override { mounts_before_ = mount_points(); }

  // The run's folder is gone, and nothing of it is left mounted or attached.
  void expect_no_trace() {
    std::string wd = workdir_.get();
    ASSERT_FALSE(wd.empty());
    EXPECT_EQ(wd.rfind("/tmp/leapfrog-run-", 0), 0u) << wd;
    struct stat st;
    EXPECT_NE(lstat(wd.c_str(), &st), 0) << wd << " still exists";
    EXPECT_EQ(mount_points(), mounts_before_);
    EXPECT_EQ(still_bound(loops_.get()), std::vector<std::string>{}) << loops_.get();
  }

  std::vector<std::string> mounts_before_;
  SharedText workdir_;
  SharedText loops_;  // loop devices the body saw attached
};

TEST_F(SandboxTest, LeavesNoTraceAfterBlockAndFuseWorkspaces) {
  int status = run_sandboxed([&](const std::string& workdir) {
    workdir_.set(workdir);
    struct stat st;
    SANDBOX_CHECK(stat(workdir.c_str(), &st) == 0 && (st.st_mode & 07777) == 0755, 10);
    auto ext4 = provision({FsKind::Ext4, "", 1}, workdir);
    loops_.set(loops_backed_by(workdir));
    SANDBOX_CHECK(!loops_.get().empty() && still_bound(loops_.get()).size() == 1, 11);
    auto fuse = provision({FsKind::FuseCached, "", 1}, workdir);
    SANDBOX_CHECK(write_file(ext4->mutate_root() + "/f", "x"), 12);
    SANDBOX_CHECK(write_file(fuse->mutate_root() + "/f", "x"), 13);
    SANDBOX_CHECK(read_file(fuse->lookup_root() + "/f") == "x", 14);
    // Another workspace of a kind already there would collide: refused.
    bool refused = false;
    try {
      provision({FsKind::Xfs, "", 1}, workdir);
    } catch (const SetupError&) {
      refused = true;
    }
    SANDBOX_CHECK(refused, 15);
    SANDBOX_CHECK(read_file(ext4->mutate_root() + "/f") == "x", 16);
    return 0;
  });
  EXPECT_EQ(status, 0);
  expect_no_trace();
}

TEST_F(SandboxTest, KilledBodyReturns137AndLeavesNoTrace) {
  int status = run_sandboxed([&](const std::string& workdir) {
    workdir_.set(workdir);
    auto ws = provision({FsKind::Ext4, "", 1}, workdir);
    loops_.set(loops_backed_by(workdir));
    if (loops_.get().empty()) return 10;
    raise(SIGKILL);
    return 0;
  });
  EXPECT_EQ(status, 128 + SIGKILL);
  expect_no_trace();
}

TEST_F(SandboxTest, ExceptionInBodyExitsWith2) {
  int status = run_sandboxed([&](const std::string& workdir) -> int {
    workdir_.set(workdir);
    throw std::runtime_error("boom");
  });
  EXPECT_EQ(status, 2);
  expect_no_trace();
}

TEST_F(SandboxTest, ReturnsBodyExitCode) {
  int status = run_sandboxed([&](const std::string& workdir) {
    workdir_.set(workdir);
    return 42;
  });
  EXPECT_EQ(status, 42);
  expect_no_trace();
}

TEST_F(SandboxTest, ForwardsSigtermToChildAndRestoresHandler) {
  struct sigaction before;
  ASSERT_EQ(sigaction(SIGTERM, nullptr, &before), 0);
  int status = run_sandboxed([&](const std::string& workdir) {
    workdir_.set(workdir);
    kill(getppid(), SIGTERM);  // as if someone stopped the parent
    for (;;) pause();          // ends only by the forwarded signal
    return 0;
  });
  EXPECT_EQ(status, 128 + SIGTERM);
  struct sigaction after;
  ASSERT_EQ(sigaction(SIGTERM, nullptr, &after), 0);
  EXPECT_EQ(after.sa_handler, before.sa_handler);
  expect_no_trace();
}

TEST_F(SandboxTest, MountsStayInTheChildNamespace) {
  int status = run_sandboxed([&](const std::string& workdir) {
    workdir_.set(workdir);
    auto ws = provision({FsKind::Tmpfs, "", 1}, workdir);
    SANDBOX_CHECK(mounted_below(workdir), 10);
    // The parent (the test process) is in the host namespace: it sees none of it.
    std::string host = "/proc/" + std::to_string(getppid()) + "/mountinfo";
    for (const auto& line : read_lines(host)) {
      SANDBOX_CHECK(line.find(workdir) == std::string::npos, 11);
    }
    return 0;
  });
  EXPECT_EQ(status, 0);
  expect_no_trace();
}

// A supervisor killed outright leaves its empty folder; the next sandbox
// removes it. pid_max is 32768 here, so a dead supervisor's pid is soon
// another process's, possibly the very run that collects: the start time in
// the name tells them apart. Without it the folder with our own pid stayed
// until this process ended (CI saw it as a run that "left its folder").
TEST_F(SandboxTest, FoldersOfDeadSupervisorsGoEvenWhenTheirPidIsReused) {
  const std::string mine = run_folder_prefix(getpid());
  ASSERT_EQ(mine.rfind("/tmp/leapfrog-run-" + std::to_string(getpid()) + "-", 0), 0u) << mine;
  const std::string init = run_folder_prefix(1);
  ASSERT_FALSE(init.empty());
  // The start times: ours, and one that is not (the "-" ends each prefix).
  const auto start_of = [](const std::string& prefix) {
    const std::string head = prefix.substr(0, prefix.size() - 1);
    return std::stoull(head.substr(head.rfind('-') + 1));
  };
  const std::string pid_s = std::to_string(getpid());
  const std::string reused =
      "/tmp/leapfrog-run-" + pid_s + "-" + std::to_string(start_of(mine) + 1) + "-aB3dE9";
  const std::string old_name = "/tmp/leapfrog-run-" + pid_s + "-Zq81xy";
  const std::string init_reused =
      "/tmp/leapfrog-run-1-" + std::to_string(start_of(init) + 7) + "-kE3pQ1";
  const std::string init_live = init + "kE3pQ2";
  const std::vector<std::string> made = {reused, old_name, init_reused, init_live};
  for (const auto& d : made) {
    rmdir(d.c_str());  // a failed earlier run's
    ASSERT_EQ(mkdir(d.c_str(), 0755), 0) << d;
  }

  int status = run_sandboxed([&](const std::string& workdir) {
    workdir_.set(workdir);
    return 0;
  });
  EXPECT_EQ(status, 0);
  expect_no_trace();
  EXPECT_EQ(workdir_.get().rfind(mine, 0), 0u) << workdir_.get();
  struct stat st;
  EXPECT_NE(lstat(reused.c_str(), &st), 0) << "a folder with our pid and another start time stayed";
  EXPECT_NE(lstat(old_name.c_str(), &st), 0) << "an old-style folder with our pid stayed";
  EXPECT_NE(lstat(init_reused.c_str(), &st), 0)
      << "a live pid's folder with another start time stayed";
  EXPECT_EQ(lstat(init_live.c_str(), &st), 0) << "the folder of a live process was removed";
  for (const auto& d : made) rmdir(d.c_str());
  EXPECT_EQ(run_folder_prefix(-1), "");
}

TEST(SandboxRootTest, RefusesWithoutRoot) {
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    if (setresuid(kObserver, kObserver, kObserver) != 0) _exit(3);
    try {
      run_sandboxed([](const std::string&) { return 0; });
    } catch (const SetupError& e) {
      _exit(std::strstr(e.what(), "root") != nullptr ? 0 : 4);
    }
    _exit(5);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

TEST(UserDirTest, NonexistentPathIsRefused) {
  FsSpec spec;
  spec.kind = FsKind::UserDir;
  spec.user_dir = "/nonexistent/leapfrog-test";
  EXPECT_THROW(provision(spec, "/tmp"), SetupError);
  spec.user_dir = "";
  EXPECT_THROW(provision(spec, "/tmp"), SetupError);
}

TEST(UserDirTest, FileIsRefused) {
  FsSpec spec;
  spec.kind = FsKind::UserDir;
  spec.user_dir = "/proc/self/status";
  EXPECT_THROW(provision(spec, "/tmp"), SetupError);
}

TEST(UserDirTest, MakesAndRemovesSubfolder) {
  int status = run_sandboxed([](const std::string& workdir) {
    std::string root;
    {
      auto ws = provision({FsKind::UserDir, workdir, 1}, workdir);
      root = ws->mutate_root();
      SANDBOX_CHECK(ws->lookup_root() == root && !ws->two_views(), 10);
      SANDBOX_CHECK(ws->name() == "dir", 11);
      SANDBOX_CHECK(root.rfind(workdir + "/leapfrog-", 0) == 0, 12);
      struct stat st;
      SANDBOX_CHECK(stat(root.c_str(), &st) == 0 && (st.st_mode & 07777) == 0755, 13);
      SANDBOX_CHECK(ws->lookup_dev() == st.st_dev, 14);
      // Left behind by a mutator: a locked folder with content.
      SANDBOX_CHECK(mkdir((root + "/locked").c_str(), 0755) == 0, 15);
      SANDBOX_CHECK(mkdir((root + "/locked/sub").c_str(), 0755) == 0, 16);
      SANDBOX_CHECK(write_file(root + "/locked/sub/f", "x"), 17);
      SANDBOX_CHECK(symlink("/etc", (root + "/locked/link").c_str()) == 0, 18);
      SANDBOX_CHECK(chmod((root + "/locked/sub").c_str(), 0) == 0, 19);
      SANDBOX_CHECK(chmod((root + "/locked").c_str(), 0) == 0, 20);
      SANDBOX_CHECK(observer_stat(root) == 0, 21);
    }
    SANDBOX_CHECK(access(root.c_str(), F_OK) != 0 && errno == ENOENT, 22);
    SANDBOX_CHECK(access("/etc/passwd", F_OK) == 0, 23);
    return 0;
  });
  EXPECT_EQ(status, 0);
}

TEST(UserDirTest, UnsearchableParentIsRefused) {
  int status = run_sandboxed([](const std::string& workdir) {
    std::string locked = workdir + "/locked";
    SANDBOX_CHECK(mkdir(locked.c_str(), 0700) == 0, 10);
    SANDBOX_CHECK(mkdir((locked + "/inner").c_str(), 0755) == 0, 11);
    try {
      provision({FsKind::UserDir, locked + "/inner", 1}, workdir);
    } catch (const SetupError& e) {
      std::string what = e.what();
      std::fprintf(stderr, "refused: %s\n", e.what());
      SANDBOX_CHECK(what.find("searchable") != std::string::npos, 12);
      SANDBOX_CHECK(what.find("'" + locked + "'") != std::string::npos, 13);
      return 0;
    }
    return 14;
  });
  EXPECT_EQ(status, 0);
}

// ---- views (view.h) ------------------------------------------------------

// The mountinfo line of the mount at `point`, or "".
std::string mountinfo_of(const std::string& point) {
  for (const auto& line : read_lines("/proc/self/mountinfo")) {
    if (line.find(" " + point + " ") != std::string::npos) return line;
  }
  return "";
}

class ViewTest : public ::testing::TestWithParam<std::tuple<const char*, FsView>> {};

// One tree, two mounts: what the setup root holds, the mutate and lookup
// roots show; a chmod through the mutate view is seen through the lookup
// view; the overlay copies a changed file up, the idmapped view is marked
// idmapped; nothing stays mounted afterwards.
TEST_P(ViewTest, OneTreeThroughTwoMountsAndNoTrace) {
  const auto [kind_name, view] = GetParam();
  const FsKind kind = parse_fs_kind(kind_name);
  if (!view_unavailable_reason(kind, view).empty()) GTEST_SKIP() << view_unavailable_reason(kind, view);
  int status = run_sandboxed([&, kind = kind, view = view](const std::string& workdir) {
    FsSpec spec;
    spec.kind = kind;
    spec.view = view;
    auto ws = provision(spec, workdir);
    SANDBOX_CHECK(ws->name() == fs_name(kind, view), 10);
    SANDBOX_CHECK(ws->two_views() && ws->mutate_root() != ws->lookup_root(), 11);
    SANDBOX_CHECK(mkdir((ws->setup_root() + "/d").c_str(), 0755) == 0, 12);
    SANDBOX_CHECK(write_file(ws->setup_root() + "/d/f", "x"), 13);
    SANDBOX_CHECK(chmod((ws->setup_root() + "/d/f").c_str(), 0644) == 0, 14);
    SANDBOX_CHECK(read_file(ws->lookup_root() + "/d/f") == "x", 15);
    SANDBOX_CHECK(read_file(ws->mutate_root() + "/d/f") == "x", 16);
    struct stat st;
    SANDBOX_CHECK(stat(ws->lookup_root().c_str(), &st) == 0 && st.st_dev == ws->lookup_dev(), 17);
    SANDBOX_CHECK(stat((ws->lookup_root() + "/d/f").c_str(), &st) == 0, 18);
    const ino_t ino_before = st.st_ino;
    SANDBOX_CHECK(chmod((ws->mutate_root() + "/d/f").c_str(), 0600) == 0, 19);
    SANDBOX_CHECK(stat((ws->lookup_root() + "/d/f").c_str(), &st) == 0 && (st.st_mode & 0777) == 0600, 20);
    // The oracle identifies nodes by st_ino: a copy-up must not change it.
    SANDBOX_CHECK(st.st_ino == ino_before, 21);
    SANDBOX_CHECK(as_observer([&] { return access((ws->lookup_root() + "/d/f").c_str(), R_OK) == 0 ? 1 : 0; }) == 0,
                  22);
    if (view == FsView::Overlay) {
      // Built in the lower layer, copied up by the chmod through the merge.
      SANDBOX_CHECK(ws->setup_root().size() > 6 &&
                        ws->setup_root().compare(ws->setup_root().size() - 6, 6, "/lower") == 0,
                    23);
      const std::string upper = ws->setup_root().substr(0, ws->setup_root().size() - 6) + "/upper/d/f";
      SANDBOX_CHECK(stat(upper.c_str(), &st) == 0 && (st.st_mode & 0777) == 0600, 24);
    }
    if (view == FsView::Idmap) SANDBOX_CHECK(mountinfo_of(ws->lookup_root()).find("idmapped") != std::string::npos, 25);
    ws.reset();
    SANDBOX_CHECK(!mounted_below(workdir), 26);
    return 0;
  });
  EXPECT_EQ(status, 0) << kind_name << "+" << to_string(view);
}

INSTANTIATE_TEST_SUITE_P(Views, ViewTest,
                         ::testing::Combine(::testing::Values("tmpfs", "ext4", "xfs", "btrfs"),
                                            ::testing::Values(FsView::Bind, FsView::Overlay, FsView::Idmap)),
                         [](const auto& info) {
                           return std::string(std::get<0>(info.param)) + "_" + to_string(std::get<1>(info.param));
                         });

TEST(FsViewTest, NamesRoundTripAndBadNamesSayWhatIsAccepted) {
  for (auto view : {FsView::Bind, FsView::Overlay, FsView::Idmap}) {
    const FsSpec spec = parse_fs_name(fs_name(FsKind::Xfs, view));
    EXPECT_EQ(spec.kind, FsKind::Xfs);
    EXPECT_EQ(spec.view, view);
  }
  EXPECT_EQ(fs_name(FsKind::Ext4, FsView::None), "ext4");
  EXPECT_EQ(parse_fs_name("ext4").view, FsView::None);
  try {
    parse_fs_name("ext4+union");
    FAIL() << "ext4+union was accepted";
  } catch (const SetupError& e) {
    const std::string what = e.what();
    for (const char* name : {"'union'", "bind", "overlay", "idmap"}) EXPECT_NE(what.find(name), std::string::npos) << what;
  }
  EXPECT_THROW(parse_fs_name("ext4+none"), SetupError);
  EXPECT_THROW(parse_fs_name("ext5+bind"), SetupError);
}

TEST(FsViewTest, AViewOverTwoViewsIsRefusedWithTheReason) {
  EXPECT_NE(view_unavailable_reason(FsKind::FuseCached, FsView::Bind).find("fuse-cached"), std::string::npos);
  int status = run_sandboxed([&](const std::string& workdir) {
    FsSpec spec;
    spec.kind = FsKind::FuseDirect;
    spec.view = FsView::Overlay;
    try {
      provision(spec, workdir);
    } catch (const SetupError& e) {
      SANDBOX_CHECK(std::string(e.what()).find("fuse-direct+overlay") != std::string::npos, 10);
      SANDBOX_CHECK(!mounted_below(workdir), 11);
      return 0;
    }
    return 12;
  });
  EXPECT_EQ(status, 0);
}

TEST(FsKindTest, NamesRoundTrip) {
  for (auto kind : {FsKind::Tmpfs, FsKind::Ext4, FsKind::Xfs, FsKind::Btrfs, FsKind::FuseCached,
                    FsKind::FuseDirect, FsKind::UserDir}) {
    EXPECT_EQ(parse_fs_kind(to_string(kind)), kind) << to_string(kind);
  }
  EXPECT_STREQ(to_string(FsKind::FuseCached), "fuse-cached");
}

TEST(FsKindTest, UnknownNameListsAcceptedOnes) {
  try {
    parse_fs_kind("zfs");
    FAIL() << "zfs was accepted";
  } catch (const SetupError& e) {
    std::string what = e.what();
    EXPECT_NE(what.find("'zfs'"), std::string::npos) << what;
    for (const char* name : {"tmpfs", "ext4", "xfs", "btrfs", "fuse-cached", "fuse-direct"}) {
      EXPECT_NE(what.find(name), std::string::npos) << what;
    }
    EXPECT_NE(what.back(), '.');
  }
}

TEST(FuseCacheTest, MissingDevFuseIsReported) {
  int status = run_sandboxed([](const std::string& workdir) {
    // Only in the sandbox's namespace: hide /dev behind an empty tmpfs.
    SANDBOX_CHECK(mount("none", "/dev", "tmpfs", 0, "mode=0755") == 0, 10);
    try {
      provision({FsKind::FuseDirect, "", 1}, workdir);
    } catch (const SetupError& e) {
      std::fprintf(stderr, "refused: %s\n", e.what());
      SANDBOX_CHECK(std::strstr(e.what(), "FUSE is not available: /dev/fuse") != nullptr, 11);
      SANDBOX_CHECK(!mounted_below(workdir), 12);
      return 0;
    }
    return 13;
  });
  EXPECT_EQ(status, 0);
}

TEST(BlockFsTest, MissingMkfsNamesThePackage) {
  int status = run_sandboxed([](const std::string& workdir) {
    // Only in the sandbox's namespace: empty sbin folders, no PATH.
    SANDBOX_CHECK(mount("none", "/usr/sbin", "tmpfs", 0, "mode=0755") == 0, 10);
    setenv("PATH", "/nonexistent", 1);
    for (auto [kind, package] :
         {std::pair{FsKind::Ext4, "e2fsprogs"}, std::pair{FsKind::Xfs, "xfsprogs"},
          std::pair{FsKind::Btrfs, "btrfs-progs"}}) {
      try {
        provision({kind, "", 1}, workdir);
        return 11;
      } catch (const SetupError& e) {
        std::fprintf(stderr, "refused: %s\n", e.what());
        SANDBOX_CHECK(std::strstr(e.what(), package) != nullptr, 12);
      }
    }
    SANDBOX_CHECK(!mounted_below(workdir), 13);
    return 0;
  });
  EXPECT_EQ(status, 0);
}

TEST(FuseCacheTest, CachedNeedsPositiveTimeout) {
  FsSpec spec;
  spec.kind = FsKind::FuseCached;
  spec.fuse_timeout_s = 0;
  EXPECT_THROW(provision(spec, "/tmp"), SetupError);
}

}  // namespace
}  // namespace leapfrog::fs
