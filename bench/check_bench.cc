// `leapfrog-agent check` end to end against judging alone (issue 19 §3): one
// legal history (bench/legal_history.h) written to a file, then, side by side
// in one run,
//   judge     check_history on the history in memory;
//   read      read_history of the file alone;
//   stream    check_history_stream (what `check` does, in process): one
//             pass, lookups judged in batches as their windows close;
//   whole     read_history + check_history (the history whole in memory);
//   agent     the leapfrog-agent binary: `check FILE --json`, its peak RSS;
//   live      the records fed one by one, in invoke order, to a WindowJudge
//             (what a run does as it races: batches of 16,384 judged as
//             their windows close, on a second thread), against judge
//             (target >= 0.95);
// best of three each, in lookups per second, and the ratio of end to end to
// judging alone (target >= 0.5); also the CPU time of judging alone and of
// the agent (both its threads), which a loaded machine disturbs less.
//   leapfrog_check_bench [--ops N] [--dir DIR] [--reference 0] [--batch LOOKUPS]
// (--reference 0 skips the slow nlohmann reader's row.)

#include <fcntl.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "bench/legal_history.h"
#include "scenarios/history_io.h"
#include "scenarios/history_stream.h"
#include "scenarios/oracle.h"
#include "scenarios/window_judge.h"

extern char** environ;

