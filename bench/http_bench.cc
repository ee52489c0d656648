// The dashboard's HTTP server under load: a real `leapfrog serve` (embedded
// PostgreSQL), then rounds of 200 clients that each connect at once and GET
// /api/overview, timed from connect to the last byte of the answer, first
// alone and then with 16 keep-alive clients polling every 2 s (a few
// dashboard tabs) and 10 slowloris clients trickling request heads (issue 18:
// with cpp-httplib's defaults, 8 threads and a backlog of 5, p99 was 1.2 s
// and the max 14.6 s, mostly dropped SYNs, and the pollers locked everyone
// out). Prints p50/p99/max and the failures (no answer within 10 s). Runs as root (PostgreSQL then
// runs as `postgres`); its folder under /var/tmp is removed at the end.

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "coordinator/pg/test_dir.h"
#include "tests/process_util.h"

namespace {

using namespace std::chrono_literals;
using leapfrog::testing::poll_until;
using leapfrog::testing::Proc;
using leapfrog::testing::slurp;
using leapfrog::testing::tail_of;
using SteadyClock = std::chrono::steady_clock;

constexpr int kClients = 200;
constexpr int kRounds = 5;
constexpr auto kGiveUp = 10s;
constexpr int kPollers = 16;
constexpr int kSlowloris = 10;

int connect_to(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

std::string request(int port, bool keep_alive) {
  return "GET /api/overview HTTP/1.1\r\nHost: 127.0.0.1:" + std::to_string(port) + "\r\n" +
         (keep_alive ? "" : "Connection: close\r\n") + "\r\n";
}

// Reads one answer with a Content-Length; false on error or timeout.
bool read_answer(int fd, SteadyClock::time_point until) {
  std::string buf;
  char b[16 * 1024];
  size_t need = std::string::npos;
  for (;;) {
    if (need != std::string::npos && buf.size() >= need) return buf.compare(9, 3, "200") == 0;
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(until - SteadyClock::now());
    pollfd p{fd, POLLIN, 0};
    if (left.count() <= 0 || ::poll(&p, 1, static_cast<int>(left.count())) <= 0) return false;
    const ssize_t n = ::recv(fd, b, sizeof(b), 0);
    if (n <= 0) return false;
    buf.append(b, static_cast<size_t>(n));
    const auto end = buf.find("\r\n\r\n");
    if (need == std::string::npos && end != std::string::npos) {
      const auto at = buf.find("Content-Length: ");
      if (at == std::string::npos || at > end) return false;
      need = end + 4 + std::stoul(buf.substr(at + 16));
    }
  }
}

// One client: connect, GET, read; its latency in ms, or -1.
double one_get(int port) {
  const auto t0 = SteadyClock::now();
  const int fd = connect_to(port);
  if (fd < 0) return -1;
  const std::string req = request(port, false);
  bool ok = ::send(fd, req.data(), req.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(req.size()) &&
            read_answer(fd, t0 + kGiveUp);
  ::close(fd);
  if (!ok) return -1;
  return std::chrono::duration<double, std::milli>(SteadyClock::now() - t0).count();
}

struct Figures {
  std::vector<double> ms;
  int failed = 0;
};

Figures rounds(int port) {
  Figures f;
  for (int r = 0; r < kRounds; ++r) {
    std::vector<double> got(kClients, -1);
    std::vector<std::thread> threads;
    std::atomic<bool> go{false};
    for (int i = 0; i < kClients; ++i)
      threads.emplace_back([&, i] {
        while (!go) std::this_thread::yield();
        got[i] = one_get(port);
      });
    go = true;
    for (auto& t : threads) t.join();
    for (double v : got) {
      if (v < 0)
        ++f.failed;
      else
        f.ms.push_back(v);
    }
  }
  std::sort(f.ms.begin(), f.ms.end());
  return f;
}

void print(const char* what, const Figures& f) {
  auto q = [&](double p) {
    return f.ms.empty() ? 0.0 : f.ms[static_cast<size_t>(p * (f.ms.size() - 1))];
  };
  std::printf("%-44s %6zu %9.1f %9.1f %9.1f %7d\n", what, f.ms.size(), q(0.5), q(0.99),
              f.ms.empty() ? 0.0 : f.ms.back(), f.failed);
}

}  // namespace

// argv[1], if given: another `leapfrog` binary to measure (an older build).
int main(int argc, char** argv) {
  const std::string exe = argc > 1 ? argv[1] : LEAPFROG;
  leapfrog::coord::testing::TestDir dir;
  const std::string data = dir / "data";
  std::filesystem::create_directories(data);
  Proc serve(
      {LEAPFROG, "serve", "--data-dir", data, "--listen", "127.0.0.1:0", "--http", "127.0.0.1:0"},
      dir / "serve.out", dir / "serve.err");
  if (!poll_until([&] { return !slurp(data + "/http").empty() || serve.exited(); }, 60s) ||
      serve.exited()) {
    std::fprintf(stderr, "http bench: the coordinator did not start: %s\n",
                 tail_of(dir / "serve.err", 2000).c_str());
    return 1;
  }
  const std::string url = slurp(data + "/http");
  const int port = std::stoi(url.substr(url.rfind(':') + 1));

  std::printf("%d concurrent GET /api/overview, %d rounds, ms from connect to the whole answer\n",
              kClients, kRounds);
  std::printf("%-44s %6s %9s %9s %9s %7s\n", "", "ok", "p50", "p99", "max", "failed");
  print("alone", rounds(port));

  // The lock-out: keep-alive pollers and slowloris heads, meanwhile.
  std::atomic<bool> stop{false};
  std::vector<std::thread> pests;
  for (int i = 0; i < kPollers; ++i)
    pests.emplace_back([&] {
      int fd = -1;
      while (!stop) {
        if (fd < 0) fd = connect_to(port);
        const std::string req = request(port, true);
        if (fd >= 0 && (::send(fd, req.data(), req.size(), MSG_NOSIGNAL) <= 0 ||
                        !read_answer(fd, SteadyClock::now() + kGiveUp))) {
          ::close(fd);
          fd = -1;
        }
        for (int t = 0; t < 20 && !stop; ++t) std::this_thread::sleep_for(100ms);  // the poll pace
      }
      if (fd >= 0) ::close(fd);
    });
  for (int i = 0; i < kSlowloris; ++i)
    pests.emplace_back([&] {
      int fd = connect_to(port);
      const std::string head = request(port, true);
      size_t at = 0;
      while (!stop) {
        if (fd < 0 || ::send(fd, head.data() + at % (head.size() - 4), 1, MSG_NOSIGNAL) <= 0) {
          if (fd >= 0) ::close(fd);
          fd = connect_to(port);  // cut off: start again, as an attacker would
          at = 0;
        }
        ++at;
        for (int t = 0; t < 10 && !stop; ++t)
          std::this_thread::sleep_for(100ms);  // a byte a second
      }
      if (fd >= 0) ::close(fd);
    });
  std::this_thread::sleep_for(2s);  // let the pests settle in before measuring
  print("with 16 keep-alive pollers and 10 slowloris", rounds(port));
  stop = true;
  for (auto& t : pests) t.join();
  serve.stop();
  return 0;
}
