// Event JSON and mails (message.h).

#include "coordinator/notify/message.h"

#include <cctype>
#include <cstdio>
#include <ctime>

#include "common/ktap/words.h"
#include "coordinator/notify/outbox.h"

namespace leapfrog::coord::notify {

using nlohmann::json;

namespace {

json iso(const google::protobuf::Timestamp& ts) {
  if (ts.seconds() == 0 && ts.nanos() == 0) return nullptr;
  const std::time_t t = static_cast<std::time_t>(ts.seconds());
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[40];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
  char ms[8];
  std::snprintf(ms, sizeof ms, ".%03dZ", ts.nanos() / 1'000'000);
  return std::string(buf) + ms;
}

std::string lower_name(const std::string& proto_name, const std::string& prefix) {
  std::string s = proto_name.rfind(prefix, 0) == 0 ? proto_name.substr(prefix.size()) : proto_name;
  for (char& c : s)
    c = c == '_' ? '-' : static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string action_kind(v1::ActionKind k) {
  return k == v1::ACTION_KIND_UNSPECIFIED ? "" : lower_name(v1::ActionKind_Name(k), "ACTION_KIND_");
}

std::string action_state(v1::ActionState s) {
  return s == v1::ACTION_STATE_UNSPECIFIED ? ""
                                           : lower_name(v1::ActionState_Name(s), "ACTION_STATE_");
}

std::string base_of(std::string base) {
  while (!base.empty() && base.back() == '/') base.pop_back();
  return base;
}

// "6.1-rc3", "k1, k2" or "" for the kernels an event is about.
std::string kernels_of(const v1::Event& e) {
  if (!e.kernel_label().empty()) return e.kernel_label();
  std::string out;
  for (const auto& c : e.cells()) {
    if (out.find(c.kernel_label()) != std::string::npos) continue;
    out += (out.empty() ? "" : ", ") + c.kernel_label();
  }
  return out;
}

std::string nightly_name(const v1::Event& e) {
  return e.schedule_name().empty() ? "schedule " + std::to_string(e.schedule_id())
                                   : "\"" + e.schedule_name() + "\"";
}

}  // namespace

std::string event_link(const v1::Event& e, const std::string& link_base) {
  if (link_base.empty()) return "";
  if (e.issue_id() > 0) return base_of(link_base) + "/#/issues/" + std::to_string(e.issue_id());
  if (e.campaign_id() > 0)
    return base_of(link_base) + "/#/campaigns/" + std::to_string(e.campaign_id());
  if (e.kind() == v1::EVENT_KIND_NIGHTLY_NOT_RUN) return base_of(link_base) + "/#/schedules";
  return base_of(link_base) + "/";
}

json to_json(const v1::Event& e) {
  json cells = json::array();
  for (const auto& c : e.cells()) {
    json cell = {{"scenario", c.scenario()}, {"kernel", c.kernel_label()}, {"fs", c.fs()}};
    if (c.verdict() != v1::VERDICT_UNSPECIFIED) {
      cell["verdict"] = ktap::verdict_word(c.verdict());
      cell["failed_jobs"] = c.failed_jobs();
      cell["jobs"] = c.jobs();
    }
    cells.push_back(std::move(cell));
  }
  json j = {{"id", e.id()},      {"key", e.key()},         {"kind", event_kind_name(e.kind())},
            {"at", iso(e.at())}, {"summary", e.summary()}, {"link", e.link()}};
  if (e.issue_id() > 0)
    j["issue"] = {{"id", e.issue_id()},
                  {"title", e.issue_title()},
                  {"kind", ktap::issue_kind_word(e.issue_kind())}};
  if (!e.scenario().empty()) j["scenario"] = e.scenario();
  if (!e.kernel_label().empty()) j["kernel"] = e.kernel_label();
  if (e.campaign_id() > 0) j["campaign_id"] = e.campaign_id();
  if (e.previous_campaign_id() > 0) j["previous_campaign_id"] = e.previous_campaign_id();
  if (e.schedule_id() > 0) j["schedule"] = {{"id", e.schedule_id()}, {"name", e.schedule_name()}};
  if (!cells.empty()) j["cells"] = cells;
  if (e.reasons_size() > 0)
    j["reasons"] = std::vector<std::string>(e.reasons().begin(), e.reasons().end());
  if (e.action_id() > 0)
    j["action"] = {{"id", e.action_id()},
                   {"kind", action_kind(e.action_kind())},
                   {"state", action_state(e.action_state())},
                   {"result", e.result()}};
  return j;
}

json to_json(const v1::Subscription& s) {
  json events = json::array();
  for (int k : s.filter().events())
    events.push_back(event_kind_name(static_cast<v1::EventKind>(k)));
  json j = {{"id", s.id()},
            {"name", s.name()},
            {"filter",
             {{"events", events},
              {"kernel", s.filter().kernel()},
              {"scenario", s.filter().scenario()},
              {"issue_kind", ktap::issue_kind_word(s.filter().issue_kind())},
              {"schedule_id", s.filter().schedule_id()}}},
            {"created_at", iso(s.created_at())},
            {"delivered", s.delivered()},
            {"pending", s.pending()},
            {"failed", s.failed()},
            {"last_error", s.last_error()}};
  if (s.has_webhook()) j["webhook"] = s.webhook().url();
  if (s.has_email())
    j["email"] = std::vector<std::string>(s.email().to().begin(), s.email().to().end());
  return j;
}

v1::Subscription subscription_from_json(const json& j) {
  if (!j.is_object()) throw SubscriptionError("the subscription is not a JSON object");
  auto text = [&](const json& o, const char* key) -> std::string {
    if (!o.contains(key) || o[key].is_null()) return "";
    if (!o[key].is_string())
      throw SubscriptionError(std::string("\"") + key + "\" is not a string");
    return o[key].get<std::string>();
  };
  v1::Subscription s;
  s.set_name(text(j, "name"));
  if (j.contains("webhook") && !j["webhook"].is_null())
    s.mutable_webhook()->set_url(text(j, "webhook"));
  if (j.contains("email") && !j["email"].is_null()) {
    const json& to = j["email"];
    if (to.is_string()) {
      s.mutable_email()->add_to(to.get<std::string>());
    } else if (to.is_array()) {
      for (const auto& a : to) {
        if (!a.is_string()) throw SubscriptionError("\"email\" holds a value that is not a string");
        s.mutable_email()->add_to(a.get<std::string>());
      }
    } else {
      throw SubscriptionError("\"email\" is not a string or a list of strings");
    }
    if (s.has_webhook() && s.has_email())
      throw SubscriptionError("a subscription has one target: \"webhook\" or \"email\"");
  }
  if (j.contains("filter") && !j["filter"].is_null()) {
    const json& f = j["filter"];
    if (!f.is_object()) throw SubscriptionError("\"filter\" is not an object");
    auto* filter = s.mutable_filter();
    if (f.contains("events") && !f["events"].is_null()) {
      if (!f["events"].is_array()) throw SubscriptionError("\"events\" is not a list");
      for (const auto& k : f["events"]) {
        if (!k.is_string())
          throw SubscriptionError("\"events\" holds a value that is not a string");
        filter->add_events(parse_event_kind(k.get<std::string>()));
      }
    }
    filter->set_kernel(text(f, "kernel"));
    filter->set_scenario(text(f, "scenario"));
    if (const std::string kind = text(f, "issue_kind"); !kind.empty()) {
      filter->set_issue_kind(ktap::issue_kind_from(kind));
      if (filter->issue_kind() == v1::ISSUE_KIND_UNSPECIFIED)
        throw SubscriptionError("\"issue_kind\" \"" + kind +
                                "\" is not violation, crash, hang or boot-failure");
    }
    if (f.contains("schedule_id") && !f["schedule_id"].is_null()) {
      if (!f["schedule_id"].is_number_integer() || f["schedule_id"].get<int64_t>() < 0)
        throw SubscriptionError("\"schedule_id\" is not a schedule id");
      filter->set_schedule_id(f["schedule_id"].get<int64_t>());
    }
  }
  validate(s);
  return s;
}

std::string mail_subject(const v1::Event& e) {
  return "[leapfrog] " + e.summary();
}

std::string mail_body(const v1::Event& e) {
  std::string b = e.summary() + "\n\n";
  auto line = [&](const std::string& name, const std::string& value) {
    if (!value.empty()) b += name + ": " + value + "\n";
  };
  line("Event", event_kind_name(e.kind()));
  if (e.issue_id() > 0) line("Issue", "#" + std::to_string(e.issue_id()) + " " + e.issue_title());
  line("Issue kind", ktap::issue_kind_word(e.issue_kind()));
  line("Scenario", e.scenario());
  line("Kernel", kernels_of(e));
  if (e.schedule_id() > 0) line("Nightly", nightly_name(e));
  if (e.campaign_id() > 0) line("Campaign", std::to_string(e.campaign_id()));
  if (e.previous_campaign_id() > 0)
    line("Night before", "campaign " + std::to_string(e.previous_campaign_id()));
  if (e.action_id() > 0)
    line("Action", action_kind(e.action_kind()) + " " + std::to_string(e.action_id()) + ", " +
                       action_state(e.action_state()));
  line("Result", e.result());
  line("Link", e.link());
  if (e.cells_size() > 0) {
    b += "\nCells (scenario, kernel, file system";
    b += e.kind() == v1::EVENT_KIND_NIGHTLY_FAILED ? ", verdict, failed of jobs):\n" : "):\n";
    for (const auto& c : e.cells()) {
      b += "  " + c.scenario() + "  " + c.kernel_label() + "  " + c.fs();
      if (c.verdict() != v1::VERDICT_UNSPECIFIED)
        b += "  " + ktap::verdict_word(c.verdict()) + "  " + std::to_string(c.failed_jobs()) + "/" +
             std::to_string(c.jobs());
      b += "\n";
    }
  }
  if (e.reasons_size() > 0) {
    b += "\nWhy:\n";
    for (const auto& r : e.reasons()) b += "  " + r + "\n";
  }
  b += "\n-- \nLeapfrog notification " + e.key() + " (event " + std::to_string(e.id()) + ")\n";
  return b;
}

}  // namespace leapfrog::coord::notify
