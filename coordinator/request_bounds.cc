#include "coordinator/request_bounds.h"

#include <google/protobuf/descriptor.h>

#include <string_view>
#include <vector>
#include <unordered_map>

#include "common/bounds.h"
#include "coordinator/store/store.h"
#include "leapfrog/v1/common.pb.h"

namespace leapfrog::coord {

namespace {

using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::Reflection;

// Strings whose bound is not kMaxFieldBytes, by field (each entry of a
// repeated one). Tighter checks elsewhere (campaign.cc's check_bounds, the
// services') may still refuse less, in their own words.
const std::unordered_map<std::string_view, size_t> kStringLimits = {
    {"leapfrog.v1.Capabilities.kernel_label", kMaxLabelBytes},
    {"leapfrog.v1.Capabilities.host", kMaxHostBytes},
    {"leapfrog.v1.Capabilities.filesystems", kMaxLabelBytes},
    {"leapfrog.v1.RegisterRequest.name", kMaxNameBytes},
    {"leapfrog.v1.RegisterLauncherRequest.name", kMaxNameBytes},
    {"leapfrog.v1.RegisterLauncherRequest.kernel_label", kMaxLabelBytes},
    {"leapfrog.v1.ClaimAgentNameRequest.agent_name", kMaxNameBytes},
    {"leapfrog.v1.FailAgentJobRequest.agent_name", kMaxNameBytes},
    {"leapfrog.v1.Kernel.label", kMaxLabelBytes},
    {"leapfrog.v1.Kernel.build_log_tail", kMaxLogTailBytes},
    {"leapfrog.v1.Kernel.sha256", kMaxLabelBytes},
    {"leapfrog.v1.Kernel.inputs_hash", kMaxLabelBytes},
    // A kernel may list 1024 patches: each stays small, so that the whole
    // kernel stays near a MiB in ListKernels.
    {"leapfrog.v1.KernelPatch.name", kMaxHostBytes},
    {"leapfrog.v1.KernelPatch.sha256", kMaxLabelBytes},
    {"leapfrog.v1.KernelPatch.subject", kMaxPatchSubjectBytes},
    {"leapfrog.v1.CampaignSpec.name", kMaxNameBytes},
    {"leapfrog.v1.CampaignSpec.widen", kMaxWidenBytes},
    {"leapfrog.v1.BuildFile.content", kMaxBuildFileBytes},
    {"leapfrog.v1.AddScheduleRequest.name", kMaxNameBytes},
    {"leapfrog.v1.Subscription.name", kMaxNameBytes},
    {"leapfrog.v1.SubscriptionFilter.kernel", kMaxLabelBytes},
    {"leapfrog.v1.SubscriptionFilter.scenario", kMaxLabelBytes},
    {"leapfrog.v1.WebhookTarget.url", kMaxUrlBytes},
    {"leapfrog.v1.EmailTarget.to", kMaxMailAddressBytes},
    {"leapfrog.v1.AddIssueNoteRequest.text", kMaxNoteBytes},
};

// Repeated fields that may hold more than kMaxFieldEntries.
const std::unordered_map<std::string_view, size_t> kEntryLimits = {
    {"leapfrog.v1.Kernel.patches", 1024},  // a long series, built by hand
    {"leapfrog.v1.ListAgentsRequest.names", kAgentPage.max},
    {"leapfrog.v1.StartBisectRequest.kernels", 1024},
    {"leapfrog.v1.GetScalingRequest.kernels", 1024},
};

size_t limit_of(const std::unordered_map<std::string_view, size_t>& limits,
                const FieldDescriptor& field, size_t fallback) {
  auto it = limits.find(field.full_name());
  return it == limits.end() ? fallback : it->second;
}

std::string walk(const Message& m, const std::string& path);

std::string check_message(const Message& m, const std::string& path) {
  // An outcome is bounded whole, as report_check.h does for ReportOutcome:
  // its console tail and violations may take most of the allowance.
  if (m.GetDescriptor() == v1::Outcome::descriptor()) {
    const size_t bytes = m.ByteSizeLong();
    if (bytes > kMaxOutcomeBytes)
      return path + " is " + std::to_string(bytes) + " bytes, want at most " +
             std::to_string(kMaxOutcomeBytes);
    return "";
  }
  return walk(m, path);
}

std::string walk(const Message& m, const std::string& prefix) {
  const Reflection& r = *m.GetReflection();
  std::vector<const FieldDescriptor*> fields;
  r.ListFields(m, &fields);  // set fields only: an unset one holds nothing
  for (const FieldDescriptor* f : fields) {
    const std::string path = prefix.empty() ? f->name() : prefix + "." + f->name();
    if (f->is_repeated()) {
      const size_t n = static_cast<size_t>(r.FieldSize(m, f));
      if (const size_t max = limit_of(kEntryLimits, *f, kMaxFieldEntries); n > max)
        return path + " has " + std::to_string(n) + " entries, want at most " +
               std::to_string(max);
      for (size_t i = 0; i < n; ++i) {
        const std::string at = path + "[" + std::to_string(i) + "]";
        const int k = static_cast<int>(i);
        if (f->cpp_type() == FieldDescriptor::CPPTYPE_STRING) {
          std::string scratch;
          const std::string& v = r.GetRepeatedStringReference(m, f, k, &scratch);
          if (auto why = too_long(at, v, limit_of(kStringLimits, *f, kMaxFieldBytes)); !why.empty()) return why;
        } else if (f->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE) {
          // A map's entries are messages too: their keys and values are walked.
          if (auto why = check_message(r.GetRepeatedMessage(m, f, k), at); !why.empty())
            return why;
        }
      }
    } else if (f->cpp_type() == FieldDescriptor::CPPTYPE_STRING) {
      std::string scratch;
      const std::string& v = r.GetStringReference(m, f, &scratch);
      if (auto why = too_long(path, v, limit_of(kStringLimits, *f, kMaxFieldBytes)); !why.empty()) return why;
    } else if (f->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE) {
      if (auto why = check_message(r.GetMessage(m, f), path); !why.empty()) return why;
    }
  }
  return "";
}

}  // namespace

std::string request_too_large(const Message& request) { return walk(request, ""); }

grpc::Status check_request_bounds(const Message& request) {
  std::string why = request_too_large(request);
  if (why.empty()) return grpc::Status::OK;
  return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, why);
}

}  // namespace leapfrog::coord
