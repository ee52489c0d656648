#include "common/console/console_title.h"

#include <algorithm>
#include <array>
#include <cctype>

namespace leapfrog::console::detail {
namespace {

// Functions that are never the culprit. Kept sorted for binary search.
constexpr std::array kGenericFunctions = std::to_array<std::string_view>({
    "___might_sleep",
    "__bad_area_nosemaphore",
    "__check_object_size",
    "__cond_resched",
    "__const_udelay",
    "__copy_user_nocache",
    "__delay",
    "__die",
    "__die_body",
    "__do_softirq",
    "__down",
    "__down_read_common",
    "__down_write_common",
    "__dump_stack",
    "__flush_work",
    "__fortify_report",
    "__get_user_1",
    "__get_user_2",
    "__get_user_4",
    "__get_user_8",
    "__hrtimer_run_queues",
    "__irq_exit_rcu",
    "__kmem_cache_free",
    "__list_add_valid",
    "__list_add_valid_or_report",
    "__list_del_entry_valid",
    "__list_del_entry_valid_or_report",
    "__lock_acquire",
    "__lock_release",
    "__memcpy",
    "__memmove",
    "__memset",
    "__might_fault",
    "__might_resched",
    "__might_sleep",
    "__ndelay",
    "__percpu_down_read",
    "__put_user_1",
    "__put_user_2",
    "__put_user_4",
    "__put_user_8",
    "__schedule",
    "__schedule_bug",
    "__synchronize_srcu",
    "__sysvec_apic_timer_interrupt",
    "__udelay",
    "__wait_for_common",
    "__wait_rcu_gp",
    "__warn",
    "__warn_printk",
    "_cond_resched",
    "_copy_from_user",
    "_copy_to_user",
    "acpi_idle_enter",
    "arch_call_rest_init",
    "arch_cpu_idle",
    "arch_trigger_cpumask_backtrace",
    "asm_exc_general_protection",
    "asm_exc_int3",
    "asm_exc_invalid_op",
    "asm_exc_page_fault",
    "asm_sysvec_apic_timer_interrupt",
    "bad_area_nosemaphore",
    "bcmp",
    "bit_wait",
    "bit_wait_io",
    "check_cpu_stall",
    "check_deadlock",
    "check_heap_object",
    "check_memory_region",
    "check_noncircular",
    "check_panic_on_warn",
    "check_prev_add",
    "check_prevs_add",
    "clear_page_erms",
    "clear_page_orig",
    "clear_page_rep",
    "copy_from_user",
    "copy_page",
    "copy_to_user",
    "copy_user_enhanced_fast_string",
    "copy_user_generic_string",
    "copy_user_generic_unrolled",
    "cpu_idle_poll",
    "cpu_relax",
    "cpu_startup_entry",
    "cpuidle_enter",
    "cpuidle_enter_state",
    "default_idle",
    "default_idle_call",
    "delay_halt",
    "delay_halt_mwaitx",
    "delay_halt_tpause",
    "delay_loop",
    "delay_tsc",
    "die",
    "die_addr",
    "die_body",
    "do_error_trap",
    "do_exit",
    "do_general_protection",
    "do_idle",
    "do_nanosleep",
    "do_raw_spin_lock",
    "do_softirq",
    "do_syscall_64",
    "do_trap",
    "do_user_addr_fault",
    "do_wait_for_common",
    "down",
    "down_interruptible",
    "down_killable",
    "down_read",
    "down_read_killable",
    "down_write",
    "down_write_killable",
    "dump_stack",
    "dump_stack_lvl",
    "entry_SYSCALL_64",
    "entry_SYSCALL_64_after_hwframe",
    "exc_general_protection",
    "exc_int3",
    "exc_invalid_op",
    "exc_page_fault",
    "flush_work",
    "fortify_panic",
    "handle_bug",
    "handle_softirqs",
    "hrtimer_interrupt",
    "io_schedule",
    "io_schedule_prepare",
    "io_schedule_timeout",
    "irq_exit_rcu",
    "kfree",
    "kmem_cache_free",
    "kthread",
    "lock_acquire",
    "lock_acquired",
    "lock_contended",
    "lock_release",
    "lockdep_rcu_suspicious",
    "make_task_dead",
    "mark_lock",
    "mark_lock_irq",
    "memcmp",
    "memcpy",
    "memcpy_erms",
    "memcpy_orig",
    "memmove",
    "memset",
    "memset_erms",
    "memset_orig",
    "might_sleep",
    "msleep",
    "mwait_idle",
    "native_queued_spin_lock_slowpath",
    "native_safe_halt",
    "nmi_cpu_backtrace",
    "nmi_trigger_cpumask_backtrace",
    "no_context",
    "oops_end",
    "out_of_line_wait_on_bit",
    "page_fault_oops",
    "panic",
    "percpu_down_write",
    "percpu_rwsem_wait",
    "preempt_schedule_common",
    "print_address_description",
    "print_circular_bug",
    "print_cpu_stall",
    "print_deadlock_bug",
    "print_report",
    "print_usage_bug",
    "process_one_work",
    "queued_spin_lock_slowpath",
    "rcu_dump_cpu_stacks",
    "rcu_pending",
    "rcu_sched_clock_irq",
    "refcount_warn_saturate",
    "rep_movs_alternative",
    "rep_nop",
    "report_bug",
    "rest_init",
    "ret_from_fork",
    "ret_from_fork_asm",
    "rewind_stack_and_make_dead",
    "rwsem_wait",
    "schedule",
    "schedule_hrtimeout_range_clock",
    "schedule_preempt_disabled",
    "schedule_timeout",
    "schedule_timeout_uninterruptible",
    "secondary_startup_64_no_verify",
    "show_regs",
    "show_stack",
    "show_trace_log_lvl",
    "start_kernel",
    "start_secondary",
    "strcat",
    "strchr",
    "strcmp",
    "strcpy",
    "strlen",
    "strncmp",
    "strncpy",
    "strncpy_from_user",
    "strnlen",
    "strscpy",
    "synchronize_rcu",
    "sysvec_apic_timer_interrupt",
    "tick_sched_handle",
    "tick_sched_timer",
    "udelay",
    "update_process_times",
    "usercopy_abort",
    "usleep_range_state",
    "valid_state",
    "validate_chain",
    "wait_for_completion",
    "wait_for_completion_interruptible",
    "wait_for_completion_io",
    "wait_for_completion_killable",
    "wait_for_completion_timeout",
    "warn_slowpath_fmt",
    "warn_slowpath_null",
    "watchdog_timer_fn",
    "worker_thread",
    "x64_sys_call",
    "x86_64_start_kernel",
    "x86_64_start_reservations",
});

constexpr std::array kGenericPrefixes = std::to_array<std::string_view>({
    "__asan_",      "__kasan_",       "kasan_",       "__kmsan_",         "kmsan_",
    "__ubsan_",     "ubsan_",         "_raw_spin_",   "_raw_read_",       "_raw_write_",
    "__mutex_lock", "mutex_lock",     "__rwsem_",     "rwsem_down_",      "__wait_on_bit",
    "folio_wait_",  "__folio_lock",   "__lock_page",  "wait_on_page_bit", "__sanitizer_",
    "slab_free",    "__slab_free",    "stack_trace_", "arch_stack_walk",  "schedule_timeout_",
    "__x86_return", "__x86_indirect",
});

bool is_ident_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
}
bool is_digit(char c) {
  return c >= '0' && c <= '9';
}
bool is_lower_hex(char c) {
  return is_digit(c) || (c >= 'a' && c <= 'f');
}

// A word that is a number or an address rather than a name.
bool is_numeric_word(std::string_view w) {
  if (std::all_of(w.begin(), w.end(), is_digit)) return true;
  if (w.size() > 2 && (w.starts_with("0x") || w.starts_with("0X"))) return true;
  bool has_digit = std::any_of(w.begin(), w.end(), is_digit);
  return w.size() >= 8 && has_digit && std::all_of(w.begin(), w.end(), is_lower_hex);
}

// Where a frame was printed: the stack of the interrupted task, or an interrupt
// or NMI handler's own frames (`<IRQ>` ... `</IRQ>`, `<NMI>` ... `</NMI>`).
enum class Context { kTask, kIrq, kNmi };

// Everything the title scan needs from a report's lines.
struct ReportScan {
  struct Candidate {
    size_t line;
    std::string func;
    bool reliable;  // false for "? func+0x.." frames
    bool rip;       // a "RIP: 0010:func+0x.." line rather than a frame
    Context context;
  };
  std::vector<Candidate> candidates;    // RIP lines and frames, in line order
  std::vector<std::string> lock_sites;  // functions of ", at: func+0x" lines
  std::string access;                   // "Read"/"Write" (KASAN)
};

ReportScan scan_report(const std::vector<ConsoleLine>& lines, size_t header, size_t last) {
  ReportScan scan;
  Context context = Context::kTask;
  for (size_t i = header; i <= last && i < lines.size(); ++i) {
    const std::string& body = lines[i].body;
    if (body == "<IRQ>" || body == "<SOFTIRQ>") {
      context = Context::kIrq;
      continue;
    }
    if (body == "<NMI>") {
      context = Context::kNmi;
      continue;
    }
    if (body == "</IRQ>" || body == "</NMI>" || body == "</SOFTIRQ>" || body == "<EOI>" ||
        body == "<TASK>" || body == "</TASK>") {
      context = Context::kTask;
      continue;
    }
    if (std::string rip = rip_function(body); !rip.empty()) {
      scan.candidates.push_back({i, rip, true, true, context});
      continue;
    }
    if (size_t at = body.find(", at: "); at != std::string::npos) {
      std::string func = clean_function(std::string_view(body).substr(at + 6));
      if (!func.empty() && contains(body.substr(at), "+0x")) scan.lock_sites.push_back(func);
      continue;
    }
    if (scan.access.empty() && i <= header + 3) {
      if (starts_with(body, "Read of size")) scan.access = "Read";
      if (starts_with(body, "Write of size")) scan.access = "Write";
    }
    Frame frame;
    if (i > header && parse_frame(body, frame) && !frame.func.empty()) {
      scan.candidates.push_back({i, frame.func, frame.reliable, false, context});
    }
  }
  return scan;
}

// The first specific function among the frames (not RIP lines), optionally
// ignoring interrupt and NMI handler frames.
std::string first_good_frame(const ReportScan& scan, bool task_only) {
  for (const auto& c : scan.candidates) {
    if (c.rip || !c.reliable) continue;
    if (task_only && c.context != Context::kTask) continue;
    if (!is_generic_function(c.func)) return c.func;
  }
  return {};
}

// The function a fault or lockup happened in: the first RIP line if it names a
// specific function, else the first specific frame or RIP after it. With
// `skip_nmi`, frames of the NMI handler that printed the report are ignored;
// without any RIP line, so are interrupt frames (a timer interrupt reporting a
// stall prints its own frames first).
std::string faulting_function(const ReportScan& scan, bool skip_nmi) {
  auto first_rip = std::find_if(scan.candidates.begin(), scan.candidates.end(),
                                [](const auto& c) { return c.rip; });
  if (first_rip == scan.candidates.end()) return first_good_frame(scan, skip_nmi);
  for (auto it = first_rip; it != scan.candidates.end(); ++it) {
    if (!it->reliable || (skip_nmi && it->context == Context::kNmi)) continue;
    if (!is_generic_function(it->func)) return it->func;
  }
  return first_good_frame(scan, skip_nmi);
}

std::string with_function(std::string title, const std::string& func) {
  if (!func.empty()) title += " in " + func;
  return title;
}

// The function named by a header such as "... in foo+0x12/0x34" or "... at file.c:1 foo+0x1/0x2".
std::string header_function(std::string_view body) {
  size_t plus = body.find("+0x");
  if (plus == std::string_view::npos) return {};
  size_t start = plus;
  while (start > 0 && (is_ident_char(body[start - 1]) || body[start - 1] == '.')) --start;
  return clean_function(body.substr(start, plus - start));
}

// A source file named in `text` ("fs/namei.c:123" -> "fs/namei.c"), or empty.
std::string source_file(std::string_view text) {
  for (std::string_view ext : {".c:", ".h:", ".rs:", ".S:"}) {
    size_t pos = text.find(ext);
    if (pos == std::string_view::npos) continue;
    size_t start = pos;
    while (start > 0 && text[start - 1] != ' ' && text[start - 1] != '(') --start;
    std::string_view path = text.substr(start, pos + ext.size() - 1 - start);
    // An out-of-tree module names its build folder, which changes between builds.
    if (path.starts_with("/")) path = path.substr(path.rfind('/') + 1);
    return std::string(path);
  }
  return {};
}

std::string after(std::string_view s, std::string_view marker) {
  size_t pos = s.find(marker);
  if (pos == std::string_view::npos) return {};
  return std::string(s.substr(pos + marker.size()));
}

std::string oops_title(std::string_view header, const ReportScan& scan) {
  std::string what;
  if (contains(header, "NULL pointer dereference")) {
    what = "BUG: unable to handle kernel NULL pointer dereference";
  } else if (contains(header, "unable to handle page fault")) {
    what = "BUG: unable to handle page fault";
  } else if (contains(header, "paging request")) {
    what = "BUG: unable to handle kernel paging request";
  } else if (contains(header, "general protection fault")) {
    what = "general protection fault";
  } else if (contains(header, "invalid opcode")) {
    what = "invalid opcode";
  } else if (contains(header, "stack segment")) {
    what = "stack segment fault";
  } else if (contains(header, "BUG: ")) {
    std::string rest = after(header, "BUG: ");
    for (std::string_view cut : {",", " at ", " for "}) {
      if (size_t pos = rest.find(cut); pos != std::string::npos) rest.resize(pos);
    }
    what = "BUG: " + normalise_text(rest);
  } else {
    what = "Oops";
  }
  return with_function(what, faulting_function(scan, false));
}

std::string bug_title(std::string_view header, const ReportScan& scan) {
  if (contains(header, "kernel BUG at ")) {
    std::string rest = after(header, "kernel BUG at ");
    std::string file = source_file(rest);
    if (file.empty()) file = normalise_text(rest.substr(0, rest.find_first_of(":!")));
    // Checkers (list debugging, hardened usercopy, fortify) BUG in their own file
    // for everyone's bugs; the caller tells the bugs apart.
    static constexpr std::string_view kCheckerFiles[] = {"lib/list_debug.c", "mm/usercopy.c",
                                                         "lib/string_helpers.c", "lib/string.c",
                                                         "include/linux/fortify-string.h"};
    for (std::string_view checker : kCheckerFiles) {
      if (file == checker)
        return with_function("kernel BUG at " + file, faulting_function(scan, false));
    }
    return "kernel BUG at " + file;
  }
  // Other "BUG: message: details" reports: keep the message, drop the details.
  std::string rest = after(header, "BUG: ");
  for (std::string_view cut : {": ", " - ", " at ", " in process ", ", ", " for address"}) {
    if (size_t pos = rest.find(cut); pos != std::string::npos) rest.resize(pos);
  }
  std::string func = faulting_function(scan, false);
  if (starts_with(rest, "KFENCE: ")) {
    std::string named = header_function(header);
    if (!named.empty() && !is_generic_function(named)) func = named;
    if (size_t pos = rest.find(" in "); pos != std::string::npos) rest.resize(pos);
  }
  return with_function("BUG: " + normalise_text(rest), func);
}

std::string kasan_title(std::string_view header, const ReportScan& scan) {
  std::string rest = after(header, "KASAN: ");
  std::string type = rest.substr(0, rest.find(' '));
  std::string func = header_function(header);
  if (func.empty() || is_generic_function(func)) func = first_good_frame(scan, false);
  std::string title = "KASAN: " + normalise_text(type);
  if (!scan.access.empty()) title += " " + scan.access;
  return with_function(title, func);
}

// Kernels before 5.9 print "UBSAN: Undefined behaviour in FILE" and say what
// happened on the next line; name it as newer kernels do.
std::string ubsan_type_from_detail(std::string_view detail) {
  static constexpr std::pair<std::string_view, std::string_view> kTypes[] = {
      {"is out of range for type", "array-index-out-of-bounds"},
      {"shift exponent", "shift-out-of-bounds"},
      {"left shift of", "shift-out-of-bounds"},
      {"signed integer overflow", "signed-integer-overflow"},
      {"negation of", "signed-integer-overflow"},
      {"division by zero", "division-by-zero"},
      {"load of value", "invalid-load"},
      {"null pointer", "null-ptr-deref"},
      {"misaligned address", "misaligned-access"},
      {"is not a valid value", "invalid-load"},
  };
  for (const auto& [needle, type] : kTypes) {
    if (contains(detail, needle)) return std::string(type);
  }
  return "undefined behaviour";
}

std::string ubsan_title(std::string_view header, std::string_view next_line,
                        const ReportScan& scan) {
  std::string rest = after(header, "UBSAN: ");
  std::string type = rest.substr(0, rest.find(" in "));
  if (type == "Undefined behaviour") type = ubsan_type_from_detail(next_line);
  std::string func = first_good_frame(scan, false);
  if (func.empty()) func = source_file(rest);
  return with_function("UBSAN: " + normalise_text(type), func);
}

std::string warning_title(std::string_view header, const ReportScan& scan) {
  std::string func = header_function(header);
  if (func.empty() || is_generic_function(func)) func = faulting_function(scan, false);
  if (func.empty()) func = source_file(header);
  return with_function("WARNING", func);
}

std::string lockdep_title(std::string_view header, const ReportScan& scan) {
  static constexpr std::pair<std::string_view, std::string_view> kTypes[] = {
      {"circular locking dependency", "possible circular locking dependency"},
      {"recursive locking", "possible recursive locking"},
      {"inconsistent lock state", "inconsistent lock state"},
      {"suspicious RCU usage", "suspicious RCU usage"},
      {"bad unlock balance", "bad unlock balance"},
      {"held lock freed", "held lock freed"},
      {"lock held when returning to user space", "lock held when returning to user space"},
      {"irq lock inversion", "possible irq lock inversion dependency"},
      {"lock order detected", "irq-safe to irq-unsafe lock order"},
  };
  std::string type = "lock problem";
  for (const auto& [needle, name] : kTypes) {
    if (contains(header, needle)) {
      type = name;
      break;
    }
  }
  std::string func;
  for (const std::string& site : scan.lock_sites) {
    if (!is_generic_function(site)) {
      func = site;
      break;
    }
  }
  if (func.empty()) func = first_good_frame(scan, false);
  return with_function("lockdep: " + type, func);
}

}  // namespace

