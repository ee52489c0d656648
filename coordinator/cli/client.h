#pragma once
// The `leapfrog` CLI's client verbs: campaigns, schedules, agents, outcomes,
// kernels. Each prints a readable table, or JSON with --json.

#include <chrono>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "leapfrog/v1/control.grpc.pb.h"

namespace leapfrog::cli {

struct Endpoint {
  std::string address;  // host:port
  std::string token;
  // The data folder the address was read from ("" when given by
  // --coordinator): a client that lost the coordinator reads it again, since
  // a restarted `leapfrog up` may listen elsewhere.
  std::string data_dir;
};

// Resolves --coordinator / --token-file, falling back to the files `leapfrog up`
// writes in the data folder. Throws std::runtime_error saying what is missing.
Endpoint resolve_endpoint(const std::string& address, const std::string& token_file, const std::string& data_dir);

struct CampaignFlags {
  std::string name;
  std::vector<std::string> scenarios;
  std::vector<std::string> filesystems;
  std::vector<std::string> kernels;
  uint32_t seeds = 1;
  uint64_t first_seed = 1;
  std::string duration = "2s";
  uint64_t iterations = 0;
  uint32_t observers = 0;
  std::string align;  // empty: each job's seed chooses
  std::string pin;    // on | off; empty: each job's seed chooses
  std::string widen;  // kernel delay points (ScenarioSpec.widen); empty: the seed's
  std::vector<std::string> params;
  uint32_t max_attempts = 0;
  // A kernel to build before the campaign tests it (--build LABEL --source ...).
  std::string build_label;
  std::string build_source;
  std::vector<std::string> build_source_roots;  // empty: /usr/src
  std::vector<std::string> build_patches;
  std::vector<std::string> build_configs;
  std::string build_cmdline;
};

// Throws std::runtime_error on malformed flags (bad duration, param syntax).
v1::CampaignSpec to_spec(const CampaignFlags& f);

class Client {
 public:
  explicit Client(const Endpoint& ep);
  // `timeout` > 0: with `wait`, give up (exit 2) when the campaign is not
  // done by then.
  int campaign_run(const CampaignFlags& f, bool wait, bool json,
                   std::chrono::milliseconds timeout = std::chrono::milliseconds(0));
  // The `limit` most recent campaigns.
  int campaign_list(uint32_t limit, bool json);
  int campaign_show(int64_t id, bool json);
  int schedule_add(const std::string& name, const std::string& cron, const CampaignFlags& f, bool json);
  int schedule_list(bool json);
  int schedule_enable(int64_t id, bool enabled, bool json);
  int schedule_remove(int64_t id);
  int agents(bool json);
  // The `limit` most recent outcomes (of `campaign`, 0: all).
  int outcomes(int64_t campaign, bool failed, uint32_t limit, bool json);
  int kernels(bool json);

 private:
  std::unique_ptr<grpc::ClientContext> ctx() const;
  // Prints the status as one line on stderr; returns the exit code (2).
  int fail(const grpc::Status& s) const;
  // Polls the campaign until done (progress bar on a terminal); prints each
  // warning not in `warned` once.
  int wait_for(int64_t id, bool json, std::set<std::string> warned = {},
               std::chrono::milliseconds timeout = std::chrono::milliseconds(0));
  // After UNAVAILABLE: the address in the data folder, if it changed, becomes
  // the one this client calls.
  void reread_address();

  Endpoint ep_;
  std::unique_ptr<v1::ControlService::Stub> stub_;
};

}  // namespace leapfrog::cli
