#include "common/hex.h"

namespace leapfrog {

std::string hex_encode(const void* data, size_t size) {
  static const char* digits = "0123456789abcdef";
  const auto* bytes = static_cast<const unsigned char*>(data);
  std::string out(size * 2, '\0');
  for (size_t i = 0; i < size; ++i) {
    out[2 * i] = digits[bytes[i] >> 4];
    out[2 * i + 1] = digits[bytes[i] & 15];
  }
  return out;
}

}  // namespace leapfrog
