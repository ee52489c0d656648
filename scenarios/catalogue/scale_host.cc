#include "scenarios/catalogue/scale_host.h"

#include <sched.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <tuple>

namespace leapfrog::catalogue::scale {
namespace {

// The CPUs of a sysfs list such as "0-1,4".
std::vector<int> parse_cpu_list(const std::string& s) {
  std::vector<int> out;
  std::stringstream in(s);
  std::string part;
  while (std::getline(in, part, ',')) {
    int lo = 0, hi = 0;
    const auto dash = part.find('-');
    try {
      lo = std::stoi(part.substr(0, dash));
      hi = dash == std::string::npos ? lo : std::stoi(part.substr(dash + 1));
    } catch (const std::exception&) {
      continue;
    }
    for (int c = lo; c <= hi; ++c) out.push_back(c);
  }
  return out;
}

}  // namespace

std::vector<int> cpu_order() {
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  if (sched_getaffinity(0, sizeof allowed, &allowed) != 0) return {0};
  // (thread index within its core, cpu)
  std::vector<std::tuple<int, int>> ranked;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (!CPU_ISSET(c, &allowed)) continue;
    std::ifstream f("/sys/devices/system/cpu/cpu" + std::to_string(c) +
                    "/topology/thread_siblings_list");
    std::string line;
    int rank = 0;
    if (std::getline(f, line)) {
      const auto siblings = parse_cpu_list(line);
      const auto at = std::find(siblings.begin(), siblings.end(), c);
      if (at != siblings.end()) rank = static_cast<int>(at - siblings.begin());
    }
    ranked.emplace_back(rank, c);
  }
  std::sort(ranked.begin(), ranked.end());
  std::vector<int> out;
  for (const auto& [rank, c] : ranked) out.push_back(c);
  if (out.empty()) out.push_back(0);
  return out;
}

bool pin_to(int cpu) {
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(cpu, &one);
  return sched_setaffinity(0, sizeof one, &one) == 0;
}

CpuTimes read_cpu_times() {
  std::ifstream f("/proc/stat");
  std::string name;
  uint64_t user = 0, nice = 0, system = 0, idle = 0, iowait = 0, irq = 0, softirq = 0, steal = 0;
  f >> name >> user >> nice >> system >> idle >> iowait >> irq >> softirq >> steal;
  if (name != "cpu") return {};
  return CpuTimes{user + nice + system + irq + softirq + steal, idle + iowait};
}

double idle_pct(const CpuTimes& before, const CpuTimes& after) {
  const double busy = static_cast<double>(after.busy - before.busy);
  const double idle = static_cast<double>(after.idle - before.idle);
  if (busy + idle <= 0) return 100;
  return 100 * idle / (busy + idle);
}

uint64_t thread_cpu_ns(pid_t pid, pid_t tid) {
  const std::string dir = "/proc/" + std::to_string(pid) + "/task/" + std::to_string(tid);
  {
    std::ifstream f(dir + "/schedstat");
    uint64_t ns = 0;
    if (f >> ns) return ns;
  }
  std::ifstream f(dir + "/stat");
  std::string line;
  if (!std::getline(f, line)) return 0;
  // The command name may hold spaces and parentheses: fields start after the last ')'.
  const auto close = line.rfind(')');
  if (close == std::string::npos) return 0;
  std::stringstream rest(line.substr(close + 2));
  std::string field;
  uint64_t utime = 0, stime = 0;
  // Fields 3..13 (state .. cmajflt), then utime (14) and stime (15).
  for (int i = 3; i <= 13 && rest >> field; ++i) {
  }
  rest >> utime >> stime;
  return static_cast<uint64_t>(static_cast<double>(utime + stime) / ticks_per_second() * 1e9);
}

double ticks_per_second() {
  return static_cast<double>(sysconf(_SC_CLK_TCK));
}

double load_average() {
  std::ifstream f("/proc/loadavg");
  double one = -1;
  if (!(f >> one)) return -1;
  return one;
}

std::string boot_id() {
  std::ifstream f("/proc/sys/kernel/random/boot_id");
  std::string id;
  if (!(f >> id)) return "";
  return id;
}

std::string host_view_path() {
  const char* env = std::getenv("LEAPFROG_HOST_VIEW");
  return env && *env ? env : "/run/leapfrog/host";
}

HostView read_host_view(const std::string& path, double max_age_s) {
  HostView v;
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return v;
  timespec now{};
  clock_gettime(CLOCK_REALTIME, &now);
  const double age = static_cast<double>(now.tv_sec - st.st_mtim.tv_sec) +
                     static_cast<double>(now.tv_nsec - st.st_mtim.tv_nsec) / 1e9;
  if (age > max_age_s) return v;  // the launcher stopped saying: unknown, not idle
  std::ifstream f(path);
  std::string line;
  if (!std::getline(f, line)) return v;
  std::istringstream words(line);
  std::string w;
  bool other = false, end = false;
  while (words >> w) {
    const auto eq = w.find('=');
    const std::string key = w.substr(0, eq),
                      value = eq == std::string::npos ? "" : w.substr(eq + 1);
    try {
      if (key == "other") {
        size_t used = 0;
        v.other_load = std::stod(value, &used);
        other = used == value.size() && v.other_load >= 0 && v.other_load < 1e6;
      } else if (key == "host_cpus") {
        v.host_cpus = static_cast<uint32_t>(std::stoul(value));
      } else if (key == "vcpus") {
        v.vcpus = static_cast<uint32_t>(std::stoul(value));
      } else if (key == "pinning") {
        v.pinning = value;
      } else if (key == "end") {
        end = true;
      }
    } catch (const std::exception&) {
      return HostView{};
    }
  }
  v.known = other && end;
  if (!v.known) return HostView{};
  return v;
}

}  // namespace leapfrog::catalogue::scale
