#include "common/token.h"

#include <sys/random.h>

#include <fstream>
#include <stdexcept>

#include "common/hex.h"

namespace leapfrog {

grpc::Status TokenAuth::check(const grpc::ServerContextBase& ctx) const {
  const auto& md = ctx.client_metadata();
  auto it = md.find("authorization");
  if (it == md.end())
    return grpc::Status(grpc::StatusCode::UNAUTHENTICATED, "missing token: send \"authorization: Bearer <token>\"");
  const std::string value(it->second.data(), it->second.size());
  const std::string prefix = "Bearer ";
  if (value.rfind(prefix, 0) != 0)
    return grpc::Status(grpc::StatusCode::UNAUTHENTICATED, "malformed authorization header, want \"Bearer <token>\"");
  const std::string given = value.substr(prefix.size());
  // Constant-time comparison.
  unsigned char diff = given.size() != token_.size();
  for (size_t i = 0; i < given.size() && i < token_.size(); ++i) diff |= given[i] ^ token_[i];
  if (diff) return grpc::Status(grpc::StatusCode::UNAUTHENTICATED, "wrong token");
  return grpc::Status::OK;
}

std::string read_token_file(const std::string& path) {
  std::ifstream in(path);
  std::string token;
  if (!in || !std::getline(in, token)) throw std::runtime_error("cannot read token file \"" + path + "\"");
  const auto first = token.find_first_not_of(" \t\r\n");
  const auto last = token.find_last_not_of(" \t\r\n");
  if (first == std::string::npos) throw std::runtime_error("token file \"" + path + "\" is empty");
  return token.substr(first, last - first + 1);
}

std::string generate_token() {
  unsigned char raw[32];
  size_t got = 0;
  while (got < sizeof raw) {
    const ssize_t n = getrandom(raw + got, sizeof raw - got, 0);
    if (n < 0) throw std::runtime_error("getrandom failed");
    got += static_cast<size_t>(n);
  }
  return hex_encode(raw, sizeof raw);
}

}  // namespace leapfrog
