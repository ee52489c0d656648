#pragma once
// Where a webhook may go (issue 41 §2). A URL is taken apart strictly (http
// or https, no user or password, an IPv4 address only as four decimal
// numbers); its host is resolved once, and every address it resolved to must
// pass the operator's allow-list (`serve --webhook-allow HOST|CIDR`), or,
// without one, be a public address: loopback, private, link-local, shared,
// multicast, reserved and documentation ranges (IPv4 and IPv6, IPv4 inside
// IPv6 included) and the cloud metadata address are refused. The sender then
// connects only to the addresses checked (senders.h), so a name cannot
// resolve to one address at the check and another at the connect.

#include <sys/socket.h>

#include <array>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace leapfrog::coord::notify {

// An IPv4 or IPv6 address; an IPv4-mapped IPv6 address (::ffff:a.b.c.d) is
// held as the IPv4 address it maps.
struct IpAddress {
  bool v6 = false;
  std::array<uint8_t, 16> bytes{};  // network order; IPv4 in the first 4

  // Parses a literal ("10.0.0.1", "::1"; no brackets, no zone); false if it is none.
  static bool parse(const std::string& text, IpAddress& out);
  // From a socket address (AF_INET or AF_INET6); false for another family.
  static bool from_sockaddr(const struct sockaddr* sa, IpAddress& out);
  std::string text() const;
  bool operator==(const IpAddress&) const = default;
};

// A webhook URL taken apart (parse_webhook_url).
struct WebhookUrl {
  std::string scheme;  // "http" or "https"
  std::string host;    // lower case; an IPv6 literal without its brackets
  bool host_is_ip = false;
  uint16_t port = 0;   // as written, or the scheme's
  std::string target;  // the path and query, from its '/' ("/" if none)

  // The URL rebuilt from its parts: what the sender hands to libcurl, so the
  // host it connects to is the host checked here.
  std::string url() const;
};

// Takes `url` apart; throws SubscriptionError saying what is wrong: a scheme
// other than http(s), a user or password, no host or a host that is neither a
// DNS name nor an address, an IPv4 address written other than as four decimal
// numbers (2130706433, 0x7f000001, 0177.0.0.1, 127.1), a bad port, white space
// or control characters.
WebhookUrl parse_webhook_url(const std::string& url);

// What kind of internal address `a` is ("a loopback address", "the cloud
// metadata address", ...), or "" for a public one.
std::string internal_range(const IpAddress& a);

// A destination that passed the policy: the URL and the addresses (one
// resolution's) a delivery may connect to.
struct WebhookDestination {
  WebhookUrl url;
  std::vector<IpAddress> addresses;
};

class WebhookPolicy {
 public:
  // Returns a name's addresses; empty if it does not resolve.
  using Resolver = std::function<std::vector<IpAddress>(const std::string& host)>;

  // `allow`: the operator's entries, each a DNS name (that host, exactly), an
  // address or a CIDR network (10.1.0.0/16, fd00::/8). Empty: public
  // addresses only. Throws std::invalid_argument naming a bad entry.
  // `resolve` defaults to getaddrinfo(3).
  explicit WebhookPolicy(const std::vector<std::string>& allow = {}, Resolver resolve = nullptr);

  // Parses `url`, resolves its host once and checks every address: each must
  // lie in a listed network, or be public and (with a list) have its host
  // listed by name. Throws SubscriptionError with the reason; the reason of
  // a name's refusal does not say which address it resolved to.
  WebhookDestination check(const std::string& url) const;

  // Whether `a` is one of `dest`'s checked addresses (the sender's last
  // check before it opens a socket).
  static bool connects_to(const WebhookDestination& dest, const IpAddress& a);

 private:
  struct Network {
    IpAddress base;
    int prefix = 0;
  };
  bool listed(const IpAddress& a) const;

  std::vector<std::string> names_;
  std::vector<Network> networks_;
  Resolver resolve_;
};

}  // namespace leapfrog::coord::notify
