// The reproducer is a fixed C program (kProgram) with the scenario's setup,
// mutation and expected results pasted in. Its judgement is conservative: a
// lookup is judged only when no mutation was in flight at any time between
// just before it was issued and just after it returned (a generation counter
// in shared memory, odd while a mutation runs), so the state it must reflect
// is exactly one.

#include "coordinator/triage/repro_c.h"

#include <algorithm>
#include <regex>

#include "common/ktap/words.h"
#include "scenarios/widen_request.h"

namespace leapfrog::coord::triage {

namespace {

const char* const kProgram = R"c(/*
 * Leapfrog reproducer: @TITLE@
 * Spec: @SPEC@
 *
 * Build:  cc -O2 -o repro repro.c
 * Run as root:
 *   ./repro MUTATED_DIR [LOOKUP_DIR] [SECONDS]
 * MUTATED_DIR  an empty folder: the tree is built and changed there
 * LOOKUP_DIR   where the same tree is looked up (a second view, e.g. a FUSE
 *              mount of MUTATED_DIR); default MUTATED_DIR
 * SECONDS      time budget (default 10); extended up to 4 times while fewer
 *              than MIN_JUDGED lookups have been judged
 * Delay points: @WIDEN_TEXT@ (set through
 *   /sys/kernel/leapfrog_widen/control, or $LEAPFROG_WIDEN_CONTROL, on a
 *   kernel built with `leapfrog kernel build --widen`; off at the end)
 * Observers run as uid/gid @UID@. A lookup is judged only when no mutation
 * was in flight from just before it started to just after it returned; it
 * must then match the one state current all along, else "FAIL ..." (exit 1).
 * "PASS" (exit 0) when the budget runs out without a violation and at least
 * MIN_JUDGED lookups ($LEAPFROG_MIN_JUDGED, default @MIN_JUDGED@) were judged;
 * "INCONCLUSIVE" (exit 3) when fewer were: too few to say the race is gone.
 * Errors exit 2.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define OBSERVERS @OBSERVERS@
#define OBSERVER_UID @UID@
#define MUTATE_PCT @MUTATE_PCT@
#define MIN_JUDGED @MIN_JUDGED@

static char mroot[4096], lroot[4096];

struct shared {
  volatile long gen;   /* odd while a mutation is in flight */
  volatile int state;  /* the state the last completed mutation set */
  volatile int failed;
  volatile long judged;
  volatile long changed_ns; /* when the last mutation completed */
  volatile long lookup_ns;  /* a lookup's mean duration (moving average) */
  volatile int stop;        /* set by main when the run is over */
  char msg[1024];
};
static struct shared *sh;

static long now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1000000000L + t.tv_nsec;
}

static void die(const char *what, const char *path) {
  fprintf(stderr, "error: %s \"%s\": %s\n", what, path, strerror(errno));
  exit(2);
}

static void mpath(char *out, const char *rel) { snprintf(out, 4096, "%s/%s", mroot, rel); }

static void mk(const char *rel, mode_t mode) {
  char p[4096];
  mpath(p, rel);
  if (mkdir(p, mode) != 0 && errno != EEXIST) die("mkdir", p);
  if (chmod(p, mode) != 0) die("chmod", p);
}

static void mkfile(const char *rel) {
  char p[4096];
  mpath(p, rel);
  int fd = open(p, O_CREAT | O_WRONLY | O_TRUNC, 0644);
  if (fd < 0) die("create", p);
  if (write(fd, "f\n", 2) != 2) die("write", p);
  close(fd);
  if (chmod(p, 0644) != 0) die("chmod", p);
}

/* The kernel delay points the run had ("POINT PROBABILITY_PPM DELAY_NS UID"),
 * set through a `leapfrog kernel build --widen` kernel's control file. */
static const char *const widen_points[] = {@WIDEN_POINTS@NULL};
static const char *widen_control = "/sys/kernel/leapfrog_widen/control";

/* One line per write, as the control file takes it. */
static int widen_write(const char *line) {
  char text[128];
  int len = snprintf(text, sizeof text, "%s\n", line);
  int fd = open(widen_control, O_WRONLY | O_APPEND | O_CLOEXEC);
  if (fd < 0) return errno;
  int err = write(fd, text, len) != len ? (errno ? errno : EIO) : 0;
  close(fd);
  return err;
}

/* Sets the points (on) or turns every point off; without the control file
 * the race runs unwidened, and says so. */
static void widen(int on) {
  if (!widen_points[0]) return;
  if (getenv("LEAPFROG_WIDEN_CONTROL")) widen_control = getenv("LEAPFROG_WIDEN_CONTROL");
  if (!on) {
    widen_write("off");
    return;
  }
  for (int i = 0; widen_points[i]; i++) {
    int err = widen_write(widen_points[i]);
    if (err == ENOENT) {
      fprintf(stderr, "warning: %s is missing (not a kernel built with Leapfrog's delay points): "
              "racing without them\n", widen_control);
      return;
    }
    if (err != 0) {
      errno = err;
      die("set the delay point", widen_points[i]);
    }
  }
}

/* A lookup's result as the judgements name it. */
static inline const char *errname(int err) {
  switch (err) {
    case 0: return "success";
    case EACCES: return "EACCES";
    case ENOENT: return "ENOENT";
    case ENOTDIR: return "ENOTDIR";
    case ELOOP: return "ELOOP";
    default: return strerror(err);
  }
}

/* ---- the scenario: @SCENARIO@ ---- */
@SCENARIO_CODE@

/* ---- the lookup: @OP@ of @LOOKUP@ ---- */
static int lookup(const char *path) {
@OP_CODE@
}

static void observer(void) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", lroot, "@LOOKUP@");
  while (!sh->stop && !sh->failed) {
    long g1 = __atomic_load_n(&sh->gen, __ATOMIC_ACQUIRE);
    int st = sh->state;
    long changed = sh->changed_ns; /* read now: a later change may land before the message */
    long a = now_ns();
    int err = lookup(path);
    long b = now_ns();
    long g2 = __atomic_load_n(&sh->gen, __ATOMIC_ACQUIRE);
    sh->lookup_ns += (b - a - sh->lookup_ns) / 16;
#ifdef SCENARIO_NEVER
    /* A result no state explains is wrong whatever overlapped it. */
    char never_why[512];
    if (never(err, never_why, sizeof never_why)) {
      __atomic_add_fetch(&sh->judged, 1, __ATOMIC_RELAXED);
      if (!__atomic_exchange_n(&sh->failed, 1, __ATOMIC_ACQ_REL))
        snprintf(sh->msg, sizeof sh->msg, "FAIL %s (%ld ns window, %s)", never_why, b - a,
                 g1 != g2 || (g1 & 1) ? "a mutation overlapped it" : "no mutation overlapped it");
      continue;
    }
#endif
    if (g1 != g2 || (g1 & 1)) continue; /* a mutation overlapped: not judged */
    __atomic_add_fetch(&sh->judged, 1, __ATOMIC_RELAXED);
#ifdef SCENARIO_JUDGE
    char why[512];
    if (!judge(st, err, why, sizeof why) && !__atomic_exchange_n(&sh->failed, 1, __ATOMIC_ACQ_REL))
      snprintf(sh->msg, sizeof sh->msg,
               "FAIL %s for its whole window (%ld ns, %ld ns after the last change completed)", why,
               b - a, a - changed);
#else
    if (err != 0 && err != EACCES && err != ENOENT) continue;
    int want = expected_ok(st);
    if ((err == 0) != want && !__atomic_exchange_n(&sh->failed, 1, __ATOMIC_ACQ_REL)) {
      snprintf(sh->msg, sizeof sh->msg,
               "FAIL %s: @OP@ %s %s while %s for its whole window (%ld ns, %ld ns after the last change completed)",
               err == 0 ? "stale-grant" : "stale-deny", "@LOOKUP@",
               err == 0 ? "succeeded" : (err == EACCES ? "failed EACCES" : "failed ENOENT"),
               state_text(st), b - a, a - changed);
    }
#endif
  }
}

