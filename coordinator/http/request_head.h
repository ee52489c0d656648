#pragma once
// A request head as Boost.Beast parsed it, judged and handed on: the framing
// rules that close the request-smuggling holes (issue 41 §3), and the
// translation into cpp-httplib's Request, which the handlers take.

#include <httplib.h>

#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/string_body.hpp>
#include <string>

namespace leapfrog::coord {

using RequestParser = boost::beast::http::request_parser<boost::beast::http::string_body>;

// Why a whole head that parsed is still refused with 400, or "" if it is
// not: framing a proxy in front could read otherwise (Content-Length with
// Transfer-Encoding, two Content-Lengths, a Transfer-Encoding other than
// chunked, a body on GET, HEAD or OPTIONS), and forms this server does not
// serve (an unknown method, a version other than 1.0 and 1.1, a target that
// is not a path).
std::string framing_fault(const RequestParser& parser);

// The head as cpp-httplib's request: method, target, its path decoded and
// its query parsed as cpp-httplib does, every header field in order, the
// endpoints. No body and no ranges.
httplib::Request request_of(const RequestParser& parser,
                            const boost::asio::ip::tcp::endpoint& remote,
                            const boost::asio::ip::tcp::endpoint& local);

}  // namespace leapfrog::coord