namespace leapfrog {
namespace {

double seconds_of(const std::function<void()>& f) {
  double best = 1e300;
  for (int i = 0; i < 3; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    f();
    best = std::min(best,
                    std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  return best;
}

History read_file(const std::string& path, bool fast) {
  std::ifstream in(path, std::ios::binary);
  return fast ? read_history(in) : read_history_reference(in);
}

// Runs the agent's check on `path`; returns its exit status and peak RSS (KiB).
// Also the least CPU time (user + system) of a run, in seconds.
int run_agent(const std::string& path, long& max_rss_kib, double& min_cpu) {
  const std::string agent = LEAPFROG_AGENT;
  std::vector<std::string> args = {agent, "check", path, "--json"};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
  pid_t pid = 0;
  if (posix_spawn(&pid, agent.c_str(), &fa, nullptr, argv.data(), environ) != 0) {
    std::perror("posix_spawn");
    std::exit(2);
  }
  posix_spawn_file_actions_destroy(&fa);
  int status = 0;
  rusage ru{};
  wait4(pid, &status, 0, &ru);
  max_rss_kib = std::max(max_rss_kib, ru.ru_maxrss);
  const double cpu = static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
                     static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
  min_cpu = std::min(min_cpu, cpu);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
}

int main_(int argc, char** argv) {
  int64_t ops = 2'000'000;
  std::string dir = "/var/tmp";
  bool with_reference = true;
  size_t batch = size_t{1} << 14;  // what a live run judges at a time (lookup_race.cc kLiveBatch)
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--ops")
      ops = std::atoll(argv[i + 1]);
    else if (a == "--dir")
      dir = argv[i + 1];
    else if (a == "--reference")
      with_reference = std::atoi(argv[i + 1]) != 0;
    else if (a == "--batch")
      batch = static_cast<size_t>(std::atoll(argv[i + 1]));
  }
  std::unique_ptr<History> h = bench::make_history(ops);
  const std::string path = dir + "/leapfrog-check-bench-" + std::to_string(::getpid()) + ".jsonl";
  {
    std::ofstream out(path, std::ios::binary);
    write_history(*h, out);
  }
  const double mb = static_cast<double>(std::filesystem::file_size(path)) / 1e6;
  const double lookups = static_cast<double>(h->lookups.size());
  const size_t n_lookups = h->lookups.size(), n_mutations = h->mutations.size();
  // The agent first, while this process holds the least. (Its peak RSS as
  // wait4 reports it still counts this process's high-water mark: spawned by
  // vfork, it shares our pages until it execs. /usr/bin/time -v on the agent
  // alone gives its own.)
  h.reset();
  long rss = 0;
  int rc = 0;
  double agent_cpu = 1e300;
  const double agent = seconds_of([&] { rc |= run_agent(path, rss, agent_cpu); });
  h = bench::make_history(ops);

  uint64_t violations = 0;
  // On a loaded machine wall time is not steady: CPU time too (one thread).
  double judge_cpu = 1e300;
  const double judge = seconds_of([&] {
    timespec a{}, b{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &a);
    violations += check_history(*h).violation_count;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &b);
    judge_cpu = std::min(judge_cpu, static_cast<double>(b.tv_sec - a.tv_sec) +
                                        static_cast<double>(b.tv_nsec - a.tv_nsec) / 1e9);
  });
  uint64_t live_peak = 0;
  const double live = seconds_of([&] {
    WindowOptions opts;
    opts.batch = batch;
    WindowJudge judge(h->header, h->effects, h->queries, opts);
    size_t m = 0;
    for (const LookupRecord& l : h->lookups) {
      while (m < h->mutations.size() && h->mutations[m].invoke <= l.invoke)
        judge.add(h->mutations[m++]);
      judge.add(l);
    }
    while (m < h->mutations.size()) judge.add(h->mutations[m++]);
    violations += judge.finish().violation_count;
    live_peak = judge.peak_retained();
  });
  size_t read_lookups = 0;
  const double read = seconds_of([&] { read_lookups = read_file(path, true).lookups.size(); });
  StreamStats stats;
  const double stream = seconds_of([&] {
    std::ifstream in(path, std::ios::binary);
    const StreamCheck sc = check_history_stream(in);
    violations += sc.check.violation_count;
    stats = sc.stats;
  });
  const double in_proc =
      seconds_of([&] { violations += check_history(read_file(path, true)).violation_count; });
  // The nlohmann reader once, for comparison (it is slow).
  const auto t0 = std::chrono::steady_clock::now();
  const size_t ref_lookups = with_reference ? read_file(path, false).lookups.size() : n_lookups;
  const double reference =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::filesystem::remove(path);
  if (violations || rc != 0 || read_lookups != n_lookups || ref_lookups != read_lookups ||
      stats.whole) {
    std::fprintf(stderr,
                 "the legal history was misjudged or misread (violations %llu, agent exit %d, "
                 "judged whole: %s)\n",
                 static_cast<unsigned long long>(violations), rc,
                 stats.whole ? stats.why.c_str() : "no");
    return 1;
  }
  std::printf("history: %.0f lookups, %zu mutations, %.0f MB\n", lookups, n_mutations, mb);
  std::printf("%-38s %9s %14s\n", "", "seconds", "lookups/s");
  auto row = [&](const char* name, double s) {
    std::printf("%-38s %9.3f %14.0f\n", name, s, lookups / s);
  };
  row("judge alone (in memory)", judge);
  row("judge as a run goes (WindowJudge)", live);
  row("read alone (simdjson On-Demand)", read);
  if (with_reference) row("read alone (nlohmann reference)", reference);
  row("read + judge, streaming (in process)", stream);
  row("read whole, then judge (in process)", in_proc);
  row("leapfrog-agent check (end to end)", agent);
  std::printf("ratio end to end / judge alone: %.2f (streaming in process %.2f; target >= 0.5)\n",
              judge / agent, judge / stream);
  std::printf(
      "CPU seconds: judge alone %.3f, leapfrog-agent check %.3f (both threads); ratio %.2f\n",
      judge_cpu, agent_cpu, judge_cpu / agent_cpu);
  std::printf("ratio judging as a run goes / judge alone: %.2f (target >= 0.95; %llu records "
              "held at most)\n",
              judge / live, static_cast<unsigned long long>(live_peak));
  std::printf("streaming: %llu batches, at most %llu records held\n",
              static_cast<unsigned long long>(stats.batches),
              static_cast<unsigned long long>(stats.peak_retained));
  std::printf("leapfrog-agent check peak RSS: %.0f MB (with this process's own high-water mark)\n",
              static_cast<double>(rss) / 1024);
  return 0;
}

}  // namespace
}  // namespace leapfrog

int main(int argc, char** argv) {
  return leapfrog::main_(argc, argv);
}
