#pragma once
// Tests: one plain HTTP GET on 127.0.0.1, written by hand (no client library).

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

namespace leapfrog::testing {

struct Answer {
  int status = 0;  // 0: no answer
  std::string head, body;
};

// GET `path` on 127.0.0.1:`port`, the connection closed after the answer.
inline Answer http_get(int port, const std::string& path) {
  Answer a;
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    ::close(fd);
    return a;
  }
  const std::string req = "GET " + path + " HTTP/1.1\r\nHost: 127.0.0.1:" + std::to_string(port) +
                          "\r\nConnection: close\r\n\r\n";
  ::send(fd, req.data(), req.size(), MSG_NOSIGNAL);
  std::string all;
  for (;;) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 20'000) <= 0) break;
    char buf[65536];
    const ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
    if (n <= 0) break;
    all.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  const auto end = all.find("\r\n\r\n");
  if (end == std::string::npos) return a;
  a.head = all.substr(0, end);
  a.body = all.substr(end + 4);
  a.status = std::atoi(a.head.c_str() + a.head.find(' ') + 1);
  return a;
}

// The port of a URL "http://HOST:PORT" (a trailing newline or path allowed).
inline int url_port(const std::string& url) {
  const auto colon = url.rfind(':');
  return colon == std::string::npos ? 0 : std::atoi(url.c_str() + colon + 1);
}

}  // namespace leapfrog::testing
