#include "common/console/console_parser.h"

#include <optional>

#include "common/console/console_lines.h"
#include "common/console/console_title.h"

namespace leapfrog::console {
namespace {

using detail::ConsoleLine;
using detail::contains;
using detail::starts_with;

// A report never runs longer than this many lines (a lockdep chain or a
// multi-CPU RCU stall is a few hundred at most); the cap bounds a report whose
// end the parser cannot see.
constexpr size_t kMaxReportLines = 600;
// A follow-on panic folds into the previous report only within this many lines.
constexpr size_t kFollowOnWindow = 300;

struct Header {
  std::string kind;
  bool oops_line = false;  // "Oops:", "invalid opcode:", "general protection fault":
                           // part of an open oops/BUG report, else a report of its own
};

std::optional<Header> detect_header(std::string_view body) {
  if (body.empty()) return std::nullopt;
  if (contains(body, "Kernel panic - not syncing") && !starts_with(body, "---[")) {
    return Header{"panic"};
  }
  if (contains(body, "BUG: KASAN: ")) return Header{"kasan"};
  if (contains(body, "BUG: soft lockup")) return Header{"soft-lockup"};
  if (contains(body, "detected hard LOCKUP on cpu")) return Header{"hard-lockup"};
  if (contains(body, "BUG: unable to handle") || contains(body, "BUG: kernel NULL pointer") ||
      contains(body, "BUG: stack guard page")) {
    return Header{"oops"};
  }
  if (contains(body, "kernel BUG at ")) return Header{"bug"};
  if (contains(body, "BUG: ")) return Header{"bug"};
  if (starts_with(body, "Oops: ") || starts_with(body, "Oops - ") ||
      starts_with(body, "general protection fault") || starts_with(body, "invalid opcode: ") ||
      starts_with(body, "stack segment: ") || contains(body, "Internal error: Oops")) {
    return Header{"oops", true};
  }
  if (contains(body, "UBSAN: ")) return Header{"ubsan"};
  if (contains(body, "INFO: task ") && contains(body, " blocked for more than ")) {
    return Header{"hung-task"};
  }
  if (contains(body, "detected stalls on CPUs/tasks") ||
      contains(body, "self-detected stall on CPU") ||
      contains(body, "detected expedited stalls on CPUs/tasks")) {
    return Header{"rcu-stall"};
  }
  static constexpr std::string_view kLockdep[] = {
      "possible circular locking dependency detected",
      "possible recursive locking detected",
      "inconsistent lock state",
      "WARNING: suspicious RCU usage",
      "WARNING: bad unlock balance detected",
      "WARNING: held lock freed",
      "WARNING: lock held when returning to user space",
      "possible irq lock inversion dependency detected",
      "-unsafe lock order detected",
  };
  for (std::string_view needle : kLockdep) {
    if (contains(body, needle)) return Header{"lockdep"};
  }
  // "WARNING: CPU: 1 PID: 123 at fs/namei.c:456 func+0x1a/0x2b0" and the newer
  // "WARNING: fs/namei.c:456 at func+0x1a/0x2b0, CPU#1: comm/123".
  if (size_t pos = body.find("WARNING: "); pos != std::string_view::npos) {
    std::string_view rest = body.substr(pos + 9);
    if (starts_with(rest, "CPU: ") && contains(rest, " at ")) return Header{"warning"};
    size_t space = rest.find(' ');
    std::string_view first = rest.substr(0, space);
    if ((contains(first, ".c:") || contains(first, ".h:") || contains(first, ".rs:")) &&
        contains(rest, " at ")) {
      return Header{"warning"};
    }
  }
  return std::nullopt;
}

// Panic messages that only report the consequence of an earlier report.
bool is_follow_on_panic(std::string_view body) {
  std::string_view msg = body.substr(body.find("not syncing") + 11);
  if (starts_with(msg, ":")) msg.remove_prefix(1);
  while (starts_with(msg, " ")) msg.remove_prefix(1);
  static constexpr std::string_view kPrefixes[] = {
      "Fatal exception",
      "Fatal Machine check",
      "hung_task: blocked tasks",
      "softlockup: hung tasks",
      "Hard LOCKUP",
      "Watchdog detected hard LOCKUP",
      "hard LOCKUP",
      "RCU Stall",
      "Attempted to kill init!",
      "Attempted to kill the idle task!",
      "Aiee, killing interrupt handler!",
      "Oops",
  };
  if (contains(msg, "panic_on_warn set") || contains(msg, "panic_on_oops")) return true;
  for (std::string_view p : kPrefixes) {
    if (starts_with(msg, p)) return true;
  }
  return false;
}

// Lines that may follow a report's last call trace and still belong to it.
bool is_tail_line(std::string_view body) {
  static constexpr std::string_view kPrefixes[] = {
      "Modules linked in:",
      "---[ end",
      "RIP  [",
      "RSP <",
      "Kernel Offset:",
      "Rebooting in",
      "irq event stamp:",
      "hardirqs last",
      "softirqs last",
      "NMI backtrace for cpu",
      "Sending NMI",
      "rcu: ",
      "Call Trace:",
      "Call trace:",
      "CPU: ",
      "Hardware name:",
      "Workqueue:",
      "note: ",
      "Fixing recursive",
      "Dumping ftrace",
      "Shutting down cpus",
      "Showing all locks",
      "Task dump for CPU",
      "task:",
      "Code: ",
      "(detected by",
      "CR2: ",
      "Tainted: ",
      "Not tainted",
  };
  for (std::string_view p : kPrefixes) {
    if (starts_with(body, p)) return true;
  }
  return detail::is_register_line(body) || detail::is_trace_marker(body);
}

enum class Step { kAbsorb, kAbsorbAndClose, kNeutral, kClose };

struct OpenReport {
  std::string kind;
  size_t first = 0;
  size_t header = 0;
  size_t last = 0;
  std::string caller;
  bool expects_oops_line = false;  // an Oops/kernel BUG header whose "Oops: ... [#1]" line is due
  bool in_trace = false;
  bool trace_done = false;
  bool wants_separator = false;  // KASAN/UBSAN framed by '=' lines: ends at the closing one
  bool wants_backtrace = false;  // lockdep: only the "stack backtrace:" trace ends it
  bool backtrace_seen = false;
};

class Parser {
 public:
  explicit Parser(std::vector<ConsoleLine> lines) : lines_(std::move(lines)) {}

