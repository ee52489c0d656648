#pragma once
// The result of one run, as printed by `leapfrog-agent run` and later stored by
// the coordinator.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "scenarios/oracle.h"
#include "scenarios/race.h"
#include "scenarios/strategy.h"

namespace leapfrog {

// One will-it-scale style measurement: a testcase at a task count, sampled
// after a warm-up.
struct ScalePoint {
  std::string test;  // e.g. "access-same", "lseek1"
  std::string mode;  // "processes" or "threads"
  uint32_t tasks = 0;
  double ops_per_sec = 0;       // mean over the samples, summed over tasks
  std::vector<double> samples;  // ops/s of each timed sample (empty: only the mean is known)
  double stddev = 0;
  double ci_low = 0, ci_high = 0;  // 95 % interval of the mean
  double idle_pct = -1;    // CPU idle over the samples (will-it-scale's *_idle); -1: unknown
  double other_load = -1;  // CPUs' worth of time used by everything but the tasks; -1: unknown
  double task_cpu_s = 0;   // CPU time the tasks ran over the samples (0: unknown)
  double window_s = 0;     // wall time of the samples (0: unknown)
  // CPUs busy on the VM's host outside this VM over the samples, as the VM
  // launcher saw it (scale::HostView); -1: not in a VM, or the host did not say.
  double host_load = -1;
};

// The machine a lookup-scale run measured on, and whether it was fit to.
struct ScaleHost {
  uint32_t cpus = 0;                  // CPUs the tasks could use
  double sample_s = 0;                // length of one timed sample
  double warmup_s = 0;                // warm-up before the samples of each point
  double max_other_load = 0;          // the highest other_load of any point
  double load_average = -1;           // 1-minute load average at the end
  // In a VM: what its launcher said about the host (-1 / 0 / "": not in a
  // VM, or an older launcher). A guest's own /proc/stat cannot see the host.
  double max_host_load = -1;          // the highest host_load of any point
  uint32_t host_cpus = 0;             // the host's CPUs
  uint32_t vcpus = 0;                 // the VM's vCPUs
  std::string vcpu_pinning;           // host CPUs the vCPUs are pinned to, "none" when unpinned
  // The boot the run measured in (/proc/sys/kernel/random/boot_id; "" when
  // unreadable): runs of one boot are one replicate (docs/scaling.md).
  std::string boot_id;
  std::vector<std::string> warnings;  // "3 tasks on 2 CPUs", "loaded: ..."
};

// One kernel delay point as a run set it (kernels built with `leapfrog
// kernel build --widen`; see docs/kernels.md).
struct WidenPoint {
  std::string name;  // e.g. "may_lookup_after"
  uint32_t probability_ppm = 0;
  uint32_t delay_ns = 0;
  std::string uid = "any";  // fsuid filter: "any" or a number
  uint64_t hits = 0;        // delays the kernel took during the run
  // What those delays took on the kernel's clock; unset when the kernel
  // does not say (a widen build or kprobe module from before the count).
  std::optional<uint64_t> spent_ns;
};

// The window widening of a run: on with the points it set, or off and why.
struct Widening {
  bool on = false;
  std::string reason;  // off: why; on: what chose the points ("seed 7", "--widen")
  std::vector<WidenPoint> points;
  // Bad control values tried before the run and how the kernel refused
  // each, e.g. "d_move probability \"-1\": refused (Invalid argument)".
  std::vector<std::string> control_checks;
};

struct Outcome {
  std::string scenario;
  uint64_t seed = 0;
  std::string fs;
  std::string verdict = "pass";  // pass | violation | inconclusive | error
  std::string error;
  std::map<std::string, int64_t> params;
  uint32_t observers = 0;
  // How the run raced (alignment, observers, pinning; the widening in one
  // line), resolved: replay passes it back explicitly.
  Strategy strategy;
  uint64_t ops = 0;
  uint64_t mutations = 0;
  uint64_t rounds = 0;
  uint64_t race_window_hits = 0;
  double duration_s = 0;
  // Wall time to provision the file system under test (mkfs, mount, FUSE
  // daemon), before the scenario's own setup.
  double setup_s = 0;
  double ops_per_sec = 0;
  std::string clock_source;
  TimeNs epsilon_ns = 0;
  TimingStats timing;
  // Judging fell behind the race: the actors waited this long in all (summed
  // over actors), this many times, for it to take their records.
  double backpressure_s = 0;
  uint64_t backpressure_waits = 0;
  CheckResult check;
  // Detection power: time from the first recorded operation to the end of the
  // first violating one (-1: no violation), and the lookups (or offset
  // operations) completed by then.
  TimeNs first_violation_ns = -1;
  uint64_t ops_to_first_violation = 0;
  std::vector<ScalePoint> scale;
  ScaleHost scale_host;  // set with scale
  std::vector<std::string> notes;
  Widening widening;
  // Peak resident set sizes in bytes (getrusage ru_maxrss) of the process
  // that ran the scenario (the sandbox child: setup, recording, judging),
  // and of the largest child it waited for (actors, mkfs, the FUSE daemon);
  // 0: not measured. Set by `leapfrog-agent run` as the run ends.
  uint64_t peak_rss_bytes = 0;
  uint64_t children_peak_rss_bytes = 0;
};

// Fills first_violation_ns and ops_to_first_violation from o.check and the
// judged history.
void note_detection(Outcome& o, const History& h);

nlohmann::json to_json(const Outcome& o);
nlohmann::json to_json(const Violation& v);
nlohmann::json to_json(const Widening& w);
nlohmann::json to_json(const Strategy& s);
nlohmann::json to_json(const ScalePoint& p);
// Reads a point back from to_json (older outcomes lack the samples). Throws
// nlohmann::json::exception when a required field is missing.
ScalePoint scale_point_from_json(const nlohmann::json& j);
// Widening in one line, for Strategy::widening: "off (why)" or
// "on (what chose them): POINT PPMppm NSns uid UID, ...".
std::string summary(const Widening& w);
// A few lines for a terminal.
std::string to_text(const Outcome& o);
// Exit code of `leapfrog-agent run` and `check`: 0 clean, 1 violations,
// 2 error, 3 inconclusive (nothing judged, or the search budget ran out).
int exit_code(const Outcome& o);

}  // namespace leapfrog
