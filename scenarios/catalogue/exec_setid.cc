// exec-setid: the mutator flips a helper program's set-uid and set-gid bits,
// its owner, group and exec bit, and search on its directory, one syscall at
// a time; observers execve the helper and a "#!" script that runs it. The
// helper (report_ids, a static program the library embeds) writes the
// effective ids it ran with, and the oracle judges them against the
// helper's attributes possible in the window: a gain of privilege no version
// explains, or an exec that every version denied, is a stale-grant (like
// Linux f50733b45d86, the ToCToU between exec's permission check and its
// use of the set-id bits); EACCES that every version allows is a stale-deny.
//
// The script's interpreter is "bin/helper", relative to the observer's cwd
// (the lookup root), and the script never changes: its exec is judged as
// the walk to the helper (search on bin, exec on the helper, the ids).

#include <fcntl.h>
#include <spawn.h>
#include <sys/prctl.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "scenarios/catalogue/catalogue.h"
#include "scenarios/catalogue/common.h"
#include "scenarios/catalogue/helper/report_ids.h"

namespace leapfrog::catalogue {
namespace {

// Runs `path` with standard output on a pipe and reads "EUID EGID".
// Returns 0 and the ids, the exec's errno, or EIO for an unreadable report
// (outside the model: unjudged).
int exec_for_ids(const char* path, uint64_t& euid, uint64_t& egid) {
  int p[2];
  if (pipe2(p, O_CLOEXEC) != 0) return errno;
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, p[1], 1);
  char* argv[] = {const_cast<char*>(path), nullptr};
  char* envp[] = {nullptr};
  pid_t pid = -1;
  const int err = posix_spawn(&pid, path, &fa, nullptr, argv, envp);
  posix_spawn_file_actions_destroy(&fa);
  close(p[1]);
  if (err != 0) {
    close(p[0]);
    return err;
  }
  char buf[64];
  size_t got = 0;
  for (ssize_t n; got < sizeof buf - 1 && (n = read(p[0], buf + got, sizeof buf - 1 - got)) != 0;) {
    if (n < 0) {
      if (errno == EINTR) continue;
      break;
    }
    got += static_cast<size_t>(n);
  }
  close(p[0]);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  buf[got] = '\0';
  char* end = nullptr;
  euid = std::strtoull(buf, &end, 10);
  if (end == buf || *end != ' ') return EIO;
  char* end2 = nullptr;
  egid = std::strtoull(end + 1, &end2, 10);
  if (end2 == end + 1 || *end2 != '\n') return EIO;
  return 0;
}

QueryTemplate exec_query(const char* op, const std::string& run_path) {
  Query q;
  q.op = op;
  q.start = 0;
  q.path = {"bin", "helper"};
  q.final_access = kMayExec;
  QueryTemplate t{q, nullptr, LookupCall::Custom, AT_FDCWD, run_path};
  t.run = [run_path](RawRecord& r) {
    uint64_t euid = 0, egid = 0;
    timed(r, [&] { return exec_for_ids(run_path.c_str(), euid, egid); });
    if (r.err == 0) {
      r.a = euid;
      r.b = egid;
    }
  };
  t.reports_ids = true;
  return t;
}

void write_file(const std::string& path, const void* data, size_t n, mode_t mode) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
  if (fd < 0) throw fs::SetupError("create \"" + path + "\": " + std::strerror(errno));
  const ssize_t w = ::write(fd, data, n);
  ::close(fd);
  if (w != static_cast<ssize_t>(n) || ::chmod(path.c_str(), mode) != 0)
    throw fs::SetupError("write \"" + path + "\": " + std::strerror(errno));
}