  std::vector<KernelReport> run() {
    for (size_t i = 0; i < lines_.size(); ++i) feed(i);
    if (open_) close();
    return std::move(reports_);
  }

 private:
  void feed(size_t i) {
    const ConsoleLine& line = lines_[i];
    std::optional<Header> header = detect_header(line.body);
    if (open_ && header && header->oops_line && open_->expects_oops_line) {
      open_->expects_oops_line = false;
      header.reset();  // the "Oops: 0002 [#1]" line of the report already open
    }
    if (header) {
      if (open_) close();
      start(i, *header);
      return;
    }
    if (!open_) return;
    switch (step(i)) {
      case Step::kAbsorb:
        open_->last = i;
        break;
      case Step::kAbsorbAndClose:
        open_->last = i;
        close();
        break;
      case Step::kNeutral:
        break;
      case Step::kClose:
        close();
        break;
    }
  }

  void start(size_t i, const Header& header) {
    OpenReport r;
    r.kind = header.kind;
    r.first = r.header = r.last = i;
    r.caller = lines_[i].caller;
    r.expects_oops_line =
        (r.kind == "oops" && !header.oops_line) || contains(lines_[i].body, "kernel BUG at ");
    size_t floor = reports_.empty() ? 0 : reports_.back().last_line + 1;
    // Include the frame line the kernel prints above the header.
    if (i > floor && (detail::is_equals_separator(lines_[i - 1].body) ||
                      detail::is_cut_here(lines_[i - 1].body))) {
      r.first = i - 1;
      r.wants_separator = detail::is_equals_separator(lines_[i - 1].body) &&
                          (r.kind == "kasan" || r.kind == "ubsan");
    }
    // CONFIG_DEBUG_LIST says what it found on the line before its BUG.
    if (r.first > floor && contains(lines_[r.first - 1].body, " corruption")) --r.first;
    if (r.kind == "panic") {
      // `echo c > /proc/sysrq-trigger` announces itself just before panicking.
      for (size_t k = i; k > floor && k + 4 > i; --k) {
        if (contains(lines_[k - 1].body, "Trigger a crash")) {
          r.first = k - 1;
          break;
        }
      }
    }
    r.wants_backtrace = r.kind == "lockdep";
    open_ = r;
  }

