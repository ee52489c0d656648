// libFuzzer target: the HTTP API's request decoding. The bytes are a query
// string, a newline, and a body. The query goes through cpp-httplib's own
// parser into a Request, then query_uint() and path_id() as the routes call
// them; the body through json_body(), body_string() and, for a campaign,
// proto_from_json() then normalize(), as POST /api/schedules does, and the
// spec back out as every route prints it (proto_json). Every failure must
// be a RequestError (400) or a SpecError, never a crash, UB or another
// exception.
//
// The whole input is also a request as a client sends it, through the
// server's steps (connection_server.cc): Beast's parser with the server's
// head limit, then for a head that parses the framing check and the
// translation into the Request the handlers take. A head the check lets
// through never frames its body two ways.

#include <httplib.h>

#include <cstdint>
#include <regex>
#include <string>

#include "coordinator/campaign.h"
#include "coordinator/http/api.h"
#include "coordinator/http/proto_json.h"
#include "coordinator/http/request_head.h"

using namespace leapfrog;
using namespace leapfrog::coord;

namespace {

template <typename F>
void refused_or_ok(F f) {
  try {
    f();
  } catch (const RequestError& e) {
    if (e.kind() != ErrorKind::kInvalidArgument) __builtin_trap();
  } catch (const SpecError&) {
  }
}

// The server's steps for a head in `input`, checked as described above.
void head_steps(const std::string& input) {
  RequestParser parser;
  parser.header_limit(16 * 1024);
  parser.body_limit(1 << 20);
  boost::beast::error_code ec;
  parser.put(boost::asio::buffer(input), ec);
  if (ec || !parser.is_header_done() || !framing_fault(parser).empty()) return;
  const httplib::Request req = request_of(parser, {}, {});
  const size_t lengths = req.get_header_value_count("Content-Length");
  const size_t encodings = req.get_header_value_count("Transfer-Encoding");
  if (lengths > 1 || encodings > 1 || (lengths > 0 && encodings > 0)) __builtin_trap();
  const bool no_body = req.method == "GET" || req.method == "HEAD" || req.method == "OPTIONS";
  if (no_body && (encodings > 0 || parser.content_length().value_or(0) > 0)) __builtin_trap();
  if (req.path.empty() || req.target.empty() || req.target[0] != '/') __builtin_trap();
  refused_or_ok([&] { (void)query_uint(req, "limit", 50, 1, 1000); });
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string input(reinterpret_cast<const char*>(data), size);
  const size_t nl = input.find('\n');
  const std::string query = input.substr(0, nl);
  head_steps(input);

  httplib::Request req;
  httplib::detail::parse_query_text(query, req.params);
  if (nl != std::string::npos) req.body = input.substr(nl + 1);

  refused_or_ok([&] { (void)query_uint(req, "limit", 50, 1, 1000); });
  refused_or_ok([&] { (void)query_uint(req, "campaign", 0, 1, UINT32_MAX); });
  // A path capture, as the router's regex makes it.
  static const std::regex route("/api/campaigns/([^/]+)");
  const std::string path = "/api/campaigns/" + query;
  if (std::regex_match(path, req.matches, route)) refused_or_ok([&] { (void)path_id(req, 1); });

  refused_or_ok([&] {
    const nlohmann::json body = json_body(req);
    (void)body_string(body, "name", false);
    (void)body_string(body, "status", false);
    const nlohmann::json& spec_json = body.contains("campaign") ? body.at("campaign") : body;
    v1::CampaignSpec parsed;
    proto_from_json(spec_json, parsed, "campaign");
    const v1::CampaignSpec spec = normalize(parsed);
    (void)proto_json(spec).dump();
  });
  return 0;
}