class ExecSetid : public Scenario {
 public:
  const char* name() const override { return "exec-setid"; }
  const char* summary() const override {
    return "flip a helper's set-uid/set-gid bits, owner and exec bit and search on its directory "
           "while observers execve it and a script that runs it";
  }
  std::vector<ParamSpec> params() const override {
    return {
        {"script", 1, 0, 1, "observers also execve a #! script whose interpreter is the helper"},
        {"toctou", 0, 0, 1,
         "1: only the change that grants set-uid and revokes exec at once (0755 <-> 04754, owned "
         "by the second uid), every round: the window between exec's permission check and its "
         "use of the set-id bits (Linux f50733b45d86)"},
        mutate_pct_param()};
  }
  Outcome run(RunContext& ctx) const override {
    // Under no_new_privs (inherited by every observer) exec never applies
    // set-id bits: a run would check nothing of what this scenario is for.
    if (prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0) == 1)
      throw fs::SetupError(
          "exec-setid: the agent runs under no_new_privs, so exec never applies set-id bits; "
          "run it without no_new_privs");
    const uint32_t other = ctx.opts.second_uid;  // owner and group the helper is given away to
    DiskTree disk(ctx.ws);
    RacePlan plan = new_plan(ctx);
    TreeModel& t = plan.model;
    disk.mkdir("bin", 0755);
    write_file(disk.m("bin/helper"), kReportIds, kReportIdsSize, 0755);
    const std::string script = "#!bin/helper\n";
    write_file(disk.m("bin/script"), script.data(), script.size(), 0755);
    const NodeId bin = t.add_dir(t.root(), "bin", mode_attr(0755));
    const bool toctou = ctx.param("toctou") != 0;
    if (toctou && ::chown(disk.m("bin/helper").c_str(), other, 0) != 0)
      throw fs::SetupError(std::string("chown bin/helper: ") + std::strerror(errno));
    const NodeId helper = t.add_file(bin, "helper", mode_attr(0755, toctou ? other : 0, 0));
    identify(t, helper, disk.l("bin/helper"));

    const std::string hp = disk.m("bin/helper"), bp = disk.m("bin");
    auto chmod_h = [&](mode_t mode, uint32_t uid, uint32_t gid) {
      return MutationTemplate{t.chmod(helper, mode_attr(mode, uid, gid)),
                              [hp, mode] { return ::chmod(hp.c_str(), mode) == 0 ? 0 : errno; },
                              {}};
    };
    // Chown only while no set-id bit is set: chown clears them (a third
    // state the model would have to name).
    auto chown_h = [&](mode_t mode, uint32_t uid, uint32_t gid) {
      return MutationTemplate{
          t.chown_effect(helper, mode_attr(mode, uid, gid)),
          [hp, uid, gid] { return ::chown(hp.c_str(), uid, gid) == 0 ? 0 : errno; },
          {}};
    };
    plan.mutations = {
        chmod_h(04755, 0, 0),      // set-uid root
        chmod_h(0755, 0, 0),       // revoked
        chown_h(0755, 0, other),   // group given away
        chmod_h(02755, 0, other),  // set-gid to it
        chmod_h(0755, 0, other),   // revoked
        chown_h(0755, other, 0),   // owner given away
        chmod_h(04755, other, 0),  // set-uid to it
        chmod_h(04754, other, 0),  // exec revoked for others, set-uid kept
        chmod_h(0755, other, 0),   // set-uid revoked, exec back
        // Set-uid granted and exec revoked in one chmod: an exec that passed
        // its permission check on 0755 must not pick up the set-uid bit of
        // 04754 (the window f50733b45d86 closed).
        chmod_h(04754, other, 0),
        chmod_h(0755, other, 0),   // both undone
        chown_h(0755, 0, 0),       // back to root
        chmod_template(t, bin, bp, 0700),
        chmod_template(t, bin, bp, 0755),
    };
    if (toctou) plan.mutations = {chmod_h(04754, other, 0), chmod_h(0755, other, 0)};
    plan.queries.push_back(exec_query("execve", "bin/helper"));
    if (ctx.param("script") != 0) plan.queries.push_back(exec_query("execve-script", "bin/script"));
    assign_observers(plan, ctx);
    Outcome out = run_lookup_race(plan, ctx);
    struct statvfs sv;
    if (statvfs(disk.lookup_root().c_str(), &sv) == 0 && (sv.f_flag & ST_NOSUID))
      out.notes.push_back(
          "the lookup view is mounted nosuid: set-id bits never apply there, so only exec "
          "permission was judged");
    return out;
  }
};

}  // namespace

std::unique_ptr<Scenario> make_exec_setid() {
  return std::make_unique<ExecSetid>();
}

}  // namespace leapfrog::catalogue
