// Where a webhook may go (webhook_policy.h).

#include "coordinator/notify/webhook_policy.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>

#include <algorithm>
#include <cstring>
#include <stdexcept>

#include "coordinator/notify/outbox.h"

namespace leapfrog::coord::notify {

namespace {

constexpr size_t kMaxUrl = 2048;

// A quoted piece of what the caller sent, bounded.
std::string quoted(const std::string& s) {
  return "\"" + (s.size() > 200 ? s.substr(0, 200) + "..." : s) + "\"";
}

std::string lower(std::string s) {
  for (char& c : s)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  return s;
}

bool all_of(const std::string& s, bool (*pred)(char)) {
  return !s.empty() && std::all_of(s.begin(), s.end(), pred);
}
bool digit(char c) {
  return c >= '0' && c <= '9';
}
bool hex_digit(char c) {
  return digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

// IPv4 as four decimal numbers, each 0-255 without leading zeros: the one
// spelling accepted (inet_aton's 2130706433, 0x7f.1 and 0177.0.0.1 are not).
bool parse_v4(const std::string& s, std::array<uint8_t, 16>& bytes) {
  size_t at = 0;
  for (int i = 0; i < 4; ++i) {
    const size_t end = i < 3 ? s.find('.', at) : s.size();
    if (end == std::string::npos) return false;
    const std::string part = s.substr(at, end - at);
    if (part.empty() || part.size() > 3 || !all_of(part, digit) ||
        (part.size() > 1 && part[0] == '0'))
      return false;
    const int v = std::stoi(part);
    if (v > 255) return false;
    bytes[i] = static_cast<uint8_t>(v);
    at = end + 1;
  }
  return true;
}

// A DNS name: labels of letters, digits, '-' and '_', 1-63 bytes, not
// starting or ending with '-', 253 bytes at most. Its last label must not be
// a number (that would be an IPv4 address in another spelling).
bool dns_name(const std::string& host, bool& numeric_tail) {
  numeric_tail = false;
  if (host.empty() || host.size() > 253) return false;
  size_t at = 0;
  std::string label;
  while (at <= host.size()) {
    const size_t end = std::min(host.find('.', at), host.size());
    label = host.substr(at, end - at);
    if (label.empty() || label.size() > 63 || label.front() == '-' || label.back() == '-')
      return false;
    for (char c : label)
      if (!(digit(c) || (c >= 'a' && c <= 'z') || c == '-' || c == '_')) return false;
    at = end + 1;
  }
  numeric_tail = all_of(label, digit) || (label.size() > 1 && label[0] == '0' && label[1] == 'x' &&
                                          std::all_of(label.begin() + 2, label.end(), hex_digit));
  return !numeric_tail;
}

bool in_network(const IpAddress& a, const IpAddress& base, int prefix) {
  if (a.v6 != base.v6) return false;
  for (int i = 0; prefix > 0; ++i, prefix -= 8) {
    const uint8_t mask = prefix >= 8 ? 0xff : static_cast<uint8_t>(0xff << (8 - prefix));
    if ((a.bytes[i] & mask) != (base.bytes[i] & mask)) return false;
  }
  return true;
}

// An address or a CIDR network ("10.0.0.0/8", "::1"); false if `s` is neither.
bool parse_network(const std::string& s, IpAddress& base, int& prefix) {
  const size_t slash = s.find('/');
  const std::string addr = s.substr(0, slash);
  if (!IpAddress::parse(addr, base)) return false;
  const int bits = base.v6 ? 128 : 32;
  if (slash == std::string::npos) {
    prefix = bits;
    return true;
  }
  const std::string p = s.substr(slash + 1);
  if (p.empty() || p.size() > 3 || !all_of(p, digit)) return false;
  prefix = std::stoi(p);
  // An IPv4-mapped network (::ffff:10.0.0.0/104) is the IPv4 one.
  if (!base.v6 && addr.find(':') != std::string::npos) prefix -= 96;
  return prefix >= 0 && prefix <= bits;
}

struct Range {
  IpAddress base;
  int prefix;
  const char* what;
};

// Checked in order: the first that holds names the address.
const std::vector<Range>& internal_ranges() {
  static const std::vector<Range> ranges = [] {
    const std::vector<std::pair<const char*, const char*>> table = {
        {"0.0.0.0/8", "a \"this network\" address"},
        {"10.0.0.0/8", "a private address"},
        {"100.64.0.0/10", "a shared (carrier-grade NAT) address"},
        {"127.0.0.0/8", "a loopback address"},
        {"169.254.169.254/32", "the cloud metadata address"},
        {"169.254.0.0/16", "a link-local address"},
        {"172.16.0.0/12", "a private address"},
        {"192.0.0.0/24", "an IETF protocol address"},
        {"192.0.2.0/24", "a documentation address"},
        {"192.88.99.0/24", "a 6to4 relay address"},
        {"192.168.0.0/16", "a private address"},
        {"198.18.0.0/15", "a benchmarking address"},
        {"198.51.100.0/24", "a documentation address"},
        {"203.0.113.0/24", "a documentation address"},
        {"224.0.0.0/4", "a multicast address"},
        {"240.0.0.0/4", "a reserved address"},
        {"::/128", "the unspecified address"},
        {"::1/128", "a loopback address"},
        {"::/96", "an IPv4-compatible address"},
        {"64:ff9b::/96", "a NAT64 address (it embeds an IPv4 address)"},
        {"64:ff9b:1::/48", "a NAT64 address (it embeds an IPv4 address)"},
        {"100::/64", "a discard address"},
        {"2001::/32", "a Teredo address (it embeds an IPv4 address)"},
        {"2001::/23", "an IETF protocol address"},
        {"2001:db8::/32", "a documentation address"},
        {"2002::/16", "a 6to4 address (it embeds an IPv4 address)"},
        {"fd00:ec2::254/128", "the cloud metadata address"},
        {"fc00::/7", "a private (unique local) address"},
        {"fe80::/10", "a link-local address"},
        {"fec0::/10", "a site-local address"},
        {"ff00::/8", "a multicast address"},
    };
    std::vector<Range> out;
    for (const auto& [cidr, what] : table) {
      Range r{{}, 0, what};
      if (!parse_network(cidr, r.base, r.prefix)) throw std::logic_error(cidr);
      out.push_back(r);
    }
    return out;
  }();
  return ranges;
}

std::vector<IpAddress> getaddrinfo_resolver(const std::string& host) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  std::vector<IpAddress> out;
  if (getaddrinfo(host.c_str(), nullptr, &hints, &res) != 0) return out;
  for (const addrinfo* ai = res; ai; ai = ai->ai_next) {
    IpAddress a;
    if (IpAddress::from_sockaddr(ai->ai_addr, a)) out.push_back(a);
  }
  freeaddrinfo(res);
  return out;
}

const char* const kAllowHint =
    "; the coordinator's operator may allow it with `leapfrog serve --webhook-allow`";

}  // namespace

bool IpAddress::parse(const std::string& text, IpAddress& out) {
  IpAddress a;
  if (text.find(':') == std::string::npos) {
    if (!parse_v4(text, a.bytes)) return false;
    out = a;
    return true;
  }
  in6_addr in6{};
  if (text.find('%') != std::string::npos || inet_pton(AF_INET6, text.c_str(), &in6) != 1)
    return false;
  static const uint8_t kMapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  if (std::memcmp(in6.s6_addr, kMapped, 12) == 0) {
    std::memcpy(a.bytes.data(), in6.s6_addr + 12, 4);
  } else {
    a.v6 = true;
    std::memcpy(a.bytes.data(), in6.s6_addr, 16);
  }
  out = a;
  return true;
}

bool IpAddress::from_sockaddr(const struct sockaddr* sa, IpAddress& out) {
  char text[INET6_ADDRSTRLEN] = "";
  if (sa->sa_family == AF_INET) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(sa);
    IpAddress a;
    std::memcpy(a.bytes.data(), &in->sin_addr, 4);
    out = a;
    return true;
  }
  if (sa->sa_family != AF_INET6) return false;
  const auto* in6 = reinterpret_cast<const sockaddr_in6*>(sa);
  if (!inet_ntop(AF_INET6, &in6->sin6_addr, text, sizeof text)) return false;
  return parse(text, out);
}

