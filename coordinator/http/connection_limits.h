#pragma once
// How the HTTP server holds connections (connection_server.h): pool size,
// backlog, deadlines and caps. The defaults suit a dashboard on loopback.

#include <chrono>
#include <cstddef>

namespace leapfrog::coord {

// Sent on every answer. Scripts, styles, fetches and frames only from this
// origin; inline style attributes stay allowed (the dashboard's progress
// bars and charts set them), inline scripts do not.
inline constexpr const char* kContentSecurityPolicy =
    "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
    "img-src 'self' data:; connect-src 'self'; object-src 'none'; base-uri 'none'; "
    "frame-ancestors 'none'; form-action 'self'";

struct ConnectionLimits {
  // Threads answering requests (a request holds one only while it is read,
  // handled and written).
  int workers = 16;
  int listen_backlog = 1024;
  // Connections held at once; past it new ones are closed at once.
  size_t max_connections = 2048;
  // From connect (or from the first byte after an idle wait) to a whole
  // request head; a slower client is answered 408 and closed.
  std::chrono::milliseconds head_deadline{10'000};
  // An idle keep-alive connection is closed after this.
  std::chrono::milliseconds idle_timeout{5'000};
  // Reading one request's body, and each stalled write of its answer.
  std::chrono::milliseconds body_deadline{30'000};
  std::chrono::milliseconds write_stall{10'000};
  // Request line plus headers; larger heads are answered 431.
  size_t max_head_bytes = 16 * 1024;
  // Bytes one request may read past its head, framing included (a chunked
  // body's chunk lines count too). Past it the request fails with 413. The
  // API's bodies are capped at 1 MiB; the rest is room for chunk framing.
  size_t max_body_bytes = (1 << 20) + (64 << 10);
};

}  // namespace leapfrog::coord
