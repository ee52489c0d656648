#include "coordinator/http/request_head.h"

#include <boost/beast/core/string.hpp>
#include <iterator>

namespace leapfrog::coord {

namespace http = boost::beast::http;

namespace {

bool known_method(http::verb v) {
  switch (v) {
    case http::verb::get:
    case http::verb::head:
    case http::verb::post:
    case http::verb::put:
    case http::verb::delete_:
    case http::verb::options:
    case http::verb::patch:
      return true;
    default:
      return false;
  }
}

size_t count_fields(const http::fields& fields, http::field name) {
  const auto [first, last] = fields.equal_range(name);
  return static_cast<size_t>(std::distance(first, last));
}

}  // namespace

std::string framing_fault(const RequestParser& parser) {
  const auto& head = parser.get();
  if (!known_method(head.method())) return "unknown method";
  if (head.version() != 10 && head.version() != 11) return "unsupported HTTP version";
  if (head.target().empty() || head.target()[0] != '/') return "the target is not a path";
  const size_t lengths = count_fields(head, http::field::content_length);
  const size_t encodings = count_fields(head, http::field::transfer_encoding);
  // Beast refuses two different lengths, and a length after chunked; equal
  // lengths, and a length with another coding, are refused here.
  if (lengths > 1) return "more than one Content-Length";
  if (encodings > 1) return "more than one Transfer-Encoding";
  if (lengths > 0 && encodings > 0) return "both Content-Length and Transfer-Encoding";
  if (encodings > 0 && !boost::beast::iequals(head[http::field::transfer_encoding], "chunked"))
    return "a Transfer-Encoding other than chunked";
  const bool no_body = head.method() == http::verb::get || head.method() == http::verb::head ||
                       head.method() == http::verb::options;
  if (no_body && (parser.chunked() || parser.content_length().value_or(0) > 0))
    return "a body on " + std::string(head.method_string());
  return "";
}

httplib::Request request_of(const RequestParser& parser,
                            const boost::asio::ip::tcp::endpoint& remote,
                            const boost::asio::ip::tcp::endpoint& local) {
  const auto& head = parser.get();
  httplib::Request r;
  r.method = std::string(head.method_string());
  r.version = head.version() == 10 ? "HTTP/1.0" : "HTTP/1.1";
  r.target = std::string(head.target());
  const size_t q = r.target.find('?');
  r.path = httplib::detail::decode_url(r.target.substr(0, q), false);
  if (q != std::string::npos) httplib::detail::parse_query_text(r.target.substr(q + 1), r.params);
  for (const auto& f : head)
    r.headers.emplace(std::string(f.name_string()), std::string(f.value()));
  r.remote_addr = remote.address().to_string();
  r.remote_port = remote.port();
  r.local_addr = local.address().to_string();
  r.local_port = local.port();
  return r;
}

}  // namespace leapfrog::coord
