#pragma once
// Lowercase hex of raw bytes: digests, tokens, bytea literals.

#include <cstddef>
#include <string>
#include <string_view>

namespace leapfrog {

// Two lowercase hex digits per byte, in order.
std::string hex_encode(const void* data, size_t size);
inline std::string hex_encode(std::string_view bytes) {
  return hex_encode(bytes.data(), bytes.size());
}

}  // namespace leapfrog
