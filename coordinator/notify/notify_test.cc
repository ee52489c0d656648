// Notifications against a real PostgreSQL (one cluster per suite, a fresh
// database per test), real campaigns in the real store, a webhook receiver
// in the test process and an SMTP sink on Debian's python3-aiosmtpd.

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <memory>
#include <nlohmann/json.hpp>
#include <pqxx/pqxx>

#include "common/bounds.h"
#include "coordinator/notify/message.h"
#include "coordinator/notify/notifier.h"
#include "coordinator/notify/notify_service.h"
#include "coordinator/notify/notify_store.h"
#include "coordinator/notify/outbox.h"
#include "coordinator/notify/test_receivers.h"
#include "coordinator/pg/test_postgres.h"
#include "coordinator/campaign.h"
#include "coordinator/work_signal.h"
#include "coordinator/scheduler.h"
#include "coordinator/server.h"
#include "coordinator/store/pg_store.h"
#include "coordinator/triage/pg_triage_store.h"
#include "coordinator/triage/triage_engine.h"

namespace leapfrog::coord::notify {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;
using notify_testing::Received;
using notify_testing::SmtpSink;
using notify_testing::WebhookReceiver;

// The entries of a mail subscription's `to` (request_bounds.h's default).
constexpr size_t kMaxEntriesOfAMailSubscription = kMaxFieldEntries;

const TimePoint kT0 = std::chrono::time_point_cast<Duration>(
    std::chrono::sys_days{std::chrono::year{2026} / 11 / 30} + std::chrono::hours(2));

v1::Event issue_event(int64_t issue, const std::string& kernel,
                      v1::IssueKind kind = v1::ISSUE_KIND_VIOLATION) {
  v1::Event e;
  e.set_key("issue-new:" + std::to_string(issue));
  e.set_kind(v1::EVENT_KIND_NEW_ISSUE);
  e.set_issue_id(issue);
  e.set_issue_title("stale-grant stat/chmod");
  e.set_issue_kind(kind);
  e.set_scenario("setattr-lookup");
  e.set_kernel_label(kernel);
  e.set_summary("new issue #" + std::to_string(issue) + " on " + kernel +
                ": stale-grant stat/chmod");
  return e;
}

v1::Subscription webhook(const std::string& url, v1::SubscriptionFilter f = {}) {
  v1::Subscription s;
  s.set_name("hook");
  s.mutable_webhook()->set_url(url);
  *s.mutable_filter() = std::move(f);
  return s;
}

v1::Capabilities caps(const std::vector<std::string>& filesystems) {
  v1::Capabilities c;
  c.set_kernel_label("host");
  for (const auto& fs : filesystems) c.add_filesystems(fs);
  c.set_root(true);
  c.set_cpus(2);
  return c;
}

// ---- matching (no database) ----

TEST(NotifyMatch, EverySetFieldMustMatchAndGlobsMatchLabels) {
  const v1::Event e = issue_event(3, "6.1-rc3");
  EXPECT_TRUE(matches({}, e));
  v1::SubscriptionFilter f;
  f.set_kernel("6.1-*");
  EXPECT_TRUE(matches(f, e));
  f.set_kernel("6.2-*");
  EXPECT_FALSE(matches(f, e));
  f.set_kernel("6.1-rc3");
  f.set_scenario("rename-*");
  EXPECT_FALSE(matches(f, e));
  f.set_scenario("setattr-lookup");
  f.add_events(v1::EVENT_KIND_REGRESSION);
  EXPECT_FALSE(matches(f, e));
  f.add_events(v1::EVENT_KIND_NEW_ISSUE);
  EXPECT_TRUE(matches(f, e));
  f.set_issue_kind(v1::ISSUE_KIND_CRASH);
  EXPECT_FALSE(matches(f, e));
  f.set_issue_kind(v1::ISSUE_KIND_VIOLATION);
  f.set_schedule_id(4);
  EXPECT_FALSE(matches(f, e));
  // A nightly event matches by its cells.
  v1::Event n;
  n.set_kind(v1::EVENT_KIND_NIGHTLY_FAILED);
  n.set_schedule_id(4);
  auto* c = n.add_cells();
  c->set_scenario("setattr-lookup");
  c->set_kernel_label("6.1-rc3");
  v1::SubscriptionFilter g;
  g.set_kernel("6.1-rc?");
  g.set_schedule_id(4);
  EXPECT_TRUE(matches(g, n));
  g.set_kernel("host");
  EXPECT_FALSE(matches(g, n));
}

TEST(NotifyMatch, SubscriptionsAreValidated) {
  EXPECT_NO_THROW(validate(webhook("http://127.0.0.1:9/hook")));
  EXPECT_THROW(validate(webhook("ftp://x/")), SubscriptionError);
  v1::Subscription none;
  none.set_name("x");
  EXPECT_THROW(validate(none), SubscriptionError);
  v1::Subscription mail;
  mail.set_name("m");
  mail.mutable_email()->add_to("ci@example.org");
  EXPECT_NO_THROW(validate(mail));
  mail.mutable_email()->add_to("not an address");
  EXPECT_THROW(validate(mail), SubscriptionError);
  EXPECT_THROW(parse_event_kind("new-isue"), SubscriptionError);
  EXPECT_EQ(parse_event_kind("nightly-failed"), v1::EVENT_KIND_NIGHTLY_FAILED);
  const auto back =
      subscription_from_json(json{{"name", "j"},
                                  {"webhook", "https://ci.example.org/x"},
                                  {"filter", {{"events", {"regression"}}, {"kernel", "6.*"}}}});
  EXPECT_EQ(back.filter().events(0), v1::EVENT_KIND_REGRESSION);
  EXPECT_EQ(back.filter().kernel(), "6.*");
  EXPECT_THROW(subscription_from_json(json{{"name", "j"}, {"filter", {{"events", {"x"}}}}}),
               SubscriptionError);
  // The issue kind is the enum, by its word or its name; another word is
  // refused, not kept as a filter that can never match.
  for (const char* kind : {"crash", "ISSUE_KIND_CRASH"})
    EXPECT_EQ(subscription_from_json(json{{"name", "j"},
                                          {"webhook", "https://ci.example.org/x"},
                                          {"filter", {{"issue_kind", kind}}}})
                  .filter()
                  .issue_kind(),
              v1::ISSUE_KIND_CRASH)
        << kind;
  try {
    subscription_from_json(json{{"name", "j"},
                                {"webhook", "https://ci.example.org/x"},
                                {"filter", {{"issue_kind", "crashes"}}}});
    ADD_FAILURE() << "an unknown issue kind was taken";
  } catch (const SubscriptionError& e) {
    EXPECT_NE(std::string(e.what()).find("crashes"), std::string::npos) << e.what();
  }
}

// ---- against PostgreSQL ----

class NotifyTest : public testing::PostgresSuite<NotifyTest> {
 protected:
  void SetUp() override {
    url_ = pg_->url(fresh_database("notify"));
    store_ = std::make_unique<PgStore>(url_);  // migrates
    notify_ = std::make_unique<PgNotifyStore>(url_);
    options_.link_base = "http://127.0.0.1:8080";
    options_.retry.first = 50ms;
    options_.retry.max = 200ms;
    // The receivers here are on loopback: allowed as an operator would.
    options_.webhooks = WebhookPolicy({"127.0.0.1"});
  }

