#include "coordinator/report_check.h"

#include <google/protobuf/descriptor.h>
#include <google/protobuf/duration.pb.h>
#include <google/protobuf/timestamp.pb.h>
#include <google/protobuf/util/time_util.h>

#include <cmath>
#include <cstdint>
#include <limits>

#include "common/bounds.h"
#include "coordinator/wire_paths.h"

namespace leapfrog::coord {

namespace {

namespace pb = google::protobuf;
using pb::util::TimeUtil;

// Why one value of `m` cannot be stored and printed by every reader ("" if
// every one can), naming the field by its path ("outcome.elapsed"):
//   - Durations and Timestamps within protobuf's ranges, nanos with the
//     seconds' sign (the JSON printer refuses anything else, and a page
//     that prints the row fails);
//   - doubles and floats finite (JSON has no NaN or infinity);
//   - uint64 values within int64 (the store keeps them as bigint, and -1
//     read back fails every list that converts it);
//   - no int32 or int64 at its type's minimum (no real count, offset or
//     step is; negating it overflows the printers' arithmetic).
std::string value_problem(const pb::Message& m, const std::string& path) {
  const pb::Descriptor* d = m.GetDescriptor();
  const pb::Reflection* r = m.GetReflection();
  if (d->full_name() == "google.protobuf.Duration") {
    const auto& v = static_cast<const pb::Duration&>(m);
    const bool bad_sign = (v.seconds() > 0 && v.nanos() < 0) || (v.seconds() < 0 && v.nanos() > 0);
    if (v.seconds() < TimeUtil::kDurationMinSeconds || v.seconds() > TimeUtil::kDurationMaxSeconds ||
        v.nanos() <= -1'000'000'000 || v.nanos() >= 1'000'000'000 || bad_sign)
      return path + " is no valid Duration (" + std::to_string(v.seconds()) + " s, " +
             std::to_string(v.nanos()) + " ns)";
    return "";
  }
  if (d->full_name() == "google.protobuf.Timestamp") {
    const auto& v = static_cast<const pb::Timestamp&>(m);
    if (v.seconds() < TimeUtil::kTimestampMinSeconds || v.seconds() > TimeUtil::kTimestampMaxSeconds ||
        v.nanos() < 0 || v.nanos() >= 1'000'000'000)
      return path + " is no valid Timestamp (" + std::to_string(v.seconds()) + " s, " +
             std::to_string(v.nanos()) + " ns)";
    return "";
  }
  std::vector<const pb::FieldDescriptor*> fields;
  r->ListFields(m, &fields);
  for (const pb::FieldDescriptor* f : fields) {
    const int n = f->is_repeated() ? r->FieldSize(m, f) : 1;
    for (int i = 0; i < n; ++i) {
      const std::string at = path + "." + f->name() + (f->is_repeated() ? "[" + std::to_string(i) + "]" : "");
      const bool rep = f->is_repeated();
      switch (f->cpp_type()) {
        case pb::FieldDescriptor::CPPTYPE_MESSAGE: {
          const pb::Message& sub = rep ? r->GetRepeatedMessage(m, f, i) : r->GetMessage(m, f);
          if (auto why = value_problem(sub, at); !why.empty()) return why;
          break;
        }
        case pb::FieldDescriptor::CPPTYPE_DOUBLE: {
          const double v = rep ? r->GetRepeatedDouble(m, f, i) : r->GetDouble(m, f);
          if (!std::isfinite(v)) return at + " is not a finite number";
          break;
        }
        case pb::FieldDescriptor::CPPTYPE_FLOAT: {
          const float v = rep ? r->GetRepeatedFloat(m, f, i) : r->GetFloat(m, f);
          if (!std::isfinite(v)) return at + " is not a finite number";
          break;
        }
        case pb::FieldDescriptor::CPPTYPE_UINT64: {
          const uint64_t v = rep ? r->GetRepeatedUInt64(m, f, i) : r->GetUInt64(m, f);
          if (v > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
            return at + " " + std::to_string(v) + " is past what is stored (at most 2^63-1)";
          break;
        }
        case pb::FieldDescriptor::CPPTYPE_INT64: {
          const int64_t v = rep ? r->GetRepeatedInt64(m, f, i) : r->GetInt64(m, f);
          if (v == std::numeric_limits<int64_t>::min()) return at + " is the least int64, no real value";
          break;
        }
        case pb::FieldDescriptor::CPPTYPE_INT32: {
          const int32_t v = rep ? r->GetRepeatedInt32(m, f, i) : r->GetInt32(m, f);
          if (v == std::numeric_limits<int32_t>::min()) return at + " is the least int32, no real value";
          break;
        }
        default:
          break;
      }
    }
  }
  return "";
}

}  // namespace

std::string outcome_problem(const v1::Outcome& o) {
  if (!v1::Verdict_IsValid(o.verdict()))
    return "outcome.verdict " + std::to_string(o.verdict()) + " is not a known verdict";
  // Kinds are the ViolationKind enum; an agent from before it sent a word
  // (the old field 1), which reads as no kind here. Stored, it would name no
  // kind in any list: refuse it, and say why.
  for (int i = 0; i < o.violations_size(); ++i) {
    const auto kind = o.violations(i).kind();
    if (kind == v1::VIOLATION_KIND_UNSPECIFIED || !v1::ViolationKind_IsValid(kind))
      return "outcome.violations[" + std::to_string(i) + "].kind " + std::to_string(kind) +
             " is not a known violation kind (an agent older than the coordinator sends kinds as "
             "words: upgrade it)";
  }
  if (auto why = value_problem(o, "outcome"); !why.empty()) return why;
  // The counters agree: the listed violations are some of those counted.
  if (o.violation_count() < static_cast<uint64_t>(o.violations_size()))
    return "outcome.violation_count " + std::to_string(o.violation_count()) + " is less than the " +
           std::to_string(o.violations_size()) + " violations listed";
  const size_t bytes = o.ByteSizeLong();
  if (bytes > kMaxOutcomeBytes)
    return "outcome is " + std::to_string(bytes) + " bytes, want at most " +
           std::to_string(kMaxOutcomeBytes) + " (" + std::to_string(o.violations_size()) +
           " violations, error of " + std::to_string(o.error().size()) + " bytes)";
  return "";
}

std::string report_problem(const v1::ReportOutcomeRequest& req) {
  if (req.job_id() <= 0 || req.attempt() == 0) return "job_id and attempt are required";
  if (!req.has_outcome() || req.outcome().verdict() == v1::VERDICT_UNSPECIFIED)
    return "outcome.verdict is required";
  if (auto why = outcome_problem(req.outcome()); !why.empty()) return why;
  if (req.outcome().has_build()) return build_result_problem(req.outcome().build());
  return "";
}

}  // namespace leapfrog::coord
