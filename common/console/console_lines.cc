#include "common/console/console_lines.h"

#include <algorithm>
#include <cctype>

namespace leapfrog::console::detail {
namespace {

bool is_digit(char c) {
  return c >= '0' && c <= '9';
}
bool is_hex(char c) {
  return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}
bool is_symbol_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '$';
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// Drops CR, other control characters and ANSI escape sequences (QEMU and
// SeaBIOS clear the screen with them).
std::string clean_controls(std::string_view raw) {
  std::string out;
  out.reserve(raw.size());
  for (size_t i = 0; i < raw.size(); ++i) {
    char c = raw[i];
    if (c == '\x1b') {
      if (i + 1 < raw.size() && raw[i + 1] == '[') {
        i += 2;
        while (i < raw.size() && !(raw[i] >= '@' && raw[i] <= '~')) ++i;
      } else {
        ++i;  // two-character escape such as ESC c
      }
      continue;
    }
    if (c == '\t') {
      out.push_back(' ');
    } else if (static_cast<unsigned char>(c) >= 0x20 && c != 0x7f) {
      out.push_back(c);
    }
  }
  return out;
}

// Matches `[   12.345678]` at the start of `s` and returns its length, else 0.
size_t timestamp_length(std::string_view s) {
  if (s.empty() || s[0] != '[') return 0;
  size_t i = 1;
  while (i < s.size() && s[i] == ' ') ++i;
  size_t digits = i;
  while (i < s.size() && is_digit(s[i])) ++i;
  if (i == digits || i >= s.size() || s[i] != '.') return 0;
  ++i;
  size_t frac = i;
  while (i < s.size() && is_digit(s[i])) ++i;
  if (i == frac || i >= s.size() || s[i] != ']') return 0;
  return i + 1;
}

// Matches `[  T123]` / `[ C1]` at the start of `s`; sets `id` and returns its length.
size_t caller_length(std::string_view s, std::string& id) {
  if (s.empty() || s[0] != '[') return 0;
  size_t i = 1;
  while (i < s.size() && s[i] == ' ') ++i;
  if (i >= s.size() || (s[i] != 'T' && s[i] != 'C')) return 0;
  size_t start = i++;
  size_t digits = i;
  while (i < s.size() && is_digit(s[i])) ++i;
  if (i == digits || i >= s.size() || s[i] != ']') return 0;
  id = std::string(s.substr(start, i - start));
  return i + 1;
}

// Matches `<4>` at the start of `s`.
size_t level_length(std::string_view s) {
  if (s.size() < 3 || s[0] != '<') return 0;
  size_t i = 1;
  while (i < s.size() && is_digit(s[i])) ++i;
  if (i == 1 || i >= s.size() || s[i] != '>') return 0;
  return i + 1;
}

}  // namespace

bool starts_with(std::string_view s, std::string_view prefix) {
  return s.starts_with(prefix);
}
bool contains(std::string_view s, std::string_view needle) {
  return s.find(needle) != std::string_view::npos;
}

ConsoleLine decode_line(std::string_view raw) {
  ConsoleLine line;
  line.text = clean_controls(raw);
  std::string_view s = line.text;
  while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
  for (;;) {
    size_t n = level_length(s);
    if (n == 0) n = timestamp_length(s);
    if (n == 0) n = caller_length(s, line.caller);
    if (n == 0) break;
    s.remove_prefix(n);
  }
  line.body = std::string(trim(s));
  return line;
}

std::vector<ConsoleLine> split_console(std::string_view text) {
  std::vector<ConsoleLine> lines;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    lines.push_back(decode_line(text.substr(start, end - start)));
    start = end + 1;
  }
  return lines;
}

std::string clean_function(std::string_view symbol) {
  size_t plus = symbol.find('+');
  if (plus != std::string_view::npos) symbol = symbol.substr(0, plus);
  // GCC and Clang suffixes: .isra.0, .constprop.0, .part.0, .cold, .llvm.123.
  size_t dot = symbol.find('.');
  if (dot != std::string_view::npos && dot > 0) symbol = symbol.substr(0, dot);
  return std::string(symbol);
}

