// The reproducer is a fixed C program (kProgram) with the scenario's setup,
// mutation and expected results pasted in. Its judgement is conservative: a
// lookup is judged only when no mutation was in flight at any time between
// just before it was issued and just after it returned (a generation counter
// in shared memory, odd while a mutation runs), so the state it must reflect
// is exactly one.

#include "coordinator/triage/repro_c.h"

#include <algorithm>
#include <regex>

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
 * SECONDS      time budget (default 10)
 * Observers run as uid/gid @UID@. A lookup is judged only when no mutation
 * was in flight from just before it started to just after it returned; it
 * must then match the one state current all along, else "FAIL ..." (exit 1).
 * "PASS" (exit 0) when the budget runs out without a violation.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <signal.h>
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

static char mroot[4096], lroot[4096];

struct shared {
  volatile long gen;   /* odd while a mutation is in flight */
  volatile int state;  /* the state the last completed mutation set */
  volatile int failed;
  volatile long judged;
  volatile long changed_ns; /* when the last mutation completed */
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

/* ---- the scenario: @SCENARIO@ ---- */
@SCENARIO_CODE@

/* ---- the lookup: @OP@ of @LOOKUP@ ---- */
static int lookup(const char *path) {
@OP_CODE@
}

static void observer(long deadline) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", lroot, "@LOOKUP@");
  while (now_ns() < deadline && !sh->failed) {
    long g1 = __atomic_load_n(&sh->gen, __ATOMIC_ACQUIRE);
    int st = sh->state;
    long a = now_ns();
    int err = lookup(path);
    long b = now_ns();
    long g2 = __atomic_load_n(&sh->gen, __ATOMIC_ACQUIRE);
    if (g1 != g2 || (g1 & 1)) continue; /* a mutation overlapped: not judged */
    __atomic_add_fetch(&sh->judged, 1, __ATOMIC_RELAXED);
    if (err != 0 && err != EACCES && err != ENOENT) continue;
    int want = expected_ok(st);
    if ((err == 0) != want && !__atomic_exchange_n(&sh->failed, 1, __ATOMIC_ACQ_REL)) {
      snprintf(sh->msg, sizeof sh->msg,
               "FAIL %s: @OP@ %s %s while %s for its whole window (%ld ns, %ld ns after the last change completed)",
               err == 0 ? "stale-grant" : "stale-deny", "@LOOKUP@",
               err == 0 ? "succeeded" : (err == EACCES ? "failed EACCES" : "failed ENOENT"),
               state_text(st), b - a, a - sh->changed_ns);
    }
  }
}

static void mutator(long deadline) {
  unsigned seed = (unsigned)getpid();
  while (now_ns() < deadline && !sh->failed) {
    struct timespec pause = {0, 20000 + rand_r(&seed) % 200000};
    nanosleep(&pause, NULL);
    if ((int)(rand_r(&seed) % 100) >= MUTATE_PCT) continue;
    int next = !sh->state;
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
  sh = mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (sh == MAP_FAILED) die("mmap", "shared");
  memset((void *)sh, 0, sizeof *sh);
  setup();
  sync();
  long deadline = now_ns() + (long)(seconds * 1e9);
  pid_t pids[OBSERVERS + 1];
  for (int i = 0; i <= OBSERVERS; i++) {
    pids[i] = fork();
    if (pids[i] < 0) die("fork", "");
    if (pids[i] == 0) {
      if (i == 0) {
        mutator(deadline);
      } else {
        if (setgroups(0, NULL) != 0 || setresgid(OBSERVER_UID, OBSERVER_UID, OBSERVER_UID) != 0 ||
            setresuid(OBSERVER_UID, OBSERVER_UID, OBSERVER_UID) != 0)
          die("drop privileges", "");
        observer(deadline);
      }
      _exit(0);
    }
  }
  for (int i = 0; i <= OBSERVERS; i++) waitpid(pids[i], NULL, 0);
  if (sh->state != 0) mutate(0);
  teardown();
  if (sh->failed) {
    printf("%s\n", sh->msg);
    return 1;
  }
  printf("PASS (%ld lookups judged in %.1f s)\n", sh->judged, seconds);
  return 0;
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
  } else {
    throw ReproError("no C reproducer for scenario \"" + scenario + "\": supported are " +
                     kReproScenarios);
  }
  std::string op = example.op().empty() ? "stat" : example.op();
  std::string op_code;
  if (op == "stat" || op == "fstatat" || op == "lstat") {
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
  std::string out = kProgram;
  std::string spec_text = spec.ShortDebugString();
  replace_all(out, "@TITLE@",
              c_text(example.kind().empty() ? scenario : example.kind() + " in " + scenario));
  replace_all(out, "@SPEC@", c_text(spec_text));
  replace_all(out, "@SCENARIO_CODE@", code);
  replace_all(out, "@SCENARIO@", scenario);
  replace_all(out, "@OP_CODE@", op_code);
  replace_all(out, "@OP@", op);
  replace_all(out, "@LOOKUP@", lookup_path);
  replace_all(out, "@OBSERVERS@", std::to_string(std::max<uint32_t>(1, spec.observers())));
  replace_all(out, "@UID@", std::to_string(uid));
  replace_all(out, "@MUTATE_PCT@", std::to_string(param(spec, "mutate_pct", 50)));
  return out;
}

}  // namespace leapfrog::coord::triage
