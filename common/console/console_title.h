#pragma once
// Titles of kernel reports: which function a report blames and how free text is
// normalised so that two runs of the same bug give the same title. Internal to
// leapfrog_console.

#include <string>
#include <string_view>
#include <vector>

#include "common/console/console_lines.h"

namespace leapfrog::console::detail {

// Title of a report of `kind` whose header is lines[header] and whose lines end at
// lines[last] (inclusive).
std::string make_title(std::string_view kind, const std::vector<ConsoleLine>& lines, size_t header,
                       size_t last);

// Drops numbers, hex values and addresses that stand as words of their own (so
// `ext4` and `e1000_main.c` survive), then collapses blanks and trailing
// punctuation.
std::string normalise_text(std::string_view text);

// True for functions that say nothing about a bug: report machinery, string and
// copy helpers, locking and scheduling primitives, idle and entry code.
bool is_generic_function(std::string_view func);

}  // namespace leapfrog::console::detail