std::string IpAddress::text() const {
  char buf[INET6_ADDRSTRLEN] = "";
  inet_ntop(v6 ? AF_INET6 : AF_INET, bytes.data(), buf, sizeof buf);
  return buf;
}

std::string WebhookUrl::url() const {
  const std::string h = host_is_ip && host.find(':') != std::string::npos ? "[" + host + "]" : host;
  return scheme + "://" + h + ":" + std::to_string(port) + target;
}

WebhookUrl parse_webhook_url(const std::string& url) {
  const auto bad = [&](const std::string& why) {
    return SubscriptionError("bad webhook URL " + quoted(url) + ": " + why);
  };
  if (url.size() > kMaxUrl) throw bad("longer than " + std::to_string(kMaxUrl) + " bytes");
  for (unsigned char c : url)
    if (c <= 0x20 || c >= 0x7f) throw bad("it holds white space, control or non-ASCII characters");
  WebhookUrl u;
  const size_t sep = url.find("://");
  u.scheme = lower(url.substr(0, sep));
  if (sep == std::string::npos || (u.scheme != "http" && u.scheme != "https"))
    throw bad("want http://HOST[:PORT]/PATH or https://...");
  const size_t start = sep + 3;
  const size_t end = std::min(url.find_first_of("/?#", start), url.size());
  const std::string authority = url.substr(start, end - start);
  if (authority.find('@') != std::string::npos)
    throw SubscriptionError(
        "bad webhook URL: it holds a user name or password (\"...@\"), "
        "which webhooks do not send");
  std::string host, port;
  bool has_port = false;
  if (!authority.empty() && authority[0] == '[') {
    const size_t close = authority.find(']');
    if (close == std::string::npos) throw bad("an IPv6 address without its ']'");
    host = authority.substr(1, close - 1);
    const std::string rest = authority.substr(close + 1);
    if (!rest.empty() && rest[0] != ':') throw bad("want [IPv6]:PORT");
    has_port = !rest.empty();
    if (has_port) port = rest.substr(1);
    IpAddress a;
    if (host.find(':') == std::string::npos || !IpAddress::parse(host, a))
      throw bad("\"[" + host + "]\" is not an IPv6 address");
    u.host_is_ip = true;
  } else {
    const size_t colon = authority.find(':');
    host = authority.substr(0, colon);
    has_port = colon != std::string::npos;
    if (has_port) port = authority.substr(colon + 1);
    if (host.empty()) throw bad("no host");
    host = lower(host);
    IpAddress a;
    bool numeric_tail = false;
    if (IpAddress::parse(host, a))
      u.host_is_ip = true;
    else if (!dns_name(host, numeric_tail))
      throw bad(numeric_tail ? "write an IPv4 address as four decimal numbers (a.b.c.d)"
                             : "the host is neither a DNS name nor an address");
  }
  u.host = lower(host);
  if (!has_port) {
    u.port = u.scheme == "https" ? 443 : 80;
  } else {
    if (port.size() > 5 || !all_of(port, digit) || std::stoi(port) < 1 || std::stoi(port) > 65535)
      throw bad("the port must be a number from 1 to 65535");
    u.port = static_cast<uint16_t>(std::stoi(port));
  }
  std::string target = url.substr(end);
  target = target.substr(0, target.find('#'));
  u.target = target.empty() || target[0] != '/' ? "/" + target : target;
  return u;
}