  std::unique_ptr<Notifier> notifier() {
    return std::make_unique<Notifier>(*store_, *notify_, clock_, options_);
  }

  int64_t count(const std::string& sql) {
    pqxx::connection c(url_);
    return pqxx::work(c).exec1(sql)[0].as<int64_t>();
  }

  // Ticks `n` until `done` holds (deliveries are due after their backoff).
  bool tick_until(Notifier& n, const std::function<bool()>& done) {
    return leapfrog::testing::poll_until(
        [&] {
          n.tick();
          return done();
        },
        20s, 10ms);
  }

  // A nightly of schedule `schedule`: setattr-lookup on tmpfs and ext4, one
  // job each, ended with `tmpfs` and `ext4` verdicts.
  int64_t night(int64_t schedule, v1::Verdict tmpfs, v1::Verdict ext4) {
    v1::CampaignSpec spec;
    spec.set_name("nightly");
    spec.add_scenarios("setattr-lookup");
    spec.add_filesystems("tmpfs");
    spec.add_filesystems("ext4");
    spec.add_kernels("host");
    spec.set_seeds(1);
    const auto n = normalize(spec);
    const int64_t id = store_->create_campaign(n, expand(n), schedule, clock_.now());
    const std::string agent = store_->register_agent("a", caps({"tmpfs", "ext4"}), clock_.now());
    for (int i = 0; i < 2; ++i) {
      auto job = store_->lease_job(agent, caps({"tmpfs", "ext4"}), clock_.now(), 60s);
      if (!job) throw std::runtime_error("nothing to lease");
      v1::Outcome o;
      o.set_verdict(job->spec().fs() == "tmpfs" ? tmpfs : ext4);
      store_->report_outcome(agent, job->job_id(), job->attempt(), o, clock_.now());
    }
    return id;
  }

