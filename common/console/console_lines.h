#pragma once
// Line-level helpers of the console parser: printk prefix stripping and the
// recognition of call trace frames, register dumps and separators. Internal to
// leapfrog_console.

#include <string>
#include <string_view>
#include <vector>

namespace leapfrog::console::detail {

struct ConsoleLine {
  std::string text;    // the input line without CR characters
  std::string body;    // text without printk prefixes and surrounding blanks
  std::string caller;  // printk caller id ("T123", "C1"), empty when absent
};

// Splits `text` at '\n'; a last line without '\n' counts too.
std::vector<ConsoleLine> split_console(std::string_view text);

// Decodes one input line (CR characters allowed).
ConsoleLine decode_line(std::string_view raw);

// A call trace frame such as ` ? walk_component+0x1a/0x2b0 [ext4]` or the old
// ` [<ffffffff81234567>] walk_component+0x1a/0x2b0`.
struct Frame {
  std::string func;      // cleaned function name (see clean_function); empty for a bare address
  bool reliable = true;  // false for frames printed with a leading "? "
};
// Returns false when `body` is no frame.
bool parse_frame(std::string_view body, Frame& frame);

// The function of a `RIP: 0010:func+0x1a/0x2b0` (x86) or `pc : func+0x1a/0x2b0`
// (arm64) line; empty when `body` is no such line or names no symbol.
std::string rip_function(std::string_view body);

// Drops compiler suffixes (`.isra.0`, `.constprop.0`, `.part.0`, `.cold`, ...)
// and a `+0x../0x..` offset from a symbol.
std::string clean_function(std::string_view symbol);

// `<TASK>`, `</TASK>`, `<IRQ>`, `</IRQ>`, `<NMI>`, `</NMI>`, `<SOFTIRQ>`, `</SOFTIRQ>`.
bool is_trace_marker(std::string_view body);

// A register dump line (`RAX: ...`, `R10: ...`, `FS:  ...`, `Code: ...`, `RIP: ...`).
bool is_register_line(std::string_view body);

// A line of 10 or more '=' (KASAN, UBSAN and lockdep frames).
bool is_equals_separator(std::string_view body);

// `------------[ cut here ]------------`.
bool is_cut_here(std::string_view body);

bool starts_with(std::string_view s, std::string_view prefix);
bool contains(std::string_view s, std::string_view needle);

}  // namespace leapfrog::console::detail
