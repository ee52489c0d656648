// Webhooks as a way into internal services (issue 41 §2), sent as the tester
// did: real gRPC AddSubscription calls to `leapfrog serve` on a PostgreSQL
// the test starts, against loopback services in the test process that count
// every request they get (loopback only: the metadata address and private
// ranges are webhook_policy_test's, which sends nothing). Without an allow-list every internal
// destination is refused with its reason, and one stored by an older version is never POSTed; with
// loopback allowed, a 302 is not followed, and last_error says "answered 5xx" or "unreachable",
// never what the service answered. Needs root (the embedded PostgreSQL).

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <pqxx/pqxx>
#include <string>
#include <vector>

#include "coordinator/notify/outbox.h"
#include "coordinator/notify/test_receivers.h"
#include "leapfrog/v1/notify.grpc.pb.h"
#include "tests/coordinator_fixture.h"

namespace {

using namespace leapfrog::testing;
using leapfrog::notify_testing::RecordingSink;
namespace v1 = leapfrog::v1;

const char* const kSecret = "INTERNAL-ONLY: db_password=hunter2";

class WebhookSsrfE2E : public CoordinatorE2E {
 protected:
  // `leapfrog serve` on the test's database, polling its outbox often;
  // `allow`: its --webhook-allow entries.
  Coordinator serve(const std::string& name, const std::vector<std::string>& allow) {
    Coordinator c;
    c.data_dir = *dir_ / name;
    std::vector<std::string> argv = {
        LEAPFROG,           "serve",      "--database",        url(),          "--listen",
        "127.0.0.1:0",      "--data-dir", c.data_dir,          "--token-file", token_file_,
        "--notify-poll-ms", "20",         "--notify-retry-ms", "60000"};
    for (const auto& a : allow) argv.insert(argv.end(), {"--webhook-allow", a});
    c.proc = spawn(name, argv, false);
    if (!wait_address(c.data_dir, *c.proc, 30s))
      throw std::runtime_error(name + " did not start: " + tail_of(c.proc->err_file()));
    c.address = read_address(c.data_dir);
    stub_ = v1::NotifyService::NewStub(
        grpc::CreateChannel(c.address, grpc::InsecureChannelCredentials()));
    return c;
  }

  std::unique_ptr<grpc::ClientContext> ctx() {
    auto c = std::make_unique<grpc::ClientContext>();
    c->AddMetadata("authorization", "Bearer " + slurp(token_file_).substr(0, 32));
    c->set_deadline(std::chrono::system_clock::now() + 30s);
    return c;
  }

  // AddSubscription of a webhook to `url` (every event).
  grpc::Status add(const std::string& name, const std::string& url, v1::Subscription* out) {
    v1::AddSubscriptionRequest req;
    req.mutable_subscription()->set_name(name);
    req.mutable_subscription()->mutable_webhook()->set_url(url);
    return stub_->AddSubscription(ctx().get(), req, out);
  }

  std::vector<v1::Subscription> list() {
    v1::ListSubscriptionsResponse resp;
    const auto s = stub_->ListSubscriptions(ctx().get(), {}, &resp);
    if (!s.ok()) throw std::runtime_error("ListSubscriptions: " + s.error_message());
    return {resp.subscriptions().begin(), resp.subscriptions().end()};
  }

  // An event as triage stores one, in its own transaction: one delivery is
  // queued per subscription.
  void publish(int64_t issue) {
    pqxx::connection conn(url());
    pqxx::work txn(conn);
    v1::Event e;
    e.set_key("issue-new:" + std::to_string(issue));
    e.set_kind(v1::EVENT_KIND_NEW_ISSUE);
    e.set_issue_id(issue);
    e.set_kernel_label("k1");
    e.set_summary("new issue #" + std::to_string(issue));
    ASSERT_TRUE(leapfrog::coord::notify::publish(txn, e));
    txn.commit();
  }

  // Waits until no delivery is due: each was tried at least once.
  void wait_all_tried(const Coordinator& c) {
    ASSERT_TRUE(poll_until(
        [&] {
          return sql_int(url(), "SELECT count(*) FROM notify_outbox WHERE attempts = 0") == 0;
        },
        30s, 20ms))
        << tail_of(c.proc->err_file());
  }