/* Pauses between changes scale with a lookup's duration, so that slow
 * lookups (an execve through FUSE takes milliseconds) still find quiet
 * windows to be judged in, and fast ones still race changes closely. */
static void mutator(void) {
  unsigned seed = (unsigned)getpid();
  while (!sh->stop && !sh->failed) {
    long span = 200000 + 4 * sh->lookup_ns;
    if (span > 50000000) span = 50000000;
    long ns = 20000 + (long)(rand_r(&seed) % (unsigned)span);
    struct timespec pause = {ns / 1000000000, ns % 1000000000};
    nanosleep(&pause, NULL);
    if ((int)(rand_r(&seed) % 100) >= MUTATE_PCT) continue;
    int next = !sh->state;
#ifdef SCENARIO_PREPARE
    prepare(next); /* outside the mutation's window, as in the scenario */
#endif
    __atomic_add_fetch(&sh->gen, 1, __ATOMIC_ACQ_REL);
    int err = mutate(next);
    if (err == 0) sh->state = next;
    sh->changed_ns = now_ns();
    __atomic_add_fetch(&sh->gen, 1, __ATOMIC_ACQ_REL);
    if (err != 0) {
      errno = err;
      die("mutate", mroot);
    }
  }
}

int main(int argc, char **argv) {
#ifdef EXEC_HELPER
  /* Run as the set-id helper (directly or as a script's interpreter). */
  if (argc >= 2 && strcmp(argv[1], "--report-ids") == 0) {
    printf("%u %u\n", (unsigned)geteuid(), (unsigned)getegid());
    return 0;
  }
#endif
  if (argc < 2 || argc > 4) {
    fprintf(stderr, "usage: %s MUTATED_DIR [LOOKUP_DIR] [SECONDS]\n", argv[0]);
    return 2;
  }
  if (geteuid() != 0) {
    fprintf(stderr, "error: run as root (the mutator changes owners and modes)\n");
    return 2;
  }
  snprintf(mroot, sizeof mroot, "%s", argv[1]);
  snprintf(lroot, sizeof lroot, "%s", argc >= 3 ? argv[2] : argv[1]);
  double seconds = argc >= 4 ? atof(argv[3]) : 10;
  long min_judged = getenv("LEAPFROG_MIN_JUDGED") ? atol(getenv("LEAPFROG_MIN_JUDGED")) : MIN_JUDGED;
  sh = mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (sh == MAP_FAILED) die("mmap", "shared");
  memset((void *)sh, 0, sizeof *sh);
  setup();
  sync();
  widen(1);
  long start = now_ns();
  long deadline = start + (long)(seconds * 1e9), last = start + (long)(4 * seconds * 1e9);
  pid_t pids[OBSERVERS + 1];
  for (int i = 0; i <= OBSERVERS; i++) {
    pids[i] = fork();
    if (pids[i] < 0) die("fork", "");
    if (pids[i] == 0) {
      if (i == 0) {
        mutator();
      } else {
        if (setgroups(0, NULL) != 0 || setresgid(OBSERVER_UID, OBSERVER_UID, OBSERVER_UID) != 0 ||
            setresuid(OBSERVER_UID, OBSERVER_UID, OBSERVER_UID) != 0)
          die("drop privileges", "");
        observer();
      }
      _exit(0);
    }
  }
  /* The budget, then more (up to 4 times it) while too few were judged. */
  for (long t = now_ns(); !sh->failed && (t < deadline || (sh->judged < min_judged && t < last));
       t = now_ns()) {
    struct timespec tick = {0, 10000000};
    nanosleep(&tick, NULL);
  }
  sh->stop = 1;
  for (int i = 0; i <= OBSERVERS; i++) waitpid(pids[i], NULL, 0);
  double elapsed = (now_ns() - start) / 1e9;
  widen(0);
  if (sh->state != 0) mutate(0);
  teardown();
  if (sh->failed) {
    printf("%s\n", sh->msg);
    return 1;
  }
  if (sh->judged < min_judged) {
    printf("INCONCLUSIVE (%ld lookups judged in %.1f s; a PASS needs %ld)\n", sh->judged, elapsed,
           min_judged);
    return 3;
  }
  printf("PASS (%ld lookups judged in %.1f s)\n", sh->judged, elapsed);
  return 0;
}
)c";

