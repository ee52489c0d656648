/* The bare twin of a lookup scenario, for the VM throughput bench
 * (bench/vm_bench.cc): the same tree, the same mutator syscalls and the same
 * observer lookups (stat, access, open + fstat + close of the scenario's
 * paths) as Leapfrog's run of the family with one free-running observer,
 * with no clock read per call, no record and no oracle. Linked static: it
 * runs in the VM image.
 *
 *   lf-bare FAMILY DIR SECONDS   race in DIR (empty, on the file system under
 *                                test) for SECONDS; prints one line
 *                                "bare FAMILY lookups=N mutations=M seconds=S"
 *   lf-bare time CMD [ARG]...    runs CMD and prints "time ns=N" (its wall time)
 *
 * FAMILY: setattr (setattr-lookup, depth 3: chmod one directory of the path
 * between 0755 and 0700), rename (rename-lookup with exchange: p1/x <-> p2/x
 * and RENAME_EXCHANGE of e/d1 and e/d2), typeflip (typeflip-lookup with
 * mkdir: "n" cycles file, absent, directory, absent, symlink, file, symlink,
 * absent, renamed directory, absent, file). The observer runs as uid/gid
 * 65534 on the first CPU, the mutator as root on the second. The mutator is
 * paced as Leapfrog's free-running mutator is (scenarios/race.cc): after
 * each mutation it dwells for a time drawn from [0, 2 M], M the observer's
 * mean lookup so far, spinning on the clock. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void die(const char* what) {
  fprintf(stderr, "lf-bare: %s: %s\n", what, strerror(errno));
  exit(2);
}

static void pin(int nth) {
  cpu_set_t allowed, one;
  if (sched_getaffinity(0, sizeof allowed, &allowed) != 0) return;
  for (int c = 0, seen = 0; c < CPU_SETSIZE; ++c) {
    if (!CPU_ISSET(c, &allowed)) continue;
    if (seen++ == nth) {
      CPU_ZERO(&one);
      CPU_SET(c, &one);
      sched_setaffinity(0, sizeof one, &one);
      return;
    }
  }
}

static void mk(const char* p, mode_t m) {
  if (mkdir(p, m) != 0) die(p);
  chmod(p, m);
}
static void file(const char* p) {
  int fd = open(p, O_WRONLY | O_CREAT | O_EXCL, 0644);
  if (fd < 0 || write(fd, "x", 1) != 1) die(p);
  close(fd);
}

/* The observer's lookups: each path with stat, access and open. */
static const char* const kSetattrPaths[] = {"d0/d1/d2/f"};
static const char* const kRenamePaths[] = {"p1/x/f", "p2/x/f", "e/d1/f", "e/d2/f"};
static const char* const kTypeflipPaths[] = {"n/f"};

static int renameat2_(const char* a, const char* b, unsigned flags) {
  return (int)syscall(SYS_renameat2, AT_FDCWD, a, AT_FDCWD, b, flags);
}

/* One mutation of the family's cycle (step counts up from 0). */
static void mutate(char family, uint64_t step) {
  switch (family) {
    case 's':
      chmod("d0/d1", step & 1 ? 0755 : 0700);
      break;
    case 'r':
      switch (step % 4) {
        case 0: rename("p1/x", "p2/x"); break;
        case 1: renameat2_("e/d1", "e/d2", 2 /* RENAME_EXCHANGE */); break;
        case 2: rename("p2/x", "p1/x"); break;
        case 3: renameat2_("e/d1", "e/d2", 2); break;
      }
      break;
    case 't': {
      mode_t old;
      switch (step % 10) {
        case 0: unlink("n"); break;
        case 1: old = umask(0); mkdir("n", 0755); umask(old); break;
        case 2: rmdir("n"); break;
        case 3: link("staging/L", "n"); break;
        case 4: unlink("staging/new"); link("staging/F", "staging/new"); rename("staging/new", "n"); break;
        case 5: unlink("staging/new"); link("staging/L", "staging/new"); rename("staging/new", "n"); break;
        case 6: unlink("n"); break;
        case 7: rename("staging/D", "n"); break;
        case 8: rename("n", "staging/D"); break;
        case 9: link("staging/F", "n"); break;
      }
      break;
    }
  }
}

