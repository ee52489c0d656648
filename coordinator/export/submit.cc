// KCIDB submission over HTTP (submit.h).

#include "coordinator/export/submit.h"

#include <httplib.h>

#include <stdexcept>

namespace leapfrog::coord::exports {

SubmitResult submit(const std::string& url, const std::string& token, const std::string& json) {
  const size_t scheme = url.find("://");
  if (scheme == std::string::npos ||
      (url.compare(0, scheme, "http") != 0 && url.compare(0, scheme, "https") != 0))
    throw std::runtime_error("bad submission URL \"" + url +
                             "\": want http://HOST[:PORT]/PATH or https://...");
  const size_t path_at = url.find('/', scheme + 3);
  const std::string origin = url.substr(0, path_at);
  const std::string path = path_at == std::string::npos ? "/" : url.substr(path_at);
  httplib::Client client(origin);
  client.set_connection_timeout(10);
  client.set_read_timeout(60);
  httplib::Headers headers;
  if (!token.empty()) headers.emplace("Authorization", "Bearer " + token);
  auto res = client.Post(path, headers, json, "application/json");
  if (!res)
    throw std::runtime_error("cannot submit to \"" + url +
                             "\": " + httplib::to_string(res.error()));
  if (res->status < 200 || res->status > 299)
    throw std::runtime_error("submission to \"" + url + "\" answered " +
                             std::to_string(res->status) + ": " + res->body.substr(0, 300));
  return {res->status, res->body};
}

}  // namespace leapfrog::coord::exports
