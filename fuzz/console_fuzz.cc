// libFuzzer target: the kernel console parser on arbitrary console text.

#include <cstdint>
#include <string>
#include <string_view>

#include "common/console/console_parser.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  for (const auto& report : leapfrog::console::parse_console(text))
    (void)leapfrog::console::report_is_fatal(report);
  // strip_console_prefix is decode_line(line).body, and parse_console has
  // just decoded every line: calling it on each line again added no coverage
  // and cost a fifth of the time. The first line runs its wrapper.
  (void)leapfrog::console::strip_console_prefix(text.substr(0, text.find('\n')));
  return 0;
}