static void setup(char family) {
  switch (family) {
    case 's':
      mk("d0", 0755); mk("d0/d1", 0755); mk("d0/d1/d2", 0755); file("d0/d1/d2/f");
      break;
    case 'r':
      mk("p1", 0755); mk("p2", 0700); mk("p1/x", 0755); file("p1/x/f");
      mk("e", 0755); mk("e/d1", 0755); mk("e/d2", 0755); file("e/d1/f"); file("e/d2/f");
      break;
    case 't':
      mk("staging", 0700); mk("staging/D", 0755); file("staging/D/f"); file("staging/F");
      if (symlink("t", "staging/L") != 0) die("symlink");
      mk("t", 0755); file("t/f");
      if (link("staging/F", "n") != 0) die("link n");
      break;
  }
}

static int cmd_time(char** argv) {
  const int64_t t0 = now_ns();
  const pid_t pid = fork();
  if (pid == 0) {
    execv(argv[0], argv);
    _exit(127);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  printf("time ns=%lld status=%d\n", (long long)(now_ns() - t0), WIFEXITED(status) ? WEXITSTATUS(status) : 128);
  return 0;
}

int main(int argc, char** argv) {
  if (argc >= 3 && strcmp(argv[1], "time") == 0) return cmd_time(argv + 2);
  if (argc != 4) {
    fprintf(stderr, "usage: lf-bare setattr|rename|typeflip DIR SECONDS | lf-bare time CMD [ARG]...\n");
    return 2;
  }
  const char family = argv[1][0];
  const char* const* paths;
  int npaths;
  if (strcmp(argv[1], "setattr") == 0) {
    paths = kSetattrPaths; npaths = 1;
  } else if (strcmp(argv[1], "rename") == 0) {
    paths = kRenamePaths; npaths = 4;
  } else if (strcmp(argv[1], "typeflip") == 0) {
    paths = kTypeflipPaths; npaths = 1;
  } else {
    fprintf(stderr, "lf-bare: unknown family \"%s\"\n", argv[1]);
    return 2;
  }
  if (chdir(argv[2]) != 0) die(argv[2]);
  chmod(".", 0755);
  setup(family);
  const int64_t run_ns = (int64_t)(atof(argv[3]) * 1e9);
  /* Shared: the observer's count and the stop flag. */
  volatile uint64_t* shared = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (shared == MAP_FAILED) die("mmap");
  const pid_t obs = fork();
  if (obs == 0) {
    pin(0);
    if (setgid(65534) != 0 || setuid(65534) != 0) die("setuid");
    uint64_t x = 88172645463325252ull, n = 0;
    struct stat st;
    const int64_t t0 = now_ns();
    int64_t t = t0;
    while (t - t0 < run_ns) {
      for (int i = 0; i < 64; ++i, ++n) {
        x ^= x << 13; x ^= x >> 7; x ^= x << 17;
        const char* p = paths[(x >> 8) % (uint64_t)npaths];
        switch (x % 3) {
          case 0: fstatat(AT_FDCWD, p, &st, 0); break;
          case 1: faccessat(AT_FDCWD, p, R_OK, 0); break;
          case 2: {
            const int fd = openat(AT_FDCWD, p, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
            if (fd >= 0) {
              fstat(fd, &st);
              close(fd);
            }
            break;
          }
        }
      }
      t = now_ns();
      shared[3] = (uint64_t)(t - t0) / n; /* the mean lookup, for the mutator's pace */
    }
    shared[0] = n;
    shared[1] = (uint64_t)(t - t0);
    shared[2] = 1;
    _exit(0);
  }
  pin(1);
  uint64_t m = 0, x = 0x9ace;
  while (!shared[2]) {
    mutate(family, m++);
    const uint64_t pace = 2 * shared[3];
    x ^= x << 13; x ^= x >> 7; x ^= x << 17;
    const int64_t until = now_ns() + (int64_t)(pace ? x % (pace + 1) : 0);
    while (now_ns() < until && !shared[2]) {
    }
  }
  waitpid(obs, NULL, 0);
  printf("bare %s lookups=%llu mutations=%llu seconds=%.3f\n", argv[1], (unsigned long long)shared[0],
         (unsigned long long)m, (double)shared[1] / 1e9);
  return 0;
}
