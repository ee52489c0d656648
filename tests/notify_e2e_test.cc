// Notifications end to end (issue 21 §2): `leapfrog serve` on a PostgreSQL
// the test starts, a real agent whose setattr-lookup runs on fuse-cached find
// real violations, subscriptions made with `leapfrog subscribe`, a webhook
// receiver in the test process and an SMTP sink (python3-aiosmtpd). The
// coordinator is killed with SIGKILL while it POSTs the first event; after
// the restart every event reaches every matching subscription exactly once.
// Needs root (FUSE, mounts).

#include <gtest/gtest.h>
#include <httplib.h>
#include <unistd.h>

#include <condition_variable>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "coordinator/notify/test_receivers.h"
#include "tests/coordinator_fixture.h"

namespace {

using namespace leapfrog::testing;
using leapfrog::notify_testing::mail_header;
using leapfrog::notify_testing::mail_names;
using leapfrog::notify_testing::Received;
using leapfrog::notify_testing::SmtpSink;
using leapfrog::notify_testing::WebhookReceiver;

const char* const kLinkBase = "http://leapfrog.example:8080";

class NotifyE2E : public CoordinatorE2E {
 protected:
  // `leapfrog serve` with the notifier's flags, on the test's database.
  Coordinator serve(const std::string& name, const std::string& smtp_url) {
    Coordinator c;
    c.data_dir = *dir_ / "coord";
    std::remove((c.data_dir + "/address").c_str());
    c.proc = spawn(name,
                   {LEAPFROG,
                    "serve",
                    "--database",
                    url(),
                    "--listen",
                    "127.0.0.1:0",
                    "--lease-ms",
                    kLeaseMs,
                    "--heartbeat-ms",
                    kHeartbeatMs,
                    "--data-dir",
                    c.data_dir,
                    "--token-file",
                    token_file_,
                    "--smtp-url",
                    smtp_url,
                    "--smtp-from",
                    "leapfrog@ci.example.org",
                    "--smtp-user",
                    "leapfrog",
                    "--smtp-password-file",
                    smtp_password_file_,
                    "--notify-link-base",
                    kLinkBase,
                    // The receivers are on loopback, which webhooks may not
                    // reach unless the operator allows it.
                    "--webhook-allow",
                    "127.0.0.1",
                    "--notify-retry-ms",
                    "100",
                    "--notify-poll-ms",
                    "50"},
                   false);
    if (!wait_address(c.data_dir, *c.proc, 30s))
      throw std::runtime_error(name + " did not start: " + tail_of(c.proc->err_file()));
    c.address = read_address(c.data_dir);
    return c;
  }

