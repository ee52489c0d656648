// The FUSE passthrough through a real mount: what the kernel caches with and
// without timeouts, per-step lookups under concurrent renames of the backing
// tree, each operation reaching the backing tree, and stopping the daemon.
// Runs as root; every mount happens inside a run_sandboxed child.

#include "scenarios/fs/fuse_passthrough.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <new>
#include <string>
#include <thread>
#include <vector>

#include "scenarios/fs/test_support.h"
#include "scenarios/fs/workspace.h"

namespace leapfrog::fs {
namespace {

using namespace test_support;

// Observer stats view/d/f, root chmods the BACKING d to 0700, observer stats
// again. Returns the second stat's errno through the exit status (0 = success),
// or 100+ for a broken precondition.
int chmod_under_view(FsKind kind, const std::string& workdir, bool wait_for_expiry) {
  FsSpec spec;
  spec.kind = kind;
  spec.fuse_timeout_s = 2;
  auto ws = provision(spec, workdir);
  const std::string backing = ws->mutate_root();
  const std::string view = ws->lookup_root();
  SANDBOX_CHECK(mkdir((backing + "/d").c_str(), 0755) == 0, 100);
  SANDBOX_CHECK(write_file(backing + "/d/f", "tag"), 101);
  SANDBOX_CHECK(observer_stat(view + "/d/f") == 0, 102);
  SANDBOX_CHECK(chmod((backing + "/d").c_str(), 0700) == 0, 103);
  auto changed = std::chrono::steady_clock::now();
  int after = observer_stat(view + "/d/f");
  if (wait_for_expiry) {
    // The stale grant must end once attr_timeout has passed.
    auto deadline = changed + std::chrono::seconds(10);
    int now = after;
    while (now == 0 && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      now = observer_stat(view + "/d/f");
    }
    auto took = std::chrono::duration_cast<std::chrono::milliseconds>(
        std::chrono::steady_clock::now() - changed);
    std::fprintf(stderr, "cache_expired after_ms=%lld errno=%d\n",
                 static_cast<long long>(took.count()), now);
    SANDBOX_CHECK(now == EACCES, 104);
  }
  return after;
}

TEST(FuseCacheTest, CachedViewGrantsOnStalePermission) {
  int status = run_sandboxed([](const std::string& workdir) {
    return chmod_under_view(FsKind::FuseCached, workdir, /*wait_for_expiry=*/true);
  });
  EXPECT_EQ(status, 0) << "want the stale grant (0); EACCES is " << EACCES;
}

TEST(FuseCacheTest, DirectViewSeesChmodAtOnce) {
  int status = run_sandboxed([](const std::string& workdir) {
    return chmod_under_view(FsKind::FuseDirect, workdir, /*wait_for_expiry=*/false);
  });
  EXPECT_EQ(status, EACCES);
}

// Observer misses view/g (ENOENT), root creates the backing g, observer looks
// again. Returns the second stat's errno (0 = found).
int create_under_view(FsKind kind, const std::string& workdir) {
  FsSpec spec;
  spec.kind = kind;
  spec.fuse_timeout_s = 2;
  auto ws = provision(spec, workdir);
  SANDBOX_CHECK(observer_stat(ws->lookup_root() + "/g") == ENOENT, 100);
  SANDBOX_CHECK(write_file(ws->mutate_root() + "/g", "tag"), 101);
  return observer_stat(ws->lookup_root() + "/g");
}

TEST(FuseCacheTest, CachedViewMissesNewEntry) {
  int status = run_sandboxed(
      [](const std::string& workdir) { return create_under_view(FsKind::FuseCached, workdir); });
  EXPECT_EQ(status, ENOENT) << "want the stale negative entry";
}

TEST(FuseCacheTest, DirectViewFindsNewEntry) {
  int status = run_sandboxed(
      [](const std::string& workdir) { return create_under_view(FsKind::FuseDirect, workdir); });
  EXPECT_EQ(status, 0);
}

TEST(FuseCacheTest, ManyObserversAtOnce) {
  int status = run_sandboxed([](const std::string& workdir) {
    auto ws = provision({FsKind::FuseDirect, "", 1}, workdir);
    SANDBOX_CHECK(mkdir((ws->mutate_root() + "/d").c_str(), 0755) == 0, 10);
    SANDBOX_CHECK(write_file(ws->mutate_root() + "/d/f", "tag"), 11);
    constexpr int kObservers = 32;
    std::vector<pid_t> pids;
    for (int i = 0; i < kObservers; ++i) {
      pid_t pid = fork();
      SANDBOX_CHECK(pid >= 0, 12);
      if (pid == 0) {
        if (setgroups(0, nullptr) != 0 || setresgid(kObserver, kObserver, kObserver) != 0 ||
            setresuid(kObserver, kObserver, kObserver) != 0) {
          _exit(1);
        }
        std::string path = ws->lookup_root() + "/d/f";
        for (int n = 0; n < 500; ++n) {
          struct stat st;
          if (stat(path.c_str(), &st) != 0) _exit(2);
        }
        _exit(0);
      }
      pids.push_back(pid);
    }
    int failed = 0;
    for (pid_t pid : pids) {
      int st = 0;
      waitpid(pid, &st, 0);
      if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) ++failed;
    }
    SANDBOX_CHECK(failed == 0, 13);
    return 0;
  });
  EXPECT_EQ(status, 0);
}

// Holds view/e/d1 (directory D) open while root swaps the backing e/d1 and
// e/d2 with RENAME_EXCHANGE, and looks up "f" relative to D over and over. D's
// f never changes, wherever D is: each answer must be that f. A path-based
// daemon resolves the path D had instead, and answers with the other f.
TEST(FuseCacheTest, DirectLookupFollowsTheParentInodeUnderExchange) {
  int status = run_sandboxed([](const std::string& workdir) {
    auto ws = provision({FsKind::FuseDirect, "", 1}, workdir);
    const std::string m = ws->mutate_root();
    const std::string d1 = m + "/e/d1", d2 = m + "/e/d2";
    SANDBOX_CHECK(mkdir((m + "/e").c_str(), 0755) == 0, 10);
    SANDBOX_CHECK(mkdir(d1.c_str(), 0755) == 0 && mkdir(d2.c_str(), 0755) == 0, 11);
    SANDBOX_CHECK(write_file(d1 + "/f", "1") && write_file(d2 + "/f", "2"), 12);
    struct stat f1, f2;
    SANDBOX_CHECK(stat((d1 + "/f").c_str(), &f1) == 0 && stat((d2 + "/f").c_str(), &f2) == 0, 13);
    SANDBOX_CHECK(f1.st_ino != f2.st_ino, 14);
    int dir = open((ws->lookup_root() + "/e/d1").c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
    SANDBOX_CHECK(dir >= 0, 15);

    struct Shared {
      std::atomic<bool> stop{false};
      std::atomic<long> swaps{0};
    };
    void* mem =
        mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    SANDBOX_CHECK(mem != MAP_FAILED, 16);
    auto* shared = new (mem) Shared;
    constexpr auto kRaceFor = std::chrono::milliseconds(1500);
    constexpr long kMaxLookups = 1'000'000;
    pid_t mutator = fork();
    SANDBOX_CHECK(mutator >= 0, 17);
    if (mutator == 0) {
      // Bounded on its own too, should the observer die.
      auto deadline = std::chrono::steady_clock::now() + 4 * kRaceFor;
      while (!shared->stop.load() && std::chrono::steady_clock::now() < deadline) {
        if (renameat2(AT_FDCWD, d1.c_str(), AT_FDCWD, d2.c_str(), RENAME_EXCHANGE) != 0) _exit(1);
        shared->swaps.fetch_add(1);
      }
      _exit(0);
    }
    // Start once the mutator is swapping, so the two overlap.
    auto deadline = std::chrono::steady_clock::now() + kRaceFor;
    while (shared->swaps.load() == 0 && std::chrono::steady_clock::now() < deadline) {
    }
    deadline = std::chrono::steady_clock::now() + kRaceFor;
    long lookups = 0, wrong = 0, errors = 0;
    while (lookups < kMaxLookups && std::chrono::steady_clock::now() < deadline) {
      struct stat st;
      if (fstatat(dir, "f", &st, AT_SYMLINK_NOFOLLOW) != 0) {
        ++errors;
      } else if (st.st_ino != f1.st_ino) {
        ++wrong;
      }
      ++lookups;
    }
    long swaps_during = shared->swaps.load();
    shared->stop.store(true);
    int mutator_status = 0;
    SANDBOX_CHECK(waitpid(mutator, &mutator_status, 0) == mutator, 18);
    std::fprintf(stderr, "exchange_race lookups=%ld swaps=%ld wrong=%ld errors=%ld\n", lookups,
                 swaps_during, wrong, errors);
    SANDBOX_CHECK(WIFEXITED(mutator_status) && WEXITSTATUS(mutator_status) == 0, 19);
    SANDBOX_CHECK(swaps_during >= 1000, 20);  // else the race was not on
    SANDBOX_CHECK(lookups >= 1000, 21);
    SANDBOX_CHECK(errors == 0, 22);
    SANDBOX_CHECK(wrong == 0, 23);
    close(dir);
    return 0;
  });
  EXPECT_EQ(status, 0);
}

TEST(FuseCacheTest, StopKillsDaemonWhenMountIsBusy) {
  int status = run_sandboxed([](const std::string& workdir) {
    auto ws = provision({FsKind::FuseDirect, "", 1}, workdir);
    SANDBOX_CHECK(write_file(ws->mutate_root() + "/f", "tag"), 10);
    // An open file keeps the detached mount alive, so the daemon never sees it go.
    int fd = open((ws->lookup_root() + "/f").c_str(), O_RDONLY);
    SANDBOX_CHECK(fd >= 0, 11);
    auto begin = std::chrono::steady_clock::now();
    ws.reset();
    auto took = std::chrono::steady_clock::now() - begin;
    SANDBOX_CHECK(took < std::chrono::seconds(4), 12);
    char buf[8];
    SANDBOX_CHECK(read(fd, buf, sizeof buf) < 0 && errno == ENOTCONN, 13);
    close(fd);
    return 0;
  });
  EXPECT_EQ(status, 0);
}

// Does each kind of operation through the view, checking the backing tree., checked on the backing
// tree.
int operations_reach_backing(FsKind kind, const std::string& workdir) {
  auto ws = provision({kind, "", 1}, workdir);
  const std::string m = ws->mutate_root();
  const std::string v = ws->lookup_root();
  struct stat st;

  // Files: create, write, read at an offset, sync, truncate by fd and by path.
  int fd = open((v + "/f").c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0640);
  SANDBOX_CHECK(fd >= 0, 10);
  SANDBOX_CHECK(pwrite(fd, "hello world", 11, 0) == 11, 11);
  char buf[16] = {};
  SANDBOX_CHECK(pread(fd, buf, 5, 6) == 5 && std::string(buf) == "world", 12);
  SANDBOX_CHECK(fsync(fd) == 0 && fdatasync(fd) == 0, 13);
  SANDBOX_CHECK(ftruncate(fd, 5) == 0, 14);
  SANDBOX_CHECK(close(fd) == 0, 15);
  SANDBOX_CHECK(read_file(m + "/f") == "hello", 16);
  SANDBOX_CHECK(truncate((v + "/f").c_str(), 4) == 0, 17);
  SANDBOX_CHECK(stat((m + "/f").c_str(), &st) == 0 && st.st_size == 4, 18);
  SANDBOX_CHECK((st.st_mode & 07777) == 0640, 19);

  // Attributes: mode, owner, times.
  SANDBOX_CHECK(chmod((v + "/f").c_str(), 0604) == 0, 20);
  SANDBOX_CHECK(chown((v + "/f").c_str(), kObserver, kObserver) == 0, 21);
  const timespec times[2] = {{1000, 0}, {2000, 0}};
  SANDBOX_CHECK(utimensat(AT_FDCWD, (v + "/f").c_str(), times, 0) == 0, 22);
  SANDBOX_CHECK(stat((m + "/f").c_str(), &st) == 0 && (st.st_mode & 07777) == 0604, 23);
  SANDBOX_CHECK(st.st_uid == kObserver && st.st_gid == kObserver, 24);
  SANDBOX_CHECK(st.st_atim.tv_sec == 1000 && st.st_mtim.tv_sec == 2000, 25);

  // Names: symlink, hard link, fifo, directory, renames, unlink, rmdir.
  SANDBOX_CHECK(symlink("f", (v + "/l").c_str()) == 0, 30);
  char target[16] = {};
  SANDBOX_CHECK(readlink((m + "/l").c_str(), target, sizeof target) == 1 && target[0] == 'f', 31);
  SANDBOX_CHECK(readlink((v + "/l").c_str(), target, sizeof target) == 1, 32);
  SANDBOX_CHECK(read_file(v + "/l") == "hell", 33);
  SANDBOX_CHECK(link((v + "/f").c_str(), (v + "/h").c_str()) == 0, 34);
  struct stat f_st;
  SANDBOX_CHECK(stat((m + "/f").c_str(), &f_st) == 0 && f_st.st_nlink == 2, 35);
  SANDBOX_CHECK(stat((v + "/h").c_str(), &st) == 0 && st.st_ino == f_st.st_ino, 36);
  SANDBOX_CHECK(mkfifo((v + "/p").c_str(), 0600) == 0, 37);
  SANDBOX_CHECK(lstat((m + "/p").c_str(), &st) == 0 && S_ISFIFO(st.st_mode), 38);
  SANDBOX_CHECK(mkdir((v + "/d").c_str(), 0750) == 0, 39);
  SANDBOX_CHECK(stat((m + "/d").c_str(), &st) == 0 && (st.st_mode & 07777) == 0750, 40);
  SANDBOX_CHECK(renameat2(AT_FDCWD, (v + "/h").c_str(), AT_FDCWD, (v + "/f").c_str(),
                          RENAME_NOREPLACE) != 0 &&
                    errno == EEXIST,
                41);
  SANDBOX_CHECK(rename((v + "/h").c_str(), (v + "/d/h").c_str()) == 0, 42);
  SANDBOX_CHECK(stat((m + "/d/h").c_str(), &st) == 0 && st.st_ino == f_st.st_ino, 43);
  SANDBOX_CHECK(unlink((v + "/d/h").c_str()) == 0 && rmdir((v + "/d").c_str()) == 0, 44);
  SANDBOX_CHECK(lstat((m + "/d").c_str(), &st) != 0 && errno == ENOENT, 45);
  fd = open((v + "/f").c_str(), O_WRONLY | O_TRUNC | O_CLOEXEC);
  SANDBOX_CHECK(fd >= 0 && close(fd) == 0, 46);
  SANDBOX_CHECK(stat((m + "/f").c_str(), &st) == 0 && st.st_size == 0, 47);

  // Extended attributes.
  SANDBOX_CHECK(setxattr((v + "/f").c_str(), "user.k", "v1", 2, 0) == 0, 50);
  char value[8] = {};
  SANDBOX_CHECK(getxattr((m + "/f").c_str(), "user.k", value, sizeof value) == 2, 51);
  SANDBOX_CHECK(std::string(value) == "v1", 52);
  SANDBOX_CHECK(getxattr((v + "/f").c_str(), "user.k", nullptr, 0) == 2, 53);
  char names[64] = {};
  ssize_t n = listxattr((v + "/f").c_str(), names, sizeof names);
  SANDBOX_CHECK(n > 0 && std::string(names, n).find("user.k") != std::string::npos, 54);
  SANDBOX_CHECK(removexattr((v + "/f").c_str(), "user.k") == 0, 55);
  SANDBOX_CHECK(getxattr((m + "/f").c_str(), "user.k", value, sizeof value) < 0, 56);

  // A listing longer than one readdir reply; statfs of the backing fs.
  SANDBOX_CHECK(mkdir((m + "/many").c_str(), 0755) == 0, 60);
  for (int i = 0; i < 500; ++i) {
    SANDBOX_CHECK(write_file(m + "/many/" + std::string(100, 'n') + std::to_string(i), ""), 61);
  }
  SANDBOX_CHECK(count_prefixed(v + "/many", "nnn") == 500, 62);
  struct statvfs v_fs, m_fs;
  SANDBOX_CHECK(statvfs(v.c_str(), &v_fs) == 0 && statvfs(m.c_str(), &m_fs) == 0, 63);
  SANDBOX_CHECK(v_fs.f_blocks == m_fs.f_blocks && v_fs.f_bsize == m_fs.f_bsize, 64);

  // New objects belong to their creator; in a set-group-ID directory they
  // take its group.
  SANDBOX_CHECK(mkdir((m + "/pub").c_str(), 0) == 0 && chmod((m + "/pub").c_str(), 0777) == 0, 70);
  SANDBOX_CHECK(mkdir((m + "/sg").c_str(), 0) == 0 && chown((m + "/sg").c_str(), 0, 4242) == 0, 71);
  SANDBOX_CHECK(chmod((m + "/sg").c_str(), 02777) == 0, 72);
  int made = as_observer([&] {
    for (const std::string& dir : {v + "/pub/", v + "/sg/"}) {
      int file = open((dir + "o").c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
      if (file < 0 || close(file) != 0) return 1;
      if (mkdir((dir + "od").c_str(), 0700) != 0) return 2;
      if (symlink("o", (dir + "ol").c_str()) != 0) return 3;
      if (mkfifo((dir + "op").c_str(), 0600) != 0) return 4;
    }
    return 0;
  });
  SANDBOX_CHECK(made == 0, 73);
  for (const char* name : {"o", "od", "ol", "op"}) {
    SANDBOX_CHECK(lstat((m + "/pub/" + name).c_str(), &st) == 0, 74);
    SANDBOX_CHECK(st.st_uid == kObserver && st.st_gid == kObserver, 75);
    SANDBOX_CHECK(lstat((m + "/sg/" + name).c_str(), &st) == 0, 76);
    SANDBOX_CHECK(st.st_uid == kObserver && st.st_gid == 4242, 77);
  }
  return 0;
}

TEST(FuseOpsTest, CachedOperationsReachTheBackingTree) {
  int status = run_sandboxed([](const std::string& workdir) {
    return operations_reach_backing(FsKind::FuseCached, workdir);
  });
  EXPECT_EQ(status, 0);
}

TEST(FuseOpsTest, DirectOperationsReachTheBackingTree) {
  int status = run_sandboxed([](const std::string& workdir) {
    return operations_reach_backing(FsKind::FuseDirect, workdir);
  });
  EXPECT_EQ(status, 0);
}

}  // namespace
}  // namespace leapfrog::fs