  std::string url_;
  ManualClock clock_{kT0};
  std::unique_ptr<PgStore> store_;
  std::unique_ptr<PgNotifyStore> notify_;
  NotifierOptions options_;
};

TEST_F(NotifyTest, AnEventIsStoredOnceAndQueuedForTheSubscriptionsItMatches) {
  v1::SubscriptionFilter only_61;
  only_61.set_kernel("6.1-*");
  v1::SubscriptionFilter only_62;
  only_62.set_kernel("6.2-*");
  const auto a = notify_->add_subscription(webhook("http://127.0.0.1:9/a", only_61), kT0);
  notify_->add_subscription(webhook("http://127.0.0.1:9/b", only_62), kT0);
  EXPECT_TRUE(notify_->publish(issue_event(7, "6.1-rc3")));
  EXPECT_FALSE(notify_->publish(issue_event(7, "6.1-rc3")));  // the same fact again
  EXPECT_EQ(count("SELECT count(*) FROM notify_events"), 1);
  EXPECT_EQ(count("SELECT count(*) FROM notify_outbox"), 1);
  EXPECT_EQ(count("SELECT subscription_id FROM notify_outbox"), a.id());
  // Removing a subscription drops what was pending for it.
  EXPECT_TRUE(notify_->remove_subscription(a.id()));
  EXPECT_FALSE(notify_->remove_subscription(a.id()));
  EXPECT_EQ(count("SELECT count(*) FROM notify_outbox"), 0);
}

// Issue 41 §6, what the tester sent: AddSubscription over gRPC to a real
// coordinator with a webhook URL and a mail address of 40 MiB, each then
// sent back by every ListSubscriptions (RESOURCE_EXHAUSTED for all). Each is
// refused with INVALID_ARGUMENT naming the field and its size, nothing is
// stored, and a sound webhook is taken (the control).
TEST_F(NotifyTest, AddSubscriptionRefusesAnOversizedUrlOrAddressNamingTheField) {
  const std::string token = "notify-test-token";
  NotifyServiceImpl service(*notify_, clock_, token, options_.webhooks);
  ServerOptions opts;
  opts.token = token;
  opts.extra_services = {&service};
  CoordinatorServer server(*store_, clock_, opts);
  auto stub = v1::NotifyService::NewStub(
      grpc::CreateChannel(server.address(), grpc::InsecureChannelCredentials()));
  auto add = [&](const v1::Subscription& s) {
    grpc::ClientContext ctx;
    ctx.AddMetadata("authorization", "Bearer " + token);
    ctx.set_deadline(std::chrono::system_clock::now() + 30s);
    v1::AddSubscriptionRequest req;
    *req.mutable_subscription() = s;
    v1::Subscription out;
    return stub->AddSubscription(&ctx, req, &out);
  };
  const std::string huge(40u << 20, 'x');
  v1::Subscription mail;
  mail.set_name("mail");
  mail.mutable_email()->add_to("ci@example.org");
  mail.mutable_email()->add_to(huge + "@example.org");
  v1::Subscription named = webhook("http://127.0.0.1:9/hook");
  named.set_name(huge);
  for (const auto& [sub, field] : std::vector<std::pair<v1::Subscription, std::string>>{
           {webhook("http://127.0.0.1:9/" + huge), "subscription.webhook.url"},
           {mail, "subscription.email.to[1]"},
           {named, "subscription.name"}}) {
    const grpc::Status s = add(sub);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << field;
    EXPECT_NE(s.error_message().find(field), std::string::npos) << s.error_message();
    EXPECT_NE(s.error_message().find("bytes) is too long"), std::string::npos) << s.error_message();
    EXPECT_LT(s.error_message().size(), 400u) << "the message quotes only the value's start";
  }
  EXPECT_TRUE(notify_->list_subscriptions().empty());
  // The control: a sound webhook is stored, and the list answers.
  const grpc::Status ok = add(webhook("http://127.0.0.1:9/hook"));
  ASSERT_TRUE(ok.ok()) << ok.error_message();
  grpc::ClientContext ctx;
  ctx.AddMetadata("authorization", "Bearer " + token);
  v1::ListSubscriptionsResponse listed;
  ASSERT_TRUE(stub->ListSubscriptions(&ctx, v1::ListSubscriptionsRequest{}, &listed).ok());
  ASSERT_EQ(listed.subscriptions_size(), 1);
  EXPECT_EQ(listed.subscriptions(0).webhook().url(), "http://127.0.0.1:9/hook");

  // ListSubscriptions answers them all: their number is bounded too, and
  // the most of the largest still make one page.
  v1::Subscription largest;
  largest.set_name(std::string(kMaxNameBytes, 'n'));
  for (size_t i = 0; i < kMaxEntriesOfAMailSubscription; ++i)
    largest.mutable_email()->add_to(std::string(kMaxMailAddressBytes - 12, 'a') + "@example.org");
  largest.mutable_filter()->set_kernel(std::string(kMaxLabelBytes, 'k'));
  largest.mutable_filter()->set_scenario(std::string(kMaxLabelBytes, 's'));
  for (size_t i = 1; i < kMaxSubscriptions; ++i) ASSERT_TRUE(add(largest).ok()) << i;
  const grpc::Status over = add(largest);
  EXPECT_EQ(over.error_code(), grpc::StatusCode::FAILED_PRECONDITION) << over.error_message();
  EXPECT_NE(over.error_message().find("remove one first"), std::string::npos) << over.error_message();
  grpc::ClientContext again;
  again.AddMetadata("authorization", "Bearer " + token);
  const grpc::Status all = stub->ListSubscriptions(&again, v1::ListSubscriptionsRequest{}, &listed);
  ASSERT_TRUE(all.ok()) << all.error_message();
  EXPECT_EQ(listed.subscriptions_size(), static_cast<int>(kMaxSubscriptions));
  EXPECT_LE(listed.ByteSizeLong(), kMaxPageBytes);
}

TEST_F(NotifyTest, AWebhookAnswering500IsRetriedAndDeliveredOnceAcrossARestart) {
  // The receiver refuses the first POST: a delivery is pending with its
  // backoff when the notifier (store and all) goes away.
  WebhookReceiver receiver([](const Received&, size_t index) { return index == 0 ? 500 : 200; });
  const auto sub = notify_->add_subscription(webhook(receiver.url()), kT0);
  ASSERT_TRUE(notify_->publish(issue_event(12, "6.1-rc3")));
  {
    auto first = notifier();
    EXPECT_EQ(first->tick(), 1u);
    ASSERT_TRUE(receiver.wait_for(1, 10s));
  }
  EXPECT_EQ(count("SELECT attempts FROM notify_outbox"), 1);
  EXPECT_EQ(count("SELECT count(*) FROM notify_outbox WHERE state = 'pending'"), 1);
  // A new process: another store and notifier on the same database.
  notify_ = std::make_unique<PgNotifyStore>(url_);
  auto second = notifier();
  ASSERT_TRUE(tick_until(*second, [&] { return receiver.received().size() >= 2; }));
  const std::string id = "1-" + std::to_string(sub.id());
  const auto got = receiver.received();
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].status, 500);  // the checker saw the refused attempt
  EXPECT_EQ(got[0].delivery, id);
  EXPECT_EQ(receiver.accepted(id), 1u);
  // Nothing more is due, however often the notifier looks.
  for (int i = 0; i < 5; ++i) EXPECT_EQ(second->tick(), 0u);
  EXPECT_EQ(receiver.received().size(), 2u);
  EXPECT_EQ(count("SELECT count(*) FROM notify_outbox WHERE state = 'delivered'"), 1);
  const json body = json::parse(got[1].body);
  EXPECT_EQ(body["kind"], "new-issue");
  EXPECT_EQ(body["issue"]["id"], 12);
  EXPECT_EQ(body["kernel"], "6.1-rc3");
  EXPECT_EQ(body["link"], "http://127.0.0.1:8080/#/issues/12");
  EXPECT_EQ(got[1].event, "issue-new:12");
}

