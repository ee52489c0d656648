#pragma once
// The agent's spool: outcomes waiting for the coordinator's acknowledgement,
// one durably written file each, so that an agent restarted after an outage
// or a crash still sends what its runs found (agent/connect.cc).

#include <cstdint>
#include <string>
#include <vector>

#include "leapfrog/v1/agent.pb.h"

namespace leapfrog {

class Spool {
 public:
  // Creates `dir` if needed. Throws std::filesystem::filesystem_error.
  explicit Spool(std::string dir);
  const std::string& dir() const { return dir_; }

  // Durably stores the report before it is sent. Throws std::runtime_error,
  // leaving no partial file behind.
  void put(const v1::ReportOutcomeRequest& req);
  // Before the agent registers: the spool takes a file and has room for
  // outcomes, else std::runtime_error says why. An agent that could not spool
  // would lease jobs, run them, and lose what they found.
  void check() const;
  // Removes what a previous agent left half done: spool files never renamed
  // into place (*.tmp) and the folders of runs that died with it (job-N).
  void remove_partial() const;
  // The spooled outcome files, oldest job first.
  std::vector<std::string> pending() const;
  // Reads one spooled file into `req`; false if it does not parse.
  static bool load(const std::string& file, v1::ReportOutcomeRequest& req);

 private:
  std::string file_for(int64_t job, uint32_t attempt) const;
  std::string dir_;
};

}  // namespace leapfrog