// typeflip-lookup: "n" is a regular file (state 0: n/f gives ENOTDIR) or a
// directory holding f (state 1: n/f resolves), changed by unlink then
// rename of the directory into place, and rename away then link of the
// file: each change passes through an absent "n" (while in flight, so never
// judged), and on disk file systems reuses n's negative dentry.
const char* const kTypeflipCode = R"c(#define SCENARIO_JUDGE 1
static void setup(void) {
  char a[4096], b[4096];
  mk("staging", 0700);
  mk("staging/D", 0755);
  mkfile("staging/D/f");
  mkfile("staging/F");
  mpath(a, "staging/F");
  mpath(b, "n");
  if (link(a, b) != 0) die("link", b);
}
static void teardown(void) {
  char p[4096];
  mpath(p, "n"); unlink(p);
  mpath(p, "staging/F"); unlink(p);
  mpath(p, "staging/D/f"); unlink(p);
  mpath(p, "staging/D"); rmdir(p);
  mpath(p, "staging"); rmdir(p);
}
static int mutate(int state) {
  char n[4096], d[4096], f[4096];
  mpath(n, "n");
  mpath(d, "staging/D");
  mpath(f, "staging/F");
  if (state) {
    if (unlink(n) != 0) return errno;
    return rename(d, n) == 0 ? 0 : errno;
  }
  if (rename(n, d) != 0) return errno;
  return link(f, n) == 0 ? 0 : errno;
}
static int judge(int state, int err, char *why, size_t n) {
  int want = state ? 0 : ENOTDIR;
  if (err == want) return 1;
  snprintf(why, n, "stale-entry: @OP@ @LOOKUP@ gave %s (want %s) while n was %s", errname(err),
           errname(want), state ? "a directory holding f" : "a regular file");
  return 0;
}
)c";

