// libFuzzer target: campaign spec validation. The bytes are a serialized
// v1::CampaignSpec, as StartCampaign receives it; normalize() either refuses
// it (SpecError) or returns a spec that normalizes to itself, and expand()
// of it stays within the campaign job limit.

#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include <google/protobuf/stubs/logging.h>
#include <google/protobuf/util/message_differencer.h>

#include "coordinator/campaign.h"

using namespace leapfrog;

// Invalid UTF-8 in a string field is refused by the parser, which also logs
// it: on every such input, a large share of the run. The refusal is enough.
extern "C" int LLVMFuzzerInitialize(int*, char***) {
  google::protobuf::SetLogHandler(nullptr);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  v1::CampaignSpec spec;
  if (!spec.ParseFromArray(data, static_cast<int>(size))) return 0;
  v1::CampaignSpec norm;
  try {
    norm = coord::normalize(spec);
  } catch (const coord::SpecError&) {
    return 0;
  }
  v1::CampaignSpec again;
  try {
    again = coord::normalize(norm);
  } catch (const coord::SpecError& e) {
    std::fprintf(stderr, "a normalized spec is refused: %s\n", e.what());
    std::abort();
  }
  // Compared as messages: the bytes of a map field (params) come in no
  // fixed order, so equal specs can serialize differently (a long run found
  // one; its input is testdata/fuzz/campaign_fuzz/map-order-not-a-change).
  if (!google::protobuf::util::MessageDifferencer::Equals(again, norm)) {
    std::fprintf(stderr, "normalize is not idempotent:\n%s\n---\n%s\n", norm.DebugString().c_str(),
                 again.DebugString().c_str());
    std::abort();
  }
  const auto jobs = coord::expand(norm);
  if (jobs.size() > coord::kMaxJobsPerCampaign + static_cast<size_t>(norm.builds_size())) {
    std::fprintf(stderr, "expand made %zu jobs, over the limit\n", jobs.size());
    std::abort();
  }
  return 0;
}