bool is_generic_function(std::string_view func) {
  if (std::binary_search(kGenericFunctions.begin(), kGenericFunctions.end(), func)) return true;
  for (std::string_view p : kGenericPrefixes) {
    if (func.starts_with(p)) return true;
  }
  return false;
}

std::string normalise_text(std::string_view text) {
  std::string out;
  size_t i = 0;
  while (i < text.size()) {
    if (is_ident_char(text[i])) {
      size_t j = i;
      while (j < text.size() && is_ident_char(text[j])) ++j;
      std::string_view word = text.substr(i, j - i);
      if (!is_numeric_word(word)) out.append(word);
      i = j;
    } else {
      out.push_back(text[i++]);
    }
  }
  // Drop brackets emptied by removed numbers ("unknown-block(0,0)" -> "unknown-block").
  std::string kept;
  for (size_t k = 0; k < out.size(); ++k) {
    char open = out[k];
    if (open == '(' || open == '[') {
      char close = open == '(' ? ')' : ']';
      size_t end = out.find(close, k + 1);
      if (end != std::string::npos &&
          std::none_of(out.begin() + k + 1, out.begin() + end, is_ident_char)) {
        k = end;
        continue;
      }
    }
    kept.push_back(open);
  }
  // Collapse blanks; drop punctuation left dangling by removed numbers.
  std::string tidy;
  for (char c : kept) {
    if (c == ' ' && (tidy.empty() || tidy.back() == ' ')) continue;
    tidy.push_back(c);
  }
  while (!tidy.empty() &&
         std::string_view(" :,=.-/#").find(tidy.back()) != std::string_view::npos) {
    tidy.pop_back();
  }
  return tidy;
}

std::string make_title(std::string_view kind, const std::vector<ConsoleLine>& lines, size_t header,
                       size_t last) {
  const std::string& head = lines[header].body;
  ReportScan scan = scan_report(lines, header, last);
  if (kind == "oops") return oops_title(head, scan);
  if (kind == "bug") return bug_title(head, scan);
  if (kind == "kasan") return kasan_title(head, scan);
  if (kind == "ubsan") {
    return ubsan_title(head, header + 1 <= last ? lines[header + 1].body : "", scan);
  }
  if (kind == "warning") return warning_title(head, scan);
  if (kind == "lockdep") return lockdep_title(head, scan);
  if (kind == "hung-task") return with_function("task hung", first_good_frame(scan, false));
  if (kind == "rcu-stall") return with_function("rcu stall", faulting_function(scan, true));
  if (kind == "soft-lockup") return with_function("soft lockup", faulting_function(scan, true));
  if (kind == "hard-lockup") return with_function("hard lockup", faulting_function(scan, true));
  if (kind == "panic") {
    std::string message = after(head, "not syncing: ");
    if (message.empty()) message = after(head, "not syncing");
    return "panic: " + normalise_text(message);
  }
  return normalise_text(head);
}

}  // namespace leapfrog::console::detail
