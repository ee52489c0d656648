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
  // Threads running handlers (a request holds one only while its handler
  // runs: never while it is read or its answer written).
  int workers = 16;
  int listen_backlog = 1024;
  // Connections held at once; past it new ones are answered 503 and closed.
  size_t max_connections = 2048;
  // From connect (or from the first byte after an idle wait) to a whole
  // request head; a slower client is answered 408 and closed.
  std::chrono::milliseconds head_deadline{10'000};
  // An idle keep-alive connection is closed after this.
  std::chrono::milliseconds idle_timeout{5'000};
  // From the head to the whole body; a slower client is answered 408.
  std::chrono::milliseconds body_deadline{30'000};
  // For the whole of one answer to be taken by the client; past it the
  // connection is reset, and the rest of the answer dropped.
  std::chrono::milliseconds write_deadline{60'000};
  // Request line plus headers; larger heads are answered 431.
  size_t max_head_bytes = 16 * 1024;
  // Bytes of one request's body, however it is framed (a chunked body's
  // decoded bytes). Past it the request is answered 413. The API's bodies
  // are capped at 1 MiB.
  size_t max_body_bytes = 1 << 20;
};

}  // namespace leapfrog::coord