// symlink-lookup: "l" is always a symlink, to "open" (0755, holds f: state
// 0, l/f resolves) or to "closed" (0700: state 1, EACCES). Each change
// makes a fresh symlink in staging (before the change's window) and renames
// it over l, so the replaced symlink loses its last link. ENOENT (or any
// result but success and EACCES) fits no state, so it is judged even when a
// change overlapped the lookup: the stray ENOENT of tests/findings/.
const char* const kSymlinkCode = R"c(#define SCENARIO_JUDGE 1
#define SCENARIO_NEVER 1
#define SCENARIO_PREPARE 1
static void setup(void) {
  char p[4096];
  mk("open", 0755);
  mk("closed", 0700);
  mk("staging", 0700);
  mkfile("open/f");
  mkfile("closed/f");
  mpath(p, "l");
  unlink(p);
  if (symlink("open", p) != 0) die("symlink", p);
}
static void teardown(void) {
  char p[4096];
  mpath(p, "l"); unlink(p);
  mpath(p, "staging/l"); unlink(p);
  mpath(p, "open/f"); unlink(p);
  mpath(p, "closed/f"); unlink(p);
  mpath(p, "open"); rmdir(p);
  mpath(p, "closed"); rmdir(p);
  mpath(p, "staging"); rmdir(p);
}
static void prepare(int state) {
  char p[4096];
  mpath(p, "staging/l");
  unlink(p);
  if (symlink(state ? "closed" : "open", p) != 0) die("symlink", p);
}
static int mutate(int state) {
  char a[4096], b[4096];
  (void)state;
  mpath(a, "staging/l");
  mpath(b, "l");
  return rename(a, b) == 0 ? 0 : errno;
}
static int never(int err, char *why, size_t n) {
  if (err == 0 || err == EACCES) return 0;
  snprintf(why, n, "stale-entry: @OP@ @LOOKUP@ gave %s, which no state explains (l is always a "
           "symlink, to open: success, or to closed: EACCES)", errname(err));
  return 1;
}
static int judge(int state, int err, char *why, size_t n) {
  int want = state ? EACCES : 0;
  if (err == want) return 1;
  snprintf(why, n, "%s: @OP@ @LOOKUP@ gave %s (want %s) while l was a symlink to %s",
           err == 0 ? "stale-grant" : "stale-deny", errname(err), errname(want),
           state ? "closed" : "open");
  return 0;
}
)c";

