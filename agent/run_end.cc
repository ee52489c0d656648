#include "agent/run_end.h"

#include <dirent.h>
#include <signal.h>
#include <sys/wait.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>

namespace leapfrog {

OomCounter OomCounter::of(pid_t pid, const std::string& proc, const std::string& cgroup_root) {
  OomCounter c;
  std::ifstream in(proc + "/" + std::to_string(pid) + "/cgroup");
  std::string v1_memory, v2;
  // "4:memory:/path" (v1, the memory controller's hierarchy) or "0::/path" (v2).
  for (std::string line; std::getline(in, line);) {
    const auto a = line.find(':'), b = line.find(':', a == std::string::npos ? a : a + 1);
    if (a == std::string::npos || b == std::string::npos) continue;
    const std::string controllers = line.substr(a + 1, b - a - 1), path = line.substr(b + 1);
    std::stringstream list(controllers);
    for (std::string one; std::getline(list, one, ',');)
      if (one == "memory") v1_memory = path;
    if (controllers.empty() && line.compare(0, a, "0") == 0) v2 = path;
  }
  auto usable = [](const std::string& file) { return std::ifstream(file).good(); };
  // The root cgroup counts nothing: its files are absent or say nothing.
  if (!v1_memory.empty() && v1_memory != "/") {
    const std::string f = cgroup_root + "/memory" + v1_memory + "/memory.oom_control";
    if (usable(f)) c.file_ = f;
  }
  if (c.file_.empty() && !v2.empty() && v2 != "/") {
    for (const std::string& at : {cgroup_root, cgroup_root + "/unified"}) {
      const std::string f = at + v2 + "/memory.events";
      if (usable(f)) {
        c.file_ = f;
        break;
      }
    }
  }
  return c;
}

std::optional<uint64_t> OomCounter::read() const {
  if (file_.empty()) return std::nullopt;
  std::ifstream in(file_);
  std::string key;
  uint64_t value = 0;
  while (in >> key >> value)
    if (key == "oom_kill") return value;
  return std::nullopt;
}

std::set<pid_t> process_tree(pid_t root, const std::string& proc) {
  std::multimap<pid_t, pid_t> children;
  if (DIR* d = opendir(proc.c_str())) {
    while (dirent* e = readdir(d)) {
      char* end = nullptr;
      const long pid = std::strtol(e->d_name, &end, 10);
      if (pid <= 0 || *end != '\0') continue;
      std::ifstream in(proc + "/" + e->d_name + "/stat");
      std::string stat;
      std::getline(in, stat);
      // "PID (COMM) STATE PPID ...": the name may hold spaces and parentheses.
      const auto close = stat.rfind(')');
      if (close == std::string::npos) continue;
      std::istringstream rest(stat.substr(close + 1));
      std::string state;
      long ppid = 0;
      if (rest >> state >> ppid) children.emplace(static_cast<pid_t>(ppid), static_cast<pid_t>(pid));
    }
    closedir(d);
  }
  std::set<pid_t> tree{root};
  std::vector<pid_t> todo{root};
  while (!todo.empty()) {
    const pid_t p = todo.back();
    todo.pop_back();
    const auto [from, to] = children.equal_range(p);
    for (auto it = from; it != to; ++it)
      if (tree.insert(it->second).second) todo.push_back(it->second);
  }
  return tree;
}

int run_signal(int wait_status) {
  if (WIFSIGNALED(wait_status)) return WTERMSIG(wait_status);
  // The run exits 0 to 3 by itself; 128 + N is its sandbox reporting the
  // signal N that ended the child it waited for (fs::run_sandboxed).
  if (WIFEXITED(wait_status) && WEXITSTATUS(wait_status) > 128 &&
      WEXITSTATUS(wait_status) < 128 + NSIG)
    return WEXITSTATUS(wait_status) - 128;
  return 0;
}

std::optional<v1::RunKilled> run_killed(const RunEndFacts& f) {
  const auto kills = console::oom_kills_in(f.kernel_log);
  for (const auto& k : kills) {
    if (!f.pids.count(k.pid)) continue;
    v1::RunKilled out;
    out.set_reason(v1::RUN_KILL_OUT_OF_MEMORY);
    out.set_signal(SIGKILL);
    out.set_line(k.line);
    return out;
  }
  if (f.killed_by_agent) return std::nullopt;
  const int sig = run_signal(f.wait_status);
  if (sig == 0) return std::nullopt;
  v1::RunKilled out;
  out.set_signal(sig);
  if (sig == SIGKILL && f.oom_kills_before && f.oom_kills_after &&
      *f.oom_kills_after > *f.oom_kills_before) {
    out.set_reason(v1::RUN_KILL_OUT_OF_MEMORY);
    // The victim is not among the processes seen (it died before the agent
    // looked): a line of the log that names a process of this name, or what
    // the cgroup counted.
    std::string line;
    for (const auto& k : kills)
      if (k.comm.rfind("leapfrog-agent", 0) == 0) line = k.line;
    if (line.empty())
      line = "the memory cgroup counted " + std::to_string(*f.oom_kills_after - *f.oom_kills_before) +
             " OOM kill(s) during the run (oom_kill in " + f.counter_file + ")";
    out.set_line(line);
    return out;
  }
  out.set_reason(v1::RUN_KILL_SIGNAL);
  return out;
}

std::string run_killed_message(const v1::RunKilled& k) {
  switch (k.reason()) {
    case v1::RUN_KILL_OUT_OF_MEMORY:
      return "out of memory: the OOM killer killed the run" +
             (k.line().empty() ? std::string() : " (" + k.line() + ")");
    case v1::RUN_KILL_SIGNAL: {
      const char* name = sigabbrev_np(k.signal());
      return "the run was killed by signal " + std::to_string(k.signal()) + " (" +
             (name ? std::string("SIG") + name : std::to_string(k.signal())) + ")";
    }
    case v1::RUN_KILL_KERNEL_CRASH:
      return "the kernel crashed during the run" + (k.line().empty() ? "" : ": " + k.line());
    case v1::RUN_KILL_DEADLINE:
      return "the run exceeded its deadline and was killed";
    default:
      return "the run was killed";
  }
}

}  // namespace leapfrog
