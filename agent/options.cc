#include "agent/options.h"

#include <cmath>

#include "common/duration.h"
#include "scenarios/fs/view.h"

namespace leapfrog {

void add_run_flags(CLI::App& cmd, RunFlags& f) {
  cmd.add_option("--scenario", f.scenario, "scenario name (see `leapfrog-agent list`)")->required();
  cmd.add_option("--seed", f.seed, "seed: decides the tree, the operation mix and the delays");
  cmd.add_option("--fs", f.fs, "tmpfs | ext4 | xfs | btrfs | fuse-cached | fuse-direct, or KIND+VIEW");
  cmd.add_option("--view", f.view, "second view of the tree: bind | overlay | idmap, or overlay-lower (a positive control)");
  cmd.add_option("--dir", f.dir, "run inside this existing directory instead (your NFS, ZFS, ...)");
  cmd.add_option("--duration", f.duration, "how long to race, e.g. 5s, 500ms, 2m, 3h (at most 24h)");
  cmd.add_option("--iterations", f.iterations, "rounds to race (instead of --duration)");
  cmd.add_option("--observers", f.observers,
                 "observer processes (default: the scenario's, or chosen by the seed with --strategy seed)");
  cmd.add_option("--history", f.history, "write the recorded history here (JSON Lines)");
  cmd.add_flag("--json", f.json, "print the outcome as one JSON object");
  cmd.add_option("--format", f.format,
                 "text | json | ktap (KTAP v1: the run as one test case) | proto (the v1.Outcome "
                 "message, binary: what an agent reads from the run it started)")
      ->check(CLI::IsMember({"text", "json", "ktap", "proto"}));
  cmd.add_option("--param", f.params, "scenario parameter NAME=VALUE (repeatable)");
  cmd.add_option("--align", f.align,
                 "fuzzy (barrier + swept delays, the default) | free (no barrier) | both (half the observers "
                 "each) | seed (chosen from --seed)");
  cmd.add_option("--pin", f.pin, "pin actors to CPUs: on (the default) | off | seed (chosen from --seed)");
  cmd.add_option("--strategy", f.strategy,
                 "fixed (the defaults above) | seed: --seed chooses what --align, --observers and --pin leave "
                 "open, as in every job");
  cmd.add_option("--observer-uid", f.observer_uid, "uid the observers run as");
  cmd.add_option("--observer-gid", f.observer_gid, "gid the observers run as");
  cmd.add_option("--second-uid", f.second_uid, "acl-exec-deny: uid of the observer without an ACL entry");
  cmd.add_option("--epsilon-ns", f.epsilon_ns, "guard band added to every lookup window (clock skew)");
  cmd.add_option("--fuse-timeout", f.fuse_timeout, "fuse-cached: attribute/entry timeout in seconds");
  cmd.add_flag("--die-with-parent", f.die_with_parent, "stop the run (cleanly) when the parent process dies");
  cmd.add_option("--progress-fd", f.progress_fd,
                 "publish the live counts in the shared memory at this descriptor (connect's run children)")
      ->check(CLI::Range(0, 1 << 20));
  cmd.add_option("--test-allocate-mib", f.test_allocate_mib,
                 "TESTS ONLY: allocate and touch this many MiB before the race, to provoke the OOM killer")
      ->check(CLI::Range(0, 1 << 20));
  cmd.add_option("--widen", f.widen,
                 "kernel delay points of a --widen kernel: seed (chosen from --seed, the default), off, or "
                 "POINT:PROBABILITY_PPM:DELAY_NS:UID[,...]");
  cmd.add_option("--widen-dir", f.widen_dir, "the kernel's delay-point controls (tests only)");
}

RunOptions to_run_options(const RunFlags& f) {
  RunOptions o;
  o.scenario = f.scenario;
  o.seed = f.seed;
  if (!f.dir.empty()) {
    o.fs.kind = fs::FsKind::UserDir;
    o.fs.user_dir = f.dir;
  } else {
    try {
      const fs::FsSpec named = fs::parse_fs_name(f.fs);
      o.fs.kind = named.kind;
      o.fs.view = named.view;
      if (!f.view.empty()) {
        if (o.fs.view != fs::FsView::None) throw UsageError("--fs " + f.fs + " already names a view; drop --view");
        o.fs.view = fs::parse_fs_view(f.view);
      }
    } catch (const fs::SetupError& e) {
      throw UsageError(e.what());
    }
    if (o.fs.kind == fs::FsKind::UserDir) throw UsageError("--fs dir needs --dir PATH");
  }
  if (!f.dir.empty() && !f.view.empty()) throw UsageError("--view needs --fs, not --dir");
  if (!(f.fuse_timeout > 0 && f.fuse_timeout <= 3600)) throw UsageError("bad --fuse-timeout: want (0, 3600] seconds");
  o.fs.fuse_timeout_s = f.fuse_timeout;
  o.duration = parse_duration(f.duration);
  o.iterations = f.iterations;
  o.observers = f.observers;
  o.history_path = f.history;
  if (f.strategy != "fixed" && f.strategy != "seed")
    throw UsageError("bad --strategy \"" + f.strategy + "\", want fixed or seed");
  const bool by_seed = f.strategy == "seed";
  if (f.align.empty()) {
    if (!by_seed) o.alignment = Alignment::Fuzzy;
  } else if (f.align != "seed") {
    o.alignment = parse_alignment(f.align);
    if (!o.alignment)
      throw UsageError("bad --align \"" + f.align + "\", want fuzzy, free, both or seed");
  }
  if (f.pin == "on" || (f.pin.empty() && !by_seed))
    o.pin_cpus = true;
  else if (f.pin == "off")
    o.pin_cpus = false;
  else if (!f.pin.empty() && f.pin != "seed")
    throw UsageError("bad --pin \"" + f.pin + "\", want on, off or seed");
  o.default_observers = o.observers == 0 && !by_seed;
  if (f.observer_uid == 0) throw UsageError("--observer-uid must not be 0: observers are unprivileged");
  o.observer = Cred{f.observer_uid, f.observer_gid, {}};
  o.second_uid = f.second_uid;
  o.epsilon = f.epsilon_ns;
  for (const auto& p : f.params) {
    const auto eq = p.find('=');
    if (eq == std::string::npos || eq == 0) throw UsageError("bad --param \"" + p + "\", want NAME=VALUE");
    const std::string name = p.substr(0, eq), value = p.substr(eq + 1);
    size_t used = 0;
    long long v = 0;
    try {
      v = std::stoll(value, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used == 0 || used != value.size()) throw UsageError("bad --param \"" + p + "\": value must be an integer");
    o.params[name] = v;
  }
  return o;
}

}  // namespace leapfrog