TEST_F(NotifyTest, ADeliveryThatNeverSucceedsIsGivenUpAfterItsLastAttempt) {
  WebhookReceiver receiver([](const Received&, size_t) { return 503; });
  options_.retry.max_attempts = 3;
  notify_->add_subscription(webhook(receiver.url()), kT0);
  notify_->publish(issue_event(1, "host"));
  auto n = notifier();
  ASSERT_TRUE(tick_until(
      *n, [&] { return count("SELECT count(*) FROM notify_outbox WHERE state = 'failed'") == 1; }));
  EXPECT_EQ(receiver.received().size(), 3u);
  const auto subs = notify_->list_subscriptions();
  ASSERT_EQ(subs.size(), 1u);
  EXPECT_EQ(subs[0].failed(), 1u);
  // The status class only: what the target said is not shown.
  EXPECT_EQ(subs[0].last_error(), "answered 5xx");
}

TEST_F(NotifyTest, ANightlySendsOnlyCellsThatPassedTheNightBefore) {
  const auto sched = store_->add_schedule("nightly", "0 2 * * *", v1::CampaignSpec{}, kT0);
  auto n = notifier();
  const int64_t n1 = night(sched.id(), v1::VERDICT_PASS, v1::VERDICT_PASS);
  EXPECT_EQ(n->compare_nightlies(), 0u);  // no night before
  const int64_t n2 = night(sched.id(), v1::VERDICT_VIOLATION, v1::VERDICT_PASS);
  EXPECT_EQ(n->compare_nightlies(), 1u);  // tmpfs newly fails
  night(sched.id(), v1::VERDICT_VIOLATION, v1::VERDICT_PASS);
  EXPECT_EQ(n->compare_nightlies(), 0u);  // it failed the night before too: nothing new
  night(sched.id(), v1::VERDICT_PASS, v1::VERDICT_PASS);
  EXPECT_EQ(n->compare_nightlies(), 0u);  // all passing: nothing
  EXPECT_EQ(n->compare_nightlies(), 0u);  // compared once each
  EXPECT_EQ(count("SELECT count(*) FROM notify_checked"), 4);
  const auto events = notify_->recent_events(10);
  ASSERT_EQ(events.size(), 1u);
  const auto& e = events[0];
  EXPECT_EQ(e.kind(), v1::EVENT_KIND_NIGHTLY_FAILED);
  EXPECT_EQ(e.campaign_id(), n2);
  EXPECT_EQ(e.previous_campaign_id(), n1);
  EXPECT_EQ(e.schedule_name(), "nightly");
  ASSERT_EQ(e.cells_size(), 1);
  EXPECT_EQ(e.cells(0).fs(), "tmpfs");
  EXPECT_EQ(e.cells(0).verdict(), v1::VERDICT_VIOLATION);
  EXPECT_EQ(e.cells(0).failed_jobs(), 1u);
}

