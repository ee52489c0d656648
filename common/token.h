#pragma once
// Token authentication: every call carries "authorization: Bearer <token>".

#include <grpcpp/grpcpp.h>

#include <string>

namespace leapfrog {

class TokenAuth {
 public:
  explicit TokenAuth(std::string token) : token_(std::move(token)) {}
  // OK, or UNAUTHENTICATED saying whether the token was missing or wrong.
  // Takes the base of both the sync and the callback API's contexts.
  grpc::Status check(const grpc::ServerContextBase& ctx) const;

 private:
  std::string token_;
};

// Reads a token file (first line, whitespace trimmed); throws std::runtime_error.
std::string read_token_file(const std::string& path);
// A new random token (32 bytes from getrandom, hex).
std::string generate_token();

}  // namespace leapfrog
