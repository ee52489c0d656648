// libFuzzer target: the kernel console parser on arbitrary console text.

#include <cstdint>
#include <string>
#include <string_view>

#include "common/console/console_parser.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  for (const auto& report : leapfrog::console::parse_console(text))
    (void)leapfrog::console::report_is_fatal(report);
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    (void)leapfrog::console::strip_console_prefix(text.substr(start, end - start));
    start = end + 1;
  }
  return 0;
}
