#include "scenarios/shared_region.h"

#include <sys/mman.h>

#include <cerrno>
#include <fstream>
#include <system_error>

#include "scenarios/clock.h"

namespace leapfrog {

SharedRegion::SharedRegion(size_t bytes) : size_(bytes) {
  data_ = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (data_ == MAP_FAILED) {
    data_ = nullptr;
    throw std::system_error(errno, std::generic_category(), "mmap of " + std::to_string(bytes) + " shared bytes");
  }
}

SharedRegion::~SharedRegion() {
  if (data_) munmap(data_, size_);
}

std::string clock_source() {
  std::ifstream in("/sys/devices/system/clocksource/clocksource0/current_clocksource");
  std::string s;
  if (!(in >> s)) return "unknown";
  return s;
}

}  // namespace leapfrog
