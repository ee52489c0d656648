#pragma once
// KTAP v1 (the kernel's Documentation/dev-tools/ktap.rst) for Leapfrog's
// jobs: one job is one test case whose diagnostic lines carry the seed, the
// strategy, the counts and each violation; a campaign is a suite whose
// subtests are its jobs. Proto-only, so that the agent (`leapfrog-agent run
// --format ktap`) and the coordinator's exports print the same lines.

#include <string>
#include <vector>

#include "leapfrog/v1/common.pb.h"

namespace leapfrog::ktap {

// What a job's result line says, from its verdict.
enum class Result {
  Pass,      // ok
  Fail,      // not ok (a violation, a kernel crash or a boot failure)
  Error,     // not ok # ERROR (the run, the build or the infrastructure failed)
  Hang,      // not ok # TIMEOUT
  Skip,      // ok # SKIP (not run yet)
  Unjudged,  // ok # SKIP inconclusive: why (ran, but earned no pass)
};

Result result_of(v1::Verdict verdict);

// One job's KTAP: diagnostic lines then the result line `ok|not ok <number>
// <name>`, every line indented by `indent` spaces. `outcome` null: the job
// has not run (SKIP, `why_not` saying why).
struct JobLines {
  int number = 1;
  std::string name;
  const v1::ScenarioSpec* spec = nullptr;
  std::string kernel;
  const v1::Outcome* outcome = nullptr;
  v1::Verdict verdict = v1::VERDICT_UNSPECIFIED;  // UNSPECIFIED: outcome's
  std::string why_not;
  // Extra diagnostic lines (a link to the issue page), without "# ".
  std::vector<std::string> notes;
  int indent = 0;
};
std::string job_lines(const JobLines& job);

// A whole document for one run, as `leapfrog-agent run --format ktap`
// prints it: the version line, the plan 1..1 and the job.
std::string run_document(const v1::ScenarioSpec& spec, const std::string& kernel,
                         const v1::Outcome& outcome);

// A test name KTAP accepts: no '#' (it starts a directive), no line breaks.
std::string safe_name(const std::string& name);

// A diagnostic text on one line, safe inside KTAP: no line breaks, and none of
// the phrases after which the kernel's parser stops reading (it takes them
// for the end of a kernel's test output).
std::string safe_text(const std::string& text);

}  // namespace leapfrog::ktap