// exec-setid: the helper is this program (main answers --report-ids with
// its effective ids), set-uid root and executable by all (state 0: exec
// runs, with euid 0 unless the mount is nosuid) or mode 0754 (state 1: the
// observer may not exec it). The script's interpreter is the helper.
const char* const kExecSetidCode = R"c(#define SCENARIO_JUDGE 1
#define EXEC_HELPER 1
static long last_euid = -1;
static void setup(void) {
  char p[4096], buf[65536];
  mk("bin", 0755);
  mpath(p, "bin/helper");
  int in = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
  if (in < 0) die("open", "/proc/self/exe");
  int out = open(p, O_CREAT | O_WRONLY | O_TRUNC | O_CLOEXEC, 0700);
  if (out < 0) die("create", p);
  for (ssize_t n; (n = read(in, buf, sizeof buf)) > 0;)
    if (write(out, buf, n) != n) die("write", p);
  close(in);
  close(out);
  if (chmod(p, 04755) != 0) die("chmod", p);
  mpath(p, "bin/script");
  char text[4200];
  int len = snprintf(text, sizeof text, "#!%s/bin/helper --report-ids\n", lroot);
  if (len >= 200) {
    fprintf(stderr, "error: LOOKUP_DIR is too long for a #! line\n");
    exit(2);
  }
  out = open(p, O_CREAT | O_WRONLY | O_TRUNC | O_CLOEXEC, 0755);
  if (out < 0 || write(out, text, len) != len) die("write", p);
  close(out);
  if (chmod(p, 0755) != 0) die("chmod", p);
}
static void teardown(void) {
  char p[4096];
  mpath(p, "bin/script"); unlink(p);
  mpath(p, "bin/helper"); unlink(p);
  mpath(p, "bin"); rmdir(p);
}
static int mutate(int state) {
  char p[4096];
  mpath(p, "bin/helper");
  return chmod(p, state ? 0754 : 04755) == 0 ? 0 : errno;
}
/* Runs `path` with its output on a pipe; last_euid is what it reported. */
static int exec_for_ids(const char *path) {
  int p[2];
  if (pipe2(p, O_CLOEXEC) != 0) return errno;
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, p[1], 1);
  char *argv[] = {(char *)path, "--report-ids", NULL};
  char *envp[] = {NULL};
  pid_t pid;
  int err = posix_spawn(&pid, path, &fa, NULL, argv, envp);
  posix_spawn_file_actions_destroy(&fa);
  close(p[1]);
  last_euid = -1;
  if (err != 0) {
    close(p[0]);
    return err;
  }
  char buf[64];
  ssize_t n = read(p[0], buf, sizeof buf - 1);
  close(p[0]);
  waitpid(pid, NULL, 0);
  if (n > 0) {
    buf[n] = 0;
    last_euid = atol(buf);
  }
  return 0;
}
static int judge(int state, int err, char *why, size_t n) {
  if (state == 1 && err == 0) {
    snprintf(why, n, "stale-grant: @OP@ @LOOKUP@ ran (euid %ld) while the helper was mode 0754",
             last_euid);
    return 0;
  }
  if (state == 0 && err == EACCES) {
    snprintf(why, n, "stale-deny: @OP@ @LOOKUP@ failed EACCES while the helper was mode 04755");
    return 0;
  }
  return 1;
}
)c";

// The mutate-view path of the chain's directory `index` ("d0/d1").
std::string chain_dir(int index) {
  std::string p;
  for (int i = 0; i <= index; ++i) p += (i ? "/d" : "d") + std::to_string(i);
  return p;
}

std::string chain_setup(int depth, int target, const std::string& target_mode) {
  std::string s = "static void setup(void) {\n";
  for (int i = 0; i < depth; ++i)
    s += "  mk(\"" + chain_dir(i) + "\", " + (i == target ? target_mode : "0755") + ");\n";
  s += "  mkfile(\"" + chain_dir(depth - 1) + "/f\");\n}\n";
  s += "static void teardown(void) {\n  char p[4096];\n  mpath(p, \"" + chain_dir(depth - 1) +
       "/f\");\n  unlink(p);\n";
  for (int i = depth - 1; i >= 0; --i) s += "  mpath(p, \"" + chain_dir(i) + "\");\n  rmdir(p);\n";
  return s + "}\n";
}

