// `leapfrog subscribe` (subscribe_cmds.h).

#include "coordinator/cli/subscribe_cmds.h"

#include <grpcpp/grpcpp.h>

#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>

#include "common/ktap/words.h"
#include "coordinator/channel.h"
#include "coordinator/notify/message.h"
#include "coordinator/notify/outbox.h"
#include "leapfrog/v1/notify.grpc.pb.h"

namespace leapfrog::cli {

namespace {

std::unique_ptr<grpc::ClientContext> context(const Endpoint& ep) {
  auto c = std::make_unique<grpc::ClientContext>();
  c->AddMetadata("authorization", "Bearer " + ep.token);
  c->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
  return c;
}

void check(const grpc::Status& s) {
  if (!s.ok()) throw std::runtime_error(s.error_message());
}

std::string target_of(const v1::Subscription& s) {
  if (s.has_webhook()) return s.webhook().url();
  std::string out;
  for (const auto& t : s.email().to()) out += (out.empty() ? "mailto:" : ",") + t;
  return out;
}

std::string filter_of(const v1::Subscription& s) {
  const auto& f = s.filter();
  std::string out;
  auto add = [&](const std::string& what) { out += (out.empty() ? "" : " ") + what; };
  for (int k : f.events()) add(coord::notify::event_kind_name(static_cast<v1::EventKind>(k)));
  if (f.events_size() == 0) add("every event");
  if (!f.kernel().empty()) add("kernel=" + f.kernel());
  if (!f.scenario().empty()) add("scenario=" + f.scenario());
  if (f.issue_kind() != v1::ISSUE_KIND_UNSPECIFIED)
    add("issue-kind=" + ktap::issue_kind_word(f.issue_kind()));
  if (f.schedule_id() != 0) add("schedule=" + std::to_string(f.schedule_id()));
  return out;
}

}  // namespace

SubscribeCommands::SubscribeCommands(CLI::App& app) {
  subscribe_ = app.add_subcommand(
      "subscribe", "notifications: webhooks and mails of new issues, regressions, nightlies");
  subscribe_->require_subcommand(1);
  add_ = subscribe_->add_subcommand("add", "add a subscription: a filter and a target");
  add_->add_option("--name", name_, "name shown in lists")->required();
  add_->add_option("--webhook", webhook_, "POST each event as JSON to this http(s) URL");
  add_->add_option("--email", email_, "mail each event to this address (repeatable)");
  add_->add_option("--event", events_,
                   "only these events: new-issue, regression, nightly-failed, nightly-not-run, "
                   "action-result (repeatable; default all)");
  add_->add_option("--kernel", kernel_, "only events on this kernel label or glob (e.g. '6.1-*')");
  add_->add_option("--scenario", scenario_, "only events of this scenario or glob");
  add_->add_option("--issue-kind", issue_kind_,
                   "only issues of this kind: violation, crash, hang, boot-failure");
  add_->add_option("--schedule", schedule_, "only events of this schedule's nightlies (id)");
  list_ = subscribe_->add_subcommand("list", "subscriptions with their delivery counts");
  rm_ = subscribe_->add_subcommand("rm", "remove a subscription (and its pending deliveries)");
  rm_->add_option("id", id_, "subscription id")->required();
  for (auto* sub : {subscribe_, add_, list_, rm_}) sub->fallthrough();
}

bool SubscribeCommands::parsed() const {
  return subscribe_->parsed();
}

int SubscribeCommands::run(const Endpoint& ep, bool json) {
  auto stub = v1::NotifyService::NewStub(coord::coordinator_channel(ep.address));
  if (add_->parsed()) {
    v1::AddSubscriptionRequest req;
    auto* s = req.mutable_subscription();
    s->set_name(name_);
    if (!webhook_.empty() && !email_.empty())
      throw std::runtime_error("give one target: --webhook URL or --email ADDRESS");
    if (!webhook_.empty()) s->mutable_webhook()->set_url(webhook_);
    for (const auto& e : email_) s->mutable_email()->add_to(e);
    auto* f = s->mutable_filter();
    try {
      for (const auto& e : events_) f->add_events(coord::notify::parse_event_kind(e));
    } catch (const coord::notify::SubscriptionError& e) {
      throw std::runtime_error(std::string("--event: ") + e.what());
    }
    f->set_kernel(kernel_);
    f->set_scenario(scenario_);
    if (!issue_kind_.empty()) {
      f->set_issue_kind(ktap::issue_kind_from(issue_kind_));
      if (f->issue_kind() == v1::ISSUE_KIND_UNSPECIFIED)
        throw std::runtime_error("--issue-kind \"" + issue_kind_ +
                                 "\": want violation, crash, hang or boot-failure");
    }
    f->set_schedule_id(schedule_);
    v1::Subscription created;
    check(stub->AddSubscription(context(ep).get(), req, &created));
    if (json)
      std::cout << coord::notify::to_json(created).dump() << "\n";
    else
      std::printf("subscription %lld: %s -> %s\n", static_cast<long long>(created.id()),
                  filter_of(created).c_str(), target_of(created).c_str());
    return 0;
  }
  if (list_->parsed()) {
    v1::ListSubscriptionsResponse resp;
    check(stub->ListSubscriptions(context(ep).get(), v1::ListSubscriptionsRequest{}, &resp));
    if (json) {
      nlohmann::json list = nlohmann::json::array();
      for (const auto& s : resp.subscriptions()) list.push_back(coord::notify::to_json(s));
      std::cout << nlohmann::json{{"subscriptions", list}}.dump() << "\n";
      return 0;
    }
    if (resp.subscriptions_size() == 0) std::printf("no subscriptions\n");
    for (const auto& s : resp.subscriptions()) {
      std::printf("%-4lld %-16s %s -> %s  delivered %llu, pending %llu, failed %llu\n",
                  static_cast<long long>(s.id()), s.name().c_str(), filter_of(s).c_str(),
                  target_of(s).c_str(), static_cast<unsigned long long>(s.delivered()),
                  static_cast<unsigned long long>(s.pending()),
                  static_cast<unsigned long long>(s.failed()));
      if (!s.last_error().empty()) std::printf("     last error: %s\n", s.last_error().c_str());
    }
    return 0;
  }
  if (rm_->parsed()) {
    v1::RemoveSubscriptionRequest req;
    req.set_id(id_);
    v1::RemoveSubscriptionResponse resp;
    check(stub->RemoveSubscription(context(ep).get(), req, &resp));
    if (json)
      std::cout << nlohmann::json{{"removed", id_}}.dump() << "\n";
    else
      std::printf("removed subscription %lld\n", static_cast<long long>(id_));
    return 0;
  }
  return 2;
}

}  // namespace leapfrog::cli
