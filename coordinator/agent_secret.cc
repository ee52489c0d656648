#include "coordinator/agent_secret.h"

#include <openssl/evp.h>

#include <stdexcept>

#include "common/hex.h"
#include "common/token.h"

namespace leapfrog::coord {

std::string new_agent_secret() {
  return generate_token();
}

std::string agent_key_of(const std::string& secret) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int size = 0;
  if (EVP_Digest(secret.data(), secret.size(), digest, &size, EVP_sha256(), nullptr) != 1)
    throw std::runtime_error("SHA-256 failed");
  return hex_encode(digest, size);
}

}  // namespace leapfrog::coord