  std::string smtp_password_file_;
};

TEST_F(NotifyE2E, EveryEventReachesEachMatchingTargetOnceThroughAKill9) {
  start_postgres();
  smtp_password_file_ = *dir_ / "smtp-password";
  std::ofstream(smtp_password_file_) << "s3cret\n";
  SmtpSink sink(dir_->path(), "leapfrog", "s3cret");
  // The first POST is held until the coordinator that sent it is dead, then
  // refused; every later one is taken.
  std::mutex mu;
  std::condition_variable cv;
  bool first_arrived = false, released = false;
  WebhookReceiver hook([&](const Received&, size_t index) {
    if (index > 0) return 200;
    std::unique_lock<std::mutex> lock(mu);
    first_arrived = true;
    cv.notify_all();
    cv.wait(lock, [&] { return released; });
    return 500;
  });
  WebhookReceiver elsewhere;  // subscribed to another kernel: must get nothing

  Coordinator first = serve("serve-1", sink.url());
  for (auto args : std::vector<std::vector<std::string>>{
           {"--name", "hook", "--webhook", hook.url(), "--event", "new-issue", "--event",
            "regression"},
           {"--name", "list", "--email", "kernel-ci@example.org", "--kernel", "k*"},
           {"--name", "other", "--webhook", elsewhere.url(), "--kernel", "6.2-*"}}) {
    args.insert(args.begin(), {"subscribe", "add"});
    const Result r = cli(first.address, args);
    ASSERT_EQ(r.exit, 0) << r.out << r.err;
  }
  // A bad subscription is refused with the reason.
  expect_cli_error(
      cli(first.address, {"subscribe", "add", "--name", "bad", "--webhook", "ftp://x"}),
      "bad webhook URL");

  spawn("agent-k1",
        {LEAPFROG_AGENT, "connect", "--coordinator", first.address, "--token-file", token_file_,
         "--name", "agent-k1", "--kernel-label", "k1", "--spool", spool_of("agent-k1"), "--fs",
         "fuse-cached"},
        true);
  const Result run =
      cli(first.address, {"campaign", "run", "--name", "night", "--scenario", "setattr-lookup",
                          "--fs", "fuse-cached", "--kernel", "k1", "--iterations", "40",
                          "--first-seed", "11", "--wait", "--json"});
  ASSERT_EQ(run.exit, 0) << run.out << run.err;

  // The first event is being POSTed: kill the coordinator in the middle.
  {
    std::unique_lock<std::mutex> lock(mu);
    ASSERT_TRUE(cv.wait_for(lock, 60s, [&] { return first_arrived; }))
        << "no event was POSTed: " << tail_of(first.proc->err_file());
  }
  first.proc->kill9();
  {
    std::lock_guard<std::mutex> lock(mu);
    released = true;
  }
  cv.notify_all();
  ASSERT_TRUE(hook.wait_for(1, 30s));
  EXPECT_EQ(sql_int(url(),
                    "SELECT count(*) FROM notify_outbox WHERE state = 'delivered'"
                    " AND subscription_id = 1"),
            0)
      << "a delivery the receiver refused counts as delivered";

  Coordinator second = serve("serve-2", sink.url());
  const int64_t events = sql_int(url(), "SELECT count(*) FROM notify_events");
  const int64_t issues = sql_int(url(), "SELECT count(*) FROM issues");
  ASSERT_GE(events, 1);
  EXPECT_EQ(events, issues) << "one new-issue event per issue";
  // Every delivery of the hook and the mail list ends delivered.
  ASSERT_TRUE(poll_until(
      [&] {
        return sql_int(url(), "SELECT count(*) FROM notify_outbox WHERE state = 'delivered'") ==
               2 * events;
      },
      60s, 100ms))
      << sql(url(),
             "SELECT event_id, subscription_id, state, attempts, last_error FROM notify_outbox")
             .size()
      << " rows; " << tail_of(second.proc->err_file());
  EXPECT_EQ(sql_int(url(), "SELECT count(*) FROM notify_outbox"), 2 * events);

  // The receiver: one accepted POST per event, the held one refused once before.
  const auto got = hook.received();
  std::map<std::string, int> accepted, refused;
  for (const auto& r : got) (r.status == 200 ? accepted : refused)[r.delivery]++;
  EXPECT_EQ(accepted.size(), static_cast<size_t>(events));
  for (const auto& [id, n] : accepted)
    EXPECT_EQ(n, 1) << "delivery " << id << " accepted " << n << " times";
  ASSERT_EQ(refused.size(), 1u) << "the held POST";
  EXPECT_EQ(refused.begin()->second, 1);
  EXPECT_EQ(accepted.count(refused.begin()->first), 1u) << "the refused delivery came again";
  EXPECT_EQ(got.size(), static_cast<size_t>(events) + 1);
  EXPECT_TRUE(elsewhere.received().empty()) << "an event of kernel k1 went to a 6.2-* subscription";

  // The mails: one per event, naming the issue, the kernel and the link.
  ASSERT_TRUE(sink.wait_for(events, 30s));
  const auto mails = sink.mails();
  EXPECT_EQ(mails.size(), static_cast<size_t>(events));
  const Rows rows = sql(url(), "SELECT id, example_kernel FROM issues ORDER BY id");
  std::set<std::string> ids;
  for (const auto& m : mails) ids.insert(mail_header(m, "Message-ID"));
  EXPECT_EQ(ids.size(), mails.size()) << "two mails of one delivery";
  for (const auto& row : rows) {
    const int64_t id = std::stoll(row[0]);
    const std::string link = std::string(kLinkBase) + "/#/issues/" + row[0];
    bool found = false;
    for (const auto& m : mails) found = found || mail_names(m, id, row[1], link);
    EXPECT_TRUE(found) << "no mail names issue " << id << " on " << row[1] << " with " << link
                       << "; first mail:\n"
                       << (mails.empty() ? "" : mails[0]);
  }
  // What a reader gets, kept for the record (build/artifacts/notify/).
  if (!mails.empty()) {
    stdfs::create_directories(LEAPFROG_ARTIFACTS "/notify");
    std::ofstream(LEAPFROG_ARTIFACTS "/notify/mail.eml") << mails[0];
    std::ofstream(LEAPFROG_ARTIFACTS "/notify/webhook.json") << got.back().body << "\n";
  }
  // The checker's positive control: it does not find an issue no mail names.
  EXPECT_FALSE(mail_names(mails.empty() ? "" : mails[0], 999, "k1", kLinkBase));

  // The CLI lists the counts; the HTTP routes need the token even on loopback.
  const Result list = cli(second.address, {"subscribe", "list", "--json"});
  ASSERT_EQ(list.exit, 0) << list.err;
  const json subs = json::parse(list.out)["subscriptions"];
  ASSERT_EQ(subs.size(), 3u);
  EXPECT_EQ(subs[0]["delivered"], events);
  EXPECT_EQ(subs[0]["pending"], 0);
  EXPECT_EQ(subs[2]["delivered"], 0);
  const std::string http = slurp(second.data_dir + "/http");
  httplib::Client client(http.substr(0, http.find('\n')));
  EXPECT_EQ(client.Get("/api/subscriptions")->status, 401);
  const std::string token = slurp(token_file_).substr(0, 32);
  const httplib::Headers auth = {{"Authorization", "Bearer " + token}};
  auto res = client.Get("/api/subscriptions", auth);
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200) << res->body;
  EXPECT_EQ(json::parse(res->body)["subscriptions"].size(), 3u);
  res = client.Get("/api/notifications?limit=5", auth);
  ASSERT_TRUE(res);
  EXPECT_EQ(json::parse(res->body)["events"][0]["kind"], "EVENT_KIND_NEW_ISSUE") << res->body;
  res = client.Post("/api/subscriptions", auth, R"({"name":"h2","webhook":"gopher://x"})",
                    "application/json");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 400) << res->body;
  EXPECT_EQ(client.Delete("/api/subscriptions/3", auth)->status, 200);
  const Result rm = cli(second.address, {"subscribe", "rm", "3"});
  expect_cli_error(rm, "no subscription");
}

}  // namespace