TEST_F(NotifyTest, ALateFiringAndAnUnservedNightlyAreReported) {
  v1::CampaignSpec spec;
  spec.set_name("nightly");
  spec.add_scenarios("setattr-lookup");
  spec.add_filesystems("tmpfs");
  spec.add_kernels("6.1-nobody");
  const auto sched = store_->add_schedule("nightly", "0 2 * * *", spec, kT0);
  WorkSignal work;
  Scheduler scheduler(*store_, clock_, work, notify_.get());
  // On time: fired, nothing to say yet.
  clock_.set(kT0 + 2s);
  ASSERT_EQ(scheduler.tick().size(), 1u);
  EXPECT_EQ(count("SELECT count(*) FROM notify_events"), 0);
  // The next firing an hour late (the coordinator was down): reported once.
  clock_.set(kT0 + 24h + 1h);
  ASSERT_EQ(scheduler.tick().size(), 1u);
  EXPECT_EQ(count("SELECT count(*) FROM notify_events WHERE key LIKE 'nightly-late:%'"), 1);
  // No agent runs kernel 6.1-nobody: after unserved_after, each nightly once.
  options_.unserved_after = 10min;
  auto n = notifier();
  EXPECT_EQ(n->check_unserved(), 1u);  // the first; the second is too young
  clock_.advance(11min);
  EXPECT_EQ(n->check_unserved(), 1u);
  EXPECT_EQ(n->check_unserved(), 0u);
  const auto events = notify_->recent_events(10);
  ASSERT_EQ(events.size(), 3u);
  EXPECT_EQ(events[0].kind(), v1::EVENT_KIND_NIGHTLY_NOT_RUN);
  ASSERT_GT(events[0].reasons_size(), 0);
  EXPECT_NE(events[0].reasons(0).find("6.1-nobody"), std::string::npos) << events[0].reasons(0);
  EXPECT_EQ(events[2].schedule_id(), sched.id());
  EXPECT_NE(events[2].reasons(0).find("fired only at"), std::string::npos);
}

