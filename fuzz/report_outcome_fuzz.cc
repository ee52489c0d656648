// libFuzzer target: ReportOutcome decoding in the agent service. The bytes
// are a serialized v1::ReportOutcomeRequest, as gRPC hands it to
// AgentServiceImpl::ReportOutcome; report_problem() is everything that
// method checks before the store sees the request (coordinator/
// report_check.h). No store is involved, so no test double: what the store
// does with an accepted report is tested against PostgreSQL in
// coordinator/store. An accepted request must hold what the store relies on.

#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include <google/protobuf/stubs/logging.h>
#include <google/protobuf/util/message_differencer.h>

#include "common/bounds.h"
#include "coordinator/report_check.h"
#include "coordinator/wire_paths.h"

using namespace leapfrog;

namespace {

[[noreturn]] void fail(const char* why) {
  std::fprintf(stderr, "accepted a report that %s\n", why);
  std::abort();
}

}  // namespace

// Invalid UTF-8 in a string field is a parse failure, which protobuf also
// logs; one line per input would drown the fuzzer's output.
extern "C" int LLVMFuzzerInitialize(int*, char***) {
  google::protobuf::SetLogHandler(nullptr);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  v1::ReportOutcomeRequest req;
  if (!req.ParseFromArray(data, static_cast<int>(size))) return 0;
  const std::string why = coord::report_problem(req);
  if (!why.empty()) return 0;
  if (req.job_id() <= 0 || req.attempt() == 0) fail("has no job or attempt");
  if (!v1::Verdict_IsValid(req.outcome().verdict()) ||
      req.outcome().verdict() == v1::VERDICT_UNSPECIFIED)
    fail("has no known verdict");
  if (req.outcome().ByteSizeLong() > kMaxOutcomeBytes)
    fail("is over the outcome size limit");
  if (req.outcome().has_build() && !coord::build_result_problem(req.outcome().build()).empty())
    fail("has a bad build result");
  for (const auto& v : req.outcome().violations())
    if (v.kind() == v1::VIOLATION_KIND_UNSPECIFIED || !v1::ViolationKind_IsValid(v.kind()))
      fail("has a violation of no known kind");
  // What the store writes is read back the same. Not byte for byte: the
  // wire may repeat a map key, which parsing keeps once.
  v1::Outcome back;
  if (!back.ParseFromString(req.outcome().SerializeAsString()) ||
      !google::protobuf::util::MessageDifferencer::Equals(back, req.outcome()))
    fail("does not survive a round trip");
  return 0;
}
