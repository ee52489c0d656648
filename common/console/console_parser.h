#pragma once
// Finds kernel reports (Oops, BUG, panic, KASAN, UBSAN, lockdep, WARNING, hung task,
// RCU stall, soft and hard lockup) in serial console text and gives each a title
// that stays the same across runs of the same bug.
//
// Input lines may carry printk decorations (`<4>` log levels, `[   12.345678]`
// timestamps, `[  T123]`/`[ C1]` caller ids), CR characters, lines of other CPUs
// and firmware noise; they are stripped before matching.
//
// Titles keep function and file names and drop addresses, offsets, numbers, CPU
// ids, pids, task comm names and times, e.g. `WARNING in walk_component`,
// `KASAN: use-after-free Read in d_alloc_parallel`, `kernel BUG at fs/namei.c`,
// `soft lockup in path_openat`, `panic: sysrq triggered crash`.
//
// Follow-on panics are folded in: a `Kernel panic - not syncing:` line that is only
// the consequence of an earlier report (`Fatal exception`, `panic_on_warn set`,
// `hung_task: blocked tasks`, ...) and comes within a few hundred lines of it
// extends that report (its last_line and excerpt) instead of making a report of
// its own. Any other panic is a report of kind "panic".

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace leapfrog::console {

struct KernelReport {
  std::string
      kind;  // "oops","bug","panic","kasan","ubsan","lockdep","warning","hung-task","rcu-stall","soft-lockup","hard-lockup"
  std::string title;  // normalised: addresses, numbers, CPU ids, pids, comm names stripped
  size_t first_line = 0, last_line = 0;  // 0-based line range in the input
  std::string excerpt;                   // the report's lines
};

// Returns the reports in `text` in order of their first line; none for a clean log.
std::vector<KernelReport> parse_console(std::string_view text);

// True when `report` ends in a kernel panic (its own or a folded follow-on one), so
// the kernel that printed it is dead.
bool report_is_fatal(const KernelReport& report);

// Returns `line` without its CR characters, `<N>` log level, `[  12.345678]`
// timestamp and `[  T123]`/`[ C1]` caller id, and without surrounding blanks.
std::string strip_console_prefix(std::string_view line);

}  // namespace leapfrog::console