TEST_F(NotifyTest, MailsReachAnSmtpServerAndNameTheIssueKernelAndLink) {
  testing::TestDir dir;
  SmtpSink sink(dir.path(), "leapfrog", "s3cret");
  options_.smtp.url = sink.url();
  options_.smtp.from = "leapfrog@ci.example.org";
  options_.smtp.user = "leapfrog";
  options_.smtp.password = "wrong";
  v1::Subscription mail;
  mail.set_name("list");
  mail.mutable_email()->add_to("kernel-ci@example.org");
  notify_->add_subscription(mail, kT0);
  ASSERT_TRUE(notify_->publish(issue_event(42, "6.1-rc3")));
  // The server refuses a wrong password: the delivery waits with the error
  // (a backoff longer than the refusal takes, so one tick tries once).
  options_.retry.first = 1s;
  {
    auto n = notifier();
    EXPECT_EQ(n->tick(), 1u);
  }
  EXPECT_EQ(sink.mails().size(), 0u);
  const auto subs = notify_->list_subscriptions();
  EXPECT_EQ(subs[0].pending(), 1u);
  EXPECT_NE(subs[0].last_error().find("535"), std::string::npos) << subs[0].last_error();
  // With the right one it is sent once.
  options_.smtp.password = "s3cret";
  auto n = notifier();
  ASSERT_TRUE(tick_until(*n, [&] { return sink.mails().size() >= 1; }));
  for (int i = 0; i < 3; ++i) n->tick();
  const auto mails = sink.mails();
  ASSERT_EQ(mails.size(), 1u);
  const std::string link = "http://127.0.0.1:8080/#/issues/42";
  EXPECT_TRUE(notify_testing::mail_names(mails[0], 42, "6.1-rc3", link)) << mails[0];
  EXPECT_EQ(notify_testing::mail_header(mails[0], "X-Sink-Rcpt"), "kernel-ci@example.org");
  EXPECT_EQ(notify_testing::mail_header(mails[0], "Subject"),
            "[leapfrog] new issue #42 on 6.1-rc3: stale-grant stat/chmod");
  EXPECT_NE(mails[0].find("Message-ID: <leapfrog-1-"), std::string::npos) << mails[0];
  // The checker fires on a mail that lacks the link or names another kernel.
  std::string no_link = mails[0];
  no_link.replace(no_link.rfind(link), link.size(), "(no link)");
  EXPECT_FALSE(notify_testing::mail_names(no_link, 42, "6.1-rc3", link));
  EXPECT_FALSE(notify_testing::mail_names(mails[0], 42, "6.2-rc1", link));
}

