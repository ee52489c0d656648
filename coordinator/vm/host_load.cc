#include "coordinator/vm/host_load.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "scenarios/catalogue/scale_host.h"

namespace leapfrog::vm {

bool process_ticks(pid_t pid, uint64_t& out) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(f, line)) return false;
  // The command may hold spaces and parentheses: fields start after the last ')'.
  const auto close = line.rfind(')');
  if (close == std::string::npos || close + 2 > line.size()) return false;
  std::istringstream rest(line.substr(close + 2));
  std::string field;
  for (int i = 3; i <= 13; ++i)  // state .. cmajflt, then utime (14) and stime (15)
    if (!(rest >> field)) return false;
  uint64_t utime = 0, stime = 0;
  if (!(rest >> utime >> stime)) return false;
  out = utime + stime;
  return true;
}

std::string HostLoadMeter::line_for(pid_t qemu_pid, uint32_t vcpus) {
  Reading now;
  now.at = std::chrono::steady_clock::now();
  const catalogue::scale::CpuTimes host = catalogue::scale::read_cpu_times();
  if (host.busy + host.idle == 0 || !process_ticks(qemu_pid, now.qemu_ticks)) return "";
  now.host_busy_ticks = host.busy;
  const auto it = last_.find(qemu_pid);
  if (it == last_.end()) {
    last_[qemu_pid] = now;
    return "";
  }
  const Reading before = it->second;
  it->second = now;
  const double wall_s = std::chrono::duration<double>(now.at - before.at).count();
  if (wall_s <= 0) return "";
  const double tick = 1.0 / static_cast<double>(sysconf(_SC_CLK_TCK));
  const double host_busy = static_cast<double>(
      now.host_busy_ticks - std::min(now.host_busy_ticks, before.host_busy_ticks));
  const double qemu =
      static_cast<double>(now.qemu_ticks - std::min(now.qemu_ticks, before.qemu_ticks));
  const double other = std::max(0.0, (host_busy - qemu) * tick / wall_s);
  const long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  char buf[160];
  std::snprintf(buf, sizeof buf, "lf-host other=%.2f host_cpus=%ld vcpus=%u pinning=none end\n",
                other, cpus, vcpus);
  return buf;
}

}  // namespace leapfrog::vm
