#pragma once
// Agent secrets (agent.proto's agent_secret): each Register hands out a fresh
// one; the coordinator keeps only its key, the SHA-256 the store compares
// (Store's `key`), so a database dump reveals no secret.

#include <string>

namespace leapfrog::coord {

// 32 random bytes (getrandom), hex.
std::string new_agent_secret();
// Hex SHA-256 of `secret` (64 digits).
std::string agent_key_of(const std::string& secret);

}  // namespace leapfrog::coord