TEST_F(NotifyTest, TriageStoresANewIssueAndARegressionWithTheirFacts) {
  triage::PgTriageStore triage_store(url_);
  triage::TriageEngine engine(*store_, triage_store, clock_, nullptr);
  v1::SubscriptionFilter issues_only;
  issues_only.add_events(v1::EVENT_KIND_NEW_ISSUE);
  issues_only.add_events(v1::EVENT_KIND_REGRESSION);
  notify_->add_subscription(webhook("http://127.0.0.1:9/x", issues_only), kT0);
  const std::string agent = store_->register_agent("a", caps({"tmpfs"}), clock_.now());
  // One setattr-lookup job on tmpfs that found a violation, grouped.
  auto failing_night = [&] {
    v1::CampaignSpec spec;
    spec.set_name("nightly");
    spec.add_scenarios("setattr-lookup");
    spec.add_filesystems("tmpfs");
    spec.set_seeds(1);
    const auto n = normalize(spec);
    store_->create_campaign(n, expand(n), 0, clock_.now());
    auto job = store_->lease_job(agent, caps({"tmpfs"}), clock_.now(), 60s);
    ASSERT_TRUE(job);
    v1::Outcome o;
    o.set_verdict(v1::VERDICT_VIOLATION);
    o.set_violation_count(1);
    auto* v = o.add_violations();
    v->set_kind(v1::VIOLATION_KIND_STALE_GRANT);
    v->set_op("stat");
    v->set_path("d0/d1/f");
    v->set_step(2);
    v->set_object("attr(d1)");
    store_->report_outcome(agent, job->job_id(), job->attempt(), o, clock_.now());
    engine.group_failures();
    engine.group_failures();
  };
  failing_night();
  const auto issues = engine.list_issues({});
  ASSERT_EQ(issues.issues_size(), 1);
  const int64_t id = issues.issues(0).id();
  EXPECT_EQ(count("SELECT count(*) FROM notify_events WHERE key = 'issue-new:" +
                  std::to_string(id) + "'"),
            1);
  failing_night();  // the same issue again: nothing new
  EXPECT_EQ(count("SELECT count(*) FROM notify_events"), 1);
  v1::SetIssueStatusRequest fix;
  fix.set_id(id);
  fix.set_status(v1::ISSUE_STATUS_FIXED);
  engine.set_issue_status(fix);
  clock_.advance(24h);
  failing_night();  // fails again after the fix: a regression
  EXPECT_EQ(count("SELECT count(*) FROM notify_events WHERE kind = 2"), 1);
  failing_night();  // still the regression: nothing new
  EXPECT_EQ(count("SELECT count(*) FROM notify_events"), 2);
  EXPECT_EQ(count("SELECT count(*) FROM notify_outbox"), 2);
  const auto events = notify_->recent_events(5);
  EXPECT_EQ(events[0].kind(), v1::EVENT_KIND_REGRESSION);
  EXPECT_EQ(events[0].issue_id(), id);
  EXPECT_EQ(events[0].kernel_label(), "host");
  EXPECT_EQ(events[0].scenario(), "setattr-lookup");
  EXPECT_NE(events[0].summary().find("regression of issue #" + std::to_string(id)),
            std::string::npos)
      << events[0].summary();
}

}  // namespace
}  // namespace leapfrog::coord::notify