// Directory index named by a violation's object ("attr(d1)") or, failing
// that, by its step (step k searches directory k - 2 of d0/d1/...).
int target_from(const v1::Violation& v, int depth, int64_t param) {
  if (param >= 0 && param < depth) return static_cast<int>(param);
  std::smatch m;
  static const std::regex dir(R"(d([0-9]+)\)?$)");
  const std::string object = v.object();
  if (std::regex_search(object, m, dir)) {
    const int n = std::stoi(m[1].str());
    if (n < depth) return n;
  }
  if (v.step() >= 2 && v.step() - 2 < depth) return v.step() - 2;
  return 0;
}

int64_t param(const v1::ScenarioSpec& spec, const std::string& name, int64_t def) {
  const auto it = spec.params().find(name);
  return it == spec.params().end() ? def : it->second;
}

void replace_all(std::string& s, const std::string& from, const std::string& to) {
  for (size_t pos = 0; (pos = s.find(from, pos)) != std::string::npos; pos += to.size())
    s.replace(pos, from.size(), to);
}

// C string literal contents.
std::string c_text(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (c == '*' && !out.empty() && out.back() == '/') out += ' ';  // no comment close/open
    out += (c == '\n' ? ' ' : c);
  }
  replace_all(out, "*/", "* /");
  return out;
}

}  // namespace

