// Where webhooks may go (issue 41 §2): the URL forms refused, the internal
// ranges, the allow-list, names resolved once (a resolver in the test), and
// the sender: it connects only to the checked address, follows no redirect
// and reports no more than the status class. Servers on 127.0.0.1:0.

#include "coordinator/notify/webhook_policy.h"

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <map>

#include "coordinator/notify/outbox.h"
#include "coordinator/notify/senders.h"
#include "coordinator/notify/test_receivers.h"

namespace leapfrog::coord::notify {
namespace {

using notify_testing::RecordingSink;
using notify_testing::WebhookReceiver;

IpAddress ip(const std::string& text) {
  IpAddress a;
  if (!IpAddress::parse(text, a)) throw std::invalid_argument(text);
  return a;
}

// A resolver that knows only the names the test gives it.
WebhookPolicy::Resolver names(std::map<std::string, std::vector<std::string>> table) {
  return [table](const std::string& host) {
    std::vector<IpAddress> out;
    if (auto it = table.find(host); it != table.end())
      for (const auto& a : it->second) out.push_back(ip(a));
    return out;
  };
}

// The reason `policy` refuses `url`, or "" if it passes.
std::string refusal(const WebhookPolicy& policy, const std::string& url) {
  try {
    policy.check(url);
    return "";
  } catch (const SubscriptionError& e) {
    return e.what();
  }
}

TEST(WebhookUrl, OnlyPlainHttpUrlsWithAHostAndNoUserAreTaken) {
  const auto u = parse_webhook_url("HTTPS://CI.Example.org/leapfrog?x=1#frag");
  EXPECT_EQ(u.scheme, "https");
  EXPECT_EQ(u.host, "ci.example.org");
  EXPECT_EQ(u.port, 443);
  EXPECT_EQ(u.target, "/leapfrog?x=1");
  EXPECT_EQ(u.url(), "https://ci.example.org:443/leapfrog?x=1");
  EXPECT_EQ(parse_webhook_url("http://[::1]:8080").url(), "http://[::1]:8080/");
  for (const auto& [url, why] : std::vector<std::pair<std::string, std::string>>{
           {"ftp://ci.example.org/", "want http"},
           {"gopher://127.0.0.1:70/", "want http"},
           {"file:///etc/passwd", "want http"},
           {"dict://127.0.0.1:11211/", "want http"},
           {"http://user:pw@ci.example.org/", "user name or password"},
           {"http://ci.example.org@127.0.0.1/", "user name or password"},
           {"http://2130706433/", "four decimal numbers"},
           {"http://0x7f000001/", "four decimal numbers"},
           {"http://0177.0.0.1/", "four decimal numbers"},
           {"http://127.1/", "four decimal numbers"},
           {"http://127.0.0.1./", "neither a DNS name"},
           {"http://[::1%25lo]/", "not an IPv6 address"},
           {"http://[127.0.0.1]/", "not an IPv6 address"},
           {"http://ci.example.org:0/", "port"},
           {"http://ci.example.org:65536/", "port"},
           {"http://ci.example.org:/", "port"},
           {"http://:80/", "no host"},
           {"http://ci.exa mple.org/", "white space"},
           {"http://ci.example.org/\r\nX-Injected: 1", "white space"},
           {"http://ci%2eexample.org/", "neither a DNS name"},
       }) {
    try {
      parse_webhook_url(url);
      ADD_FAILURE() << url << " was taken";
    } catch (const SubscriptionError& e) {
      EXPECT_NE(std::string(e.what()).find(why), std::string::npos) << url << ": " << e.what();
      EXPECT_EQ(std::string(e.what()).find("pw@"), std::string::npos) << e.what();
    }
  }
}

TEST(WebhookPolicy, WithoutAnAllowListOnlyPublicAddressesPass) {
  const WebhookPolicy policy({}, names({{"hooks.test", {"93.184.216.34", "2606:2800:220:1::1"}},
                                        {"localhost", {"127.0.0.1", "::1"}},
                                        {"mixed.test", {"93.184.216.34", "10.0.0.7"}}}));
  for (const auto& [url, why] : std::vector<std::pair<std::string, std::string>>{
           {"http://127.0.0.1:8080/internal", "loopback"},
           {"http://127.9.9.9/", "loopback"},
           {"http://[::1]:8080/", "loopback"},
           {"http://[::ffff:127.0.0.1]/", "loopback"},
           {"http://[::ffff:7f00:1]/", "loopback"},
           {"http://[::127.0.0.1]/", "IPv4-compatible"},
           {"http://[64:ff9b::7f00:1]/", "NAT64"},
           {"http://[2002:7f00:1::]/", "6to4"},
           {"http://169.254.169.254/latest/meta-data/", "cloud metadata"},
           {"http://[fd00:ec2::254]/", "cloud metadata"},
           {"http://169.254.1.1/", "link-local"},
           {"http://[fe80::1]/", "link-local"},
           {"http://10.1.2.3/", "private"},
           {"http://172.16.0.1/", "private"},
           {"http://172.31.255.255/", "private"},
           {"http://192.168.1.1/", "private"},
           {"http://[fc00::1]/", "private"},
           {"http://100.64.0.1/", "shared"},
           {"http://0.0.0.0/", "this network"},
           {"http://[::]/", "unspecified"},
           {"http://224.0.0.1/", "multicast"},
           {"http://255.255.255.255/", "reserved"},
           {"http://localhost:8080/", "the name resolves to a loopback address"},
           {"http://mixed.test/", "the name resolves to a private address"},
           {"http://nowhere.test/", "does not resolve"},
       }) {
    const std::string r = refusal(policy, url);
    EXPECT_NE(r.find(why), std::string::npos) << url << ": \"" << r << "\"";
  }
  // A refused name does not tell which address it resolved to.
  EXPECT_EQ(refusal(policy, "http://mixed.test/").find("10.0.0.7"), std::string::npos);
  EXPECT_EQ(refusal(policy, "https://93.184.216.34/hook"), "");
  EXPECT_EQ(refusal(policy, "http://[2606:2800:220:1::1]/"), "");
  EXPECT_EQ(refusal(policy, "http://172.32.0.1/"), "");
  const auto d = policy.check("https://hooks.test/x");
  EXPECT_EQ(d.addresses.size(), 2u);
  EXPECT_TRUE(WebhookPolicy::connects_to(d, ip("93.184.216.34")));
  EXPECT_FALSE(WebhookPolicy::connects_to(d, ip("127.0.0.1")));
}

TEST(WebhookPolicy, AnAllowListNamesTheOnlyDestinations) {
  const auto resolver = names({{"hooks.test", {"93.184.216.34"}},
                               {"other.test", {"93.184.216.35"}},
                               {"inside.test", {"10.0.0.7"}},
                               {"localhost", {"127.0.0.1"}}});
  const WebhookPolicy policy({"127.0.0.1", "10.0.0.0/8", "HOOKS.test", "fd00:1::/32"}, resolver);
  EXPECT_EQ(refusal(policy, "http://127.0.0.1:9/hook"), "");
  EXPECT_EQ(refusal(policy, "http://[::ffff:127.0.0.1]:9/hook"), "");
  EXPECT_EQ(refusal(policy, "http://localhost:9/hook"), "");
  EXPECT_EQ(refusal(policy, "http://10.200.0.1/"), "");
  EXPECT_EQ(refusal(policy, "http://inside.test/"), "");
  EXPECT_EQ(refusal(policy, "http://[fd00:1::5]/"), "");
  EXPECT_EQ(refusal(policy, "https://hooks.test/x"), "");
  EXPECT_NE(refusal(policy, "http://127.0.0.2/").find("loopback"), std::string::npos);
  EXPECT_NE(refusal(policy, "http://[::1]/").find("loopback"), std::string::npos);
  EXPECT_NE(refusal(policy, "http://other.test/").find("allow-list"), std::string::npos);
  EXPECT_NE(refusal(policy, "http://93.184.216.34/").find("allow-list"), std::string::npos);
  EXPECT_NE(refusal(policy, "http://user:pw@127.0.0.1/"), "");
  EXPECT_NE(refusal(policy, "http://2130706433/"), "");
  // A listed name still may not resolve to an internal address no network allows.
  const WebhookPolicy by_name({"inside.test"}, resolver);
  EXPECT_NE(refusal(by_name, "http://inside.test/").find("private"), std::string::npos);
  for (const std::string bad : {"10.0.0.0/33", "::/129", "127.1", "2130706433", "a b", "x/8", ""})
    EXPECT_THROW(WebhookPolicy({bad}), std::invalid_argument) << bad;
}

TEST(WebhookPolicy, SubscriptionsAreCheckedWhereTheyAreAdded) {
  v1::Subscription s;
  s.set_name("hook");
  s.mutable_webhook()->set_url("http://127.0.0.1:9/hook");
  EXPECT_NO_THROW(validate(s));  // the form is fine; the destination is not
  EXPECT_THROW(check_target(WebhookPolicy(), s), SubscriptionError);
  EXPECT_NO_THROW(check_target(WebhookPolicy({"127.0.0.1"}), s));
  v1::Subscription mail;
  mail.set_name("m");
  mail.mutable_email()->add_to("ci@example.org");
  EXPECT_NO_THROW(check_target(WebhookPolicy(), mail));
}

// ---- the sender ----

std::string delivery_error(const WebhookDestination& d) {
  try {
    post_webhook(d, "{}", "1-1", "issue-new:1");
    return "";
  } catch (const DeliveryError& e) {
    return e.what();
  }
}

TEST(WebhookSender, ANameConnectsToTheAddressCheckedNotToASecondLookup) {
  WebhookReceiver receiver;
  // hooks.test is in no DNS: only the checked address can reach the receiver.
  const WebhookPolicy policy({"127.0.0.1"}, names({{"hooks.test", {"127.0.0.1"}}}));
  const std::string port = receiver.url().substr(17, receiver.url().find('/', 17) - 17);
  const auto d = policy.check("http://hooks.test:" + port + "/hook");
  EXPECT_EQ(delivery_error(d), "");
  ASSERT_EQ(receiver.received().size(), 1u);
  EXPECT_EQ(receiver.received()[0].delivery, "1-1");
  EXPECT_EQ(receiver.received()[0].event, "issue-new:1");
  // An address other than the checked one is never connected to.
  WebhookDestination forged = policy.check(receiver.url());
  forged.addresses = {ip("127.0.0.2")};
  EXPECT_EQ(delivery_error(forged), "unreachable");
  EXPECT_EQ(receiver.received().size(), 1u);
}

TEST(WebhookSender, NoRedirectIsFollowedAndNoAnswerIsEchoed) {
  const WebhookPolicy policy({"127.0.0.1"});
  RecordingSink secret(500, "INTERNAL-ONLY: db_password=hunter2");
  RecordingSink target(200, "{}");
  RecordingSink redirect(302, "moved", target.url("/elsewhere"));
  EXPECT_EQ(delivery_error(policy.check(secret.url())), "answered 5xx");
  EXPECT_EQ(secret.hits(), 1u);
  EXPECT_EQ(delivery_error(policy.check(redirect.url())), "answered 3xx");
  EXPECT_EQ(redirect.hits(), 1u);
  EXPECT_EQ(target.hits(), 0u);
  RecordingSink not_found(404, "no such hook at /internal");
  EXPECT_EQ(delivery_error(policy.check(not_found.url())), "answered 4xx");
  // A port where nothing listens: bound, never listening.
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa), 0);
  socklen_t len = sizeof sa;
  getsockname(fd, reinterpret_cast<sockaddr*>(&sa), &len);
  EXPECT_EQ(
      delivery_error(policy.check("http://127.0.0.1:" + std::to_string(ntohs(sa.sin_port)) + "/")),
      "unreachable");
  close(fd);
}

}  // namespace
}  // namespace leapfrog::coord::notify
