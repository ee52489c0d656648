#pragma once
// POSTs a KCIDB document to a KCIDB-style submission endpoint
// (`leapfrog export --submit URL --token-file F`): JSON body,
// "Authorization: Bearer <token>". http:// and https:// URLs.

#include <string>

namespace leapfrog::coord::exports {

struct SubmitResult {
  int status = 0;    // HTTP status
  std::string body;  // the answer's body
};

// Throws std::runtime_error for a malformed URL, a connection failure or an
// answer other than 2xx (with the status and the body's start).
SubmitResult submit(const std::string& url, const std::string& token, const std::string& json);

}  // namespace leapfrog::coord::exports