  Step step(size_t i) {
    OpenReport& r = *open_;
    const ConsoleLine& line = lines_[i];
    std::string_view body = line.body;
    if (i - r.first >= kMaxReportLines) return Step::kClose;
    // With printk caller ids, lines of other tasks/CPUs are interleaved noise.
    // Stalls and hard lockups print other CPUs' backtraces, so they take all lines.
    if (!r.caller.empty() && !line.caller.empty() && line.caller != r.caller &&
        r.kind != "rcu-stall" && r.kind != "hard-lockup") {
      return Step::kNeutral;
    }
    if (starts_with(body, "---[ end trace")) return Step::kAbsorbAndClose;
    if (r.kind == "panic" && starts_with(body, "---[ end Kernel panic")) {
      return Step::kAbsorbAndClose;
    }
    if (r.wants_separator && detail::is_equals_separator(body)) return Step::kAbsorbAndClose;
    if (starts_with(body, "stack backtrace:")) {
      r.backtrace_seen = true;
      return Step::kAbsorb;
    }
    if (body == "Call Trace:" || body == "Call trace:") {
      r.in_trace = true;
      r.trace_done = false;
      return Step::kAbsorb;
    }
    if (r.in_trace) {
      detail::Frame frame;
      if (detail::parse_frame(body, frame) || detail::is_register_line(body)) return Step::kAbsorb;
      if (body == "</TASK>") {
        end_trace(r);
        return Step::kAbsorb;
      }
      if (detail::is_trace_marker(body)) return Step::kAbsorb;
      // A line of another CPU or of user space printed into the middle of the
      // trace: the trace goes on right after it.
      if (trace_continues_after(i)) return Step::kNeutral;
      end_trace(r);
    }
    if (r.trace_done && !r.wants_separator) {
      return is_tail_line(body) ? Step::kAbsorb : Step::kClose;
    }
    return Step::kAbsorb;
  }

  // True when one of the two lines after lines_[i] is a call trace line.
  bool trace_continues_after(size_t i) const {
    for (size_t k = i + 1; k < lines_.size() && k <= i + 2; ++k) {
      detail::Frame frame;
      const std::string& body = lines_[k].body;
      if (detail::parse_frame(body, frame) || detail::is_trace_marker(body)) return true;
    }
    return false;
  }

  static void end_trace(OpenReport& r) {
    r.in_trace = false;
    if (!r.wants_backtrace || r.backtrace_seen) r.trace_done = true;
  }

  void close() {
    OpenReport r = *open_;
    open_.reset();
    if (r.kind == "panic" && !reports_.empty() && is_follow_on_panic(lines_[r.header].body) &&
        r.header - reports_.back().last_line <= kFollowOnWindow) {
      KernelReport& prev = reports_.back();
      prev.last_line = r.last;
      prev.excerpt = excerpt(prev.first_line, prev.last_line);
      return;
    }
    KernelReport report;
    report.kind = r.kind;
    report.title = detail::make_title(r.kind, lines_, r.header, r.last);
    report.first_line = r.first;
    report.last_line = r.last;
    report.excerpt = excerpt(r.first, r.last);
    reports_.push_back(std::move(report));
  }

  std::string excerpt(size_t first, size_t last) const {
    std::string out;
    for (size_t i = first; i <= last && i < lines_.size(); ++i) {
      out += lines_[i].text;
      out += '\n';
    }
    return out;
  }

  std::vector<ConsoleLine> lines_;
  std::optional<OpenReport> open_;
  std::vector<KernelReport> reports_;
};

}  // namespace

std::vector<KernelReport> parse_console(std::string_view text) {
  return Parser(detail::split_console(text)).run();
}

bool report_is_fatal(const KernelReport& report) {
  return report.kind == "panic" || contains(report.excerpt, "Kernel panic - not syncing");
}

std::string strip_console_prefix(std::string_view line) {
  return detail::decode_line(line).body;
}

}  // namespace leapfrog::console
