// The request helpers of api.h: bodies, path ids, query parameters. Their own
// file so that fuzz/http_request_fuzz.cc compiles them without the server.

#include <httplib.h>

#include "coordinator/http/api.h"

namespace leapfrog::coord {

using nlohmann::json;

json json_body(const httplib::Request& req) {
  json body = json::parse(req.body, nullptr, false);
  if (body.is_discarded())
    throw RequestError(ErrorKind::kInvalidArgument, "the request body is not JSON");
  if (!body.is_object())
    throw RequestError(ErrorKind::kInvalidArgument, "the request body must be a JSON object");
  return body;
}

int64_t path_id(const httplib::Request& req, size_t i) {
  const std::string text = req.matches[i];
  try {
    size_t used = 0;
    const long long id = std::stoll(text, &used);
    if (used == text.size() && id > 0) return id;
  } catch (const std::exception&) {
  }
  throw RequestError(ErrorKind::kInvalidArgument, "bad id \"" + text + "\"");
}

uint32_t query_uint(const httplib::Request& req, const std::string& name, uint32_t fallback,
                    uint32_t lo, uint32_t hi) {
  if (!req.has_param(name.c_str())) return fallback;
  const std::string text = req.get_param_value(name.c_str());
  try {
    size_t used = 0;
    const unsigned long v = std::stoul(text, &used);
    if (used == text.size() && v >= lo && v <= hi) return static_cast<uint32_t>(v);
  } catch (const std::exception&) {
  }
  throw RequestError(
      ErrorKind::kInvalidArgument,
      "bad " + name + " \"" + text + "\", want " + std::to_string(lo) + ".." + std::to_string(hi));
}

std::string query_page(const httplib::Request& req) {
  return req.has_param("page") ? req.get_param_value("page") : "";
}

std::string body_string(const json& body, const std::string& key, bool required) {
  auto it = body.find(key);
  if (it == body.end() || it->is_null()) {
    if (required) throw RequestError(ErrorKind::kInvalidArgument, "\"" + key + "\" is missing");
    return "";
  }
  if (!it->is_string())
    throw RequestError(ErrorKind::kInvalidArgument, "\"" + key + "\" must be a string");
  return it->get<std::string>();
}

}  // namespace leapfrog::coord