  std::unique_ptr<v1::NotifyService::Stub> stub_;
};

TEST_F(WebhookSsrfE2E, WithoutAnAllowListInternalDestinationsAreRefusedAndNeverPosted) {
  start_postgres();
  RecordingSink internal(500, kSecret);
  RecordingSink redirect(302, "moved", internal.url("/redirected"));
  Coordinator c = serve("serve", {});
  const std::string port = std::to_string(internal.port());
  for (const auto& [url, why] : std::vector<std::pair<std::string, std::string>>{
           {internal.url(), "loopback"},
           {"http://[::1]:" + port + "/internal", "loopback"},
           {"http://2130706433:" + port + "/internal", "four decimal numbers"},
           {"http://0x7f000001:" + port + "/internal", "four decimal numbers"},
           {"http://0177.0.0.1:" + port + "/internal", "four decimal numbers"},
           {"http://127.1:" + port + "/internal", "four decimal numbers"},
           {"http://user:pw@127.0.0.1:" + port + "/internal", "user name or password"},
           {"http://[::ffff:127.0.0.1]:" + port + "/internal", "loopback"},
           {"http://localhost:" + port + "/internal", "resolves to a loopback address"},
           {redirect.url(), "loopback"},
           // Every destination here is on loopback, so that the old coordinator
           // this test must fail against sends nothing elsewhere; the other
           // ranges are webhook_policy_test's.
           {"gopher://127.0.0.1:" + port + "/_internal", "want http"},
           {"file:///etc/passwd", "want http"},
       }) {
    v1::Subscription s;
    const grpc::Status st = add("attack", url, &s);
    EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT)
        << url << " was taken as subscription " << s.id();
    EXPECT_NE(st.error_message().find(why), std::string::npos)
        << url << ": \"" << st.error_message() << "\"";
    EXPECT_EQ(st.error_message().find("pw@"), std::string::npos) << st.error_message();
  }
  // The HTTP route refuses the same.
  const std::string http = slurp(c.data_dir + "/http");
  httplib::Client client(http.substr(0, http.find('\n')));
  const httplib::Headers auth = {{"Authorization", "Bearer " + slurp(token_file_).substr(0, 32)}};
  auto res =
      client.Post("/api/subscriptions", auth,
                  R"({"name":"attack","webhook":")" + internal.url() + R"("})", "application/json");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 400) << res->body;
  EXPECT_NE(res->body.find("loopback"), std::string::npos) << res->body;
  EXPECT_TRUE(list().empty());

  // A subscription an older version stored is checked again at delivery:
  // it fails with the reason and nothing reaches the service.
  {
    v1::Subscription old;
    old.set_name("from-before");
    old.mutable_webhook()->set_url(internal.url());
    const std::string bytes = old.SerializeAsString();
    pqxx::connection conn(url());
    pqxx::work txn(conn);
    txn.exec_params(
        "INSERT INTO subscriptions (name, subscription, created_at) VALUES ($1, $2, now())",
        "from-before", pqxx::binarystring(bytes.data(), bytes.size()));
    txn.commit();
  }
  publish(1);
  wait_all_tried(c);
  const auto subs = list();
  ASSERT_EQ(subs.size(), 1u);
  EXPECT_NE(subs[0].last_error().find("loopback"), std::string::npos) << subs[0].last_error();
  EXPECT_EQ(internal.hits(), 0u) << "a webhook reached the internal service";
  EXPECT_EQ(redirect.hits(), 0u);
}

TEST_F(WebhookSsrfE2E, AnAllowedSinkIsNotRedirectedAndWhatItAnswersIsNotShown) {
  start_postgres();
  RecordingSink internal(500, kSecret);
  RecordingSink target(200, "{}");
  RecordingSink redirect(302, "REDIRECT-BODY", target.url("/redirected"));
  // A port where nothing listens: bound, never listening.
  const int closed = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(closed, reinterpret_cast<sockaddr*>(&sa), sizeof sa), 0);
  socklen_t len = sizeof sa;
  getsockname(closed, reinterpret_cast<sockaddr*>(&sa), &len);
  const std::string closed_url = "http://127.0.0.1:" + std::to_string(ntohs(sa.sin_port)) + "/";

  Coordinator c = serve("serve", {"127.0.0.1"});
  const std::string port = std::to_string(internal.port());
  // What the list allows is 127.0.0.1 itself, in its one spelling.
  for (const std::string& url :
       {"http://user:pw@127.0.0.1:" + port + "/internal", "http://2130706433:" + port + "/",
        "http://0x7f000001:" + port + "/", "http://[::1]:" + port + "/",
        "http://127.0.0.2:" + port + "/", "http://localhost.:" + port + "/"}) {
    v1::Subscription s;
    EXPECT_EQ(add("attack", url, &s).error_code(), grpc::StatusCode::INVALID_ARGUMENT) << url;
  }
  v1::Subscription secret, moved, nobody;
  ASSERT_TRUE(add("secret", internal.url(), &secret).ok());
  ASSERT_TRUE(add("redirect", redirect.url(), &moved).ok());
  ASSERT_TRUE(add("nobody", closed_url, &nobody).ok());

  publish(1);
  wait_all_tried(c);
  std::map<int64_t, std::string> errors;
  for (const auto& s : list()) errors[s.id()] = s.last_error();
  EXPECT_EQ(errors[secret.id()], "answered 5xx");
  EXPECT_EQ(errors[moved.id()], "answered 3xx");
  EXPECT_EQ(errors[nobody.id()], "unreachable");
  EXPECT_GE(internal.hits(), 1u);  // allowed, so it was POSTed
  EXPECT_GE(redirect.hits(), 1u);
  EXPECT_EQ(target.hits(), 0u) << "a redirect was followed";
  close(closed);
  // Neither the gRPC list nor the HTTP one, nor the table, holds the body.
  const std::string http = slurp(c.data_dir + "/http");
  httplib::Client client(http.substr(0, http.find('\n')));
  const httplib::Headers auth = {{"Authorization", "Bearer " + slurp(token_file_).substr(0, 32)}};
  const auto res = client.Get("/api/subscriptions", auth);
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
  EXPECT_EQ(res->body.find("db_password"), std::string::npos) << res->body;
  EXPECT_EQ(res->body.find("REDIRECT-BODY"), std::string::npos) << res->body;
  EXPECT_EQ(sql_int(url(), "SELECT count(*) FROM notify_outbox WHERE last_error LIKE '%db_pass%'"),
            0);
}

}  // namespace