bool parse_frame(std::string_view body, Frame& frame) {
  std::string_view s = trim(body);
  frame.reliable = true;
  if (starts_with(s, "? ")) {
    frame.reliable = false;
    s = trim(s.substr(2));
  }
  if (starts_with(s, "[<")) {  // old x86 format: [<ffffffff81234567>] func+0x1/0x2
    size_t close = s.find(">]");
    if (close == std::string_view::npos) return false;
    s = trim(s.substr(close + 2));
    if (starts_with(s, "? ")) {
      frame.reliable = false;
      s = trim(s.substr(2));
    }
  }
  size_t end = 0;
  while (end < s.size() && is_symbol_char(s[end])) ++end;
  if (end == s.size() && end > 2 && starts_with(s, "0x") &&
      std::all_of(s.begin() + 2, s.end(), is_hex)) {
    frame.func.clear();  // an address without a symbol, e.g. a module's freed init code
    return true;
  }
  if (end == 0 || end >= s.size() || s[end] != '+') return false;
  std::string_view offsets = s.substr(end + 1);
  if (!starts_with(offsets, "0x")) return false;
  size_t slash = offsets.find('/');
  if (slash == std::string_view::npos || slash > 20) return false;
  std::string_view after = trim(offsets.substr(slash + 1));
  if (!starts_with(after, "0x")) return false;
  // What may follow the offsets: nothing, a module name in brackets, or arm64's
  // "(...)" inline marker; anything else makes it prose, not a frame.
  size_t size_end = 2;
  while (size_end < after.size() && is_hex(after[size_end])) ++size_end;
  std::string_view rest = trim(after.substr(size_end));
  if (!rest.empty() && rest[0] != '[' && rest[0] != '(') return false;
  frame.func = clean_function(s.substr(0, end));
  return !frame.func.empty();
}

std::string rip_function(std::string_view body) {
  std::string_view s;
  if (starts_with(body, "RIP: ")) {
    s = body.substr(5);
  } else if (starts_with(body, "pc : ")) {
    s = body.substr(5);
  } else {
    return {};
  }
  // x86: "0010:func+0x1a/0x2b0"; old: "0010:[<ffffffff81234567>]  [<...>] func+0x1a/0x2b0".
  size_t plus = s.find("+0x");
  if (plus == std::string_view::npos) return {};
  size_t start = plus;
  while (start > 0 && is_symbol_char(s[start - 1])) --start;
  if (start == plus) return {};
  return clean_function(s.substr(start, plus - start));
}

bool is_trace_marker(std::string_view body) {
  static constexpr std::string_view kMarkers[] = {"<TASK>",    "</TASK>",    "<IRQ>",
                                                  "</IRQ>",    "<NMI>",      "</NMI>",
                                                  "<SOFTIRQ>", "</SOFTIRQ>", "<EOI>"};
  for (std::string_view m : kMarkers) {
    if (body == m) return true;
  }
  return false;
}

bool is_register_line(std::string_view body) {
  if (starts_with(body, "Code: ") || starts_with(body, "RIP: ") || starts_with(body, "pc : ") ||
      starts_with(body, "lr : ") || starts_with(body, "sp : ")) {
    return true;
  }
  // x86: "RAX: 0000... RBX: ...", "R10: ...", "FS:  0000...", "CS:  0010 DS: ...",
  // "CR2: ...", "DR0: ...", "PKRU: 55555554"; arm64: "x29: ffff... x28: ...".
  size_t i = 0;
  while (i < body.size() && i < 5 && std::isalnum(static_cast<unsigned char>(body[i]))) ++i;
  if (i < 2 || i >= body.size() || body[i] != ':') return false;
  std::string_view name = body.substr(0, i);
  bool upper = true;
  for (char c : name) {
    if (std::islower(static_cast<unsigned char>(c))) upper = false;
  }
  bool arm = name[0] == 'x' && is_digit(name[1]);
  if (!upper && !arm) return false;
  std::string_view value = trim(body.substr(i + 1));
  size_t digits = 0;
  while (digits < value.size() && is_hex(value[digits])) ++digits;
  return digits >= 4 && (digits == value.size() || value[digits] == ' ' || value[digits] == ':' ||
                         value[digits] == '(');
}

bool is_equals_separator(std::string_view body) {
  if (body.size() < 10) return false;
  for (char c : body) {
    if (c != '=') return false;
  }
  return true;
}

bool is_cut_here(std::string_view body) {
  return contains(body, "[ cut here ]");
}

}  // namespace leapfrog::console::detail