std::string internal_range(const IpAddress& a) {
  for (const auto& r : internal_ranges())
    if (in_network(a, r.base, r.prefix)) return r.what;
  // Outside global unicast (2000::/3): reserved.
  if (a.v6 && (a.bytes[0] & 0xe0) != 0x20) return "a reserved address";
  return "";
}

WebhookPolicy::WebhookPolicy(const std::vector<std::string>& allow, Resolver resolve)
    : resolve_(resolve ? std::move(resolve) : getaddrinfo_resolver) {
  for (const auto& entry : allow) {
    const std::string e = lower(entry);
    Network n;
    bool numeric_tail = false;
    if (parse_network(e, n.base, n.prefix))
      networks_.push_back(n);
    else if (e.find('/') == std::string::npos && dns_name(e, numeric_tail))
      names_.push_back(e);
    else
      throw std::invalid_argument("bad --webhook-allow entry " + quoted(entry) +
                                  ": want a host name, an address or a network such as "
                                  "10.0.0.0/8 or fd00::/8");
  }
}

bool WebhookPolicy::listed(const IpAddress& a) const {
  return std::any_of(networks_.begin(), networks_.end(),
                     [&](const Network& n) { return in_network(a, n.base, n.prefix); });
}

WebhookDestination WebhookPolicy::check(const std::string& url) const {
  WebhookDestination d;
  d.url = parse_webhook_url(url);
  const std::string& host = d.url.host;
  if (d.url.host_is_ip) {
    IpAddress a;
    IpAddress::parse(host, a);
    d.addresses.push_back(a);
  } else {
    for (const auto& a : resolve_(host))
      if (std::find(d.addresses.begin(), d.addresses.end(), a) == d.addresses.end())
        d.addresses.push_back(a);
    if (d.addresses.empty())
      throw SubscriptionError("webhook host " + quoted(host) + " does not resolve");
  }
  const bool has_list = !names_.empty() || !networks_.empty();
  const bool name_listed =
      !d.url.host_is_ip && std::find(names_.begin(), names_.end(), host) != names_.end();
  for (const auto& a : d.addresses) {
    if (listed(a)) continue;
    if (const std::string why = internal_range(a); !why.empty()) {
      if (d.url.host_is_ip)
        throw SubscriptionError("webhook to " + a.text() + " refused: " + why + kAllowHint);
      throw SubscriptionError("webhook to " + quoted(host) + " refused: the name resolves to " +
                              why + kAllowHint);
    }
    if (has_list && !name_listed)
      throw SubscriptionError("webhook to " + quoted(host) +
                              " refused: not on the coordinator's allow-list (--webhook-allow)");
  }
  return d;
}

bool WebhookPolicy::connects_to(const WebhookDestination& dest, const IpAddress& a) {
  return std::find(dest.addresses.begin(), dest.addresses.end(), a) != dest.addresses.end();
}

}  // namespace leapfrog::coord::notify