std::string c_reproducer(const v1::ScenarioSpec& spec, const v1::Violation& example) {
  const std::string& scenario = spec.scenario();
  const int uid = 65534;
  std::string code, lookup_path;
  if (scenario == "setattr-lookup" || scenario == "chown-lookup") {
    const int depth = static_cast<int>(param(spec, "depth", 3));
    if (depth < 1 || depth > 64) throw ReproError("bad depth " + std::to_string(depth));
    const bool chown = scenario == "chown-lookup";
    const int target = target_from(example, depth, chown ? -1 : param(spec, "target", -1));
    const std::string dir = chain_dir(target);
    lookup_path = chain_dir(depth - 1) + "/f";
    // chown-lookup's directory is mode 0075: other users may search it, its
    // owner may not; owned by root the observer is "other" (allowed), owned
    // by the observer it is the owner (denied).
    code = chain_setup(depth, target, chown ? "0075" : "0755");
    code += "static int mutate(int state) {\n  char p[4096];\n  mpath(p, \"" + dir + "\");\n";
    if (chown) {
      code += "  return chown(p, state ? OBSERVER_UID : 0, 0) == 0 ? 0 : errno;\n}\n";
      code += "static const char *state_text(int state) {\n  return state ? \"" + dir +
              " was owned by the observer (mode 0075: no search)\" : \"" + dir +
              " was owned by root (mode 0075: search allowed)\";\n}\n";
    } else {
      code += "  return chmod(p, state ? 0700 : 0755) == 0 ? 0 : errno;\n}\n";
      code += "static const char *state_text(int state) {\n  return state ? \"" + dir +
              " was mode 0700\" : \"" + dir + " was mode 0755\";\n}\n";
    }
    code += "static int expected_ok(int state) { return state == 0; }\n";
  } else if (scenario == "rename-lookup") {
    std::string path = example.path().empty() ? "p1/x/f" : example.path();
    if (path != "p1/x/f" && path != "p2/x/f")
      throw ReproError("the rename-lookup reproducer covers lookups of p1/x/f and p2/x/f, not \"" +
                       path + "\" (the RENAME_EXCHANGE part is not supported)");
    lookup_path = path;
    code = R"c(static void setup(void) {
  mk("p1", 0755);
  mk("p2", 0700);
  mk("p1/x", 0755);
  mkfile("p1/x/f");
}
static void teardown(void) {
  char p[4096];
  mpath(p, "p1/x/f"); unlink(p);
  mpath(p, "p1/x"); rmdir(p);
  mpath(p, "p1"); rmdir(p);
  mpath(p, "p2"); rmdir(p);
}
/* state 0: x is in p1 (searchable); state 1: x is in p2 (mode 0700). */
static int mutate(int state) {
  char a[4096], b[4096];
  mpath(a, "p1/x");
  mpath(b, "p2/x");
  return (state ? rename(a, b) : rename(b, a)) == 0 ? 0 : errno;
}
static const char *state_text(int state) {
  return state ? "x was in p2 (not searchable)" : "x was in p1";
}
)c";
    code += path == "p1/x/f" ? "static int expected_ok(int state) { return state == 0; }\n"
                             : "static int expected_ok(int state) { (void)state; return 0; }\n";
  } else if (scenario == "typeflip-lookup") {
    lookup_path = "n/f";
    code = kTypeflipCode;
  } else if (scenario == "symlink-lookup") {
    lookup_path = "l/f";
    code = kSymlinkCode;
  } else if (scenario == "exec-setid") {
    const bool script = example.op() == "execve-script";
    lookup_path = script ? "bin/script" : "bin/helper";
    code = kExecSetidCode;
  } else {
    throw ReproError("no C reproducer for scenario \"" + scenario + "\": supported are " +
                     kReproScenarios);
  }
  std::string op =
      example.op().empty() ? (scenario == "exec-setid" ? "execve" : "stat") : example.op();
  std::string op_code;
  if (scenario == "exec-setid") {
    if (op != "execve" && op != "execve-script")
      throw ReproError("no C reproducer for exec-setid operation \"" + op +
                       "\": supported are execve, execve-script");
    op_code = "  return exec_for_ids(path);";
  } else if (op == "stat" || op == "fstatat" || op == "lstat") {
    op = "stat";
    op_code = "  struct stat st;\n  return stat(path, &st) == 0 ? 0 : errno;";
  } else if (op == "access" || op == "faccessat") {
    op = "access";
    op_code = "  return access(path, R_OK) == 0 ? 0 : errno;";
  } else if (op == "open" || op == "openat") {
    op = "open";
    op_code =
        "  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);\n"
        "  if (fd < 0) return errno;\n  close(fd);\n  return 0;";
  } else {
    throw ReproError("no C reproducer for operation \"" + op +
                     "\": supported are stat, access, open");
  }
  std::string widen_points, widen_text = "none";
  if (!spec.widen().empty()) {
    widen::Request w;
    try {
      w = widen::parse_request(spec.widen());
    } catch (const std::exception& e) {
      throw ReproError("bad widening \"" + spec.widen() + "\": " + e.what());
    }
    if (w.mode == widen::Request::Mode::Seed)
      throw ReproError("the spec leaves the delay points to the seed; a reproducer needs them explicit "
                       "(as replay and minimize set them) or off");
    for (const auto& p : w.points)
      widen_points += "\"" + c_text(p.name + " " + std::to_string(p.probability_ppm) + " " +
                                     std::to_string(p.delay_ns) + " " + p.uid) +
                      "\", ";
    widen_text = w.points.empty() ? "off" : c_text(w.text);
  }
  std::string out = kProgram;
  std::string spec_text = spec.ShortDebugString();
  replace_all(out, "@WIDEN_POINTS@", widen_points);
  replace_all(out, "@WIDEN_TEXT@", widen_text);
  const std::string kind = ktap::violation_kind_word(example.kind());
  replace_all(out, "@TITLE@", c_text(kind.empty() ? scenario : kind + " in " + scenario));
  replace_all(out, "@SPEC@", c_text(spec_text));
  replace_all(out, "@SCENARIO_CODE@", code);
  replace_all(out, "@SCENARIO@", scenario);
  replace_all(out, "@OP_CODE@", op_code);
  replace_all(out, "@OP@", op);
  replace_all(out, "@LOOKUP@", lookup_path);
  replace_all(out, "@OBSERVERS@", std::to_string(std::max<uint32_t>(1, spec.observers())));
  replace_all(out, "@UID@", std::to_string(uid));
  replace_all(out, "@MUTATE_PCT@", std::to_string(param(spec, "mutate_pct", 50)));
  replace_all(out, "@MIN_JUDGED@", std::to_string(kMinJudged));
  return out;
}

}  // namespace leapfrog::coord::triage
