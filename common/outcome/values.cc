#include "common/outcome/values.h"

#include <google/protobuf/descriptor.h>
#include <google/protobuf/duration.pb.h>
#include <google/protobuf/timestamp.pb.h>
#include <google/protobuf/util/time_util.h>

#include <cmath>
#include <cstdint>
#include <limits>

namespace leapfrog::outcome {

namespace {

namespace pb = google::protobuf;
using pb::util::TimeUtil;

// Why a Duration or Timestamp is bad ("" if it is not, or is neither).
std::string time_problem(const pb::Message& m, const std::string& path) {
  const std::string& type = m.GetDescriptor()->full_name();
  if (type == "google.protobuf.Duration") {
    const auto& v = static_cast<const pb::Duration&>(m);
    const bool bad_sign = (v.seconds() > 0 && v.nanos() < 0) || (v.seconds() < 0 && v.nanos() > 0);
    if (v.seconds() < TimeUtil::kDurationMinSeconds || v.seconds() > TimeUtil::kDurationMaxSeconds ||
        v.nanos() <= -1'000'000'000 || v.nanos() >= 1'000'000'000 || bad_sign)
      return path + " is no valid Duration (" + std::to_string(v.seconds()) + " s, " +
             std::to_string(v.nanos()) + " ns)";
  } else if (type == "google.protobuf.Timestamp") {
    const auto& v = static_cast<const pb::Timestamp&>(m);
    if (v.seconds() < TimeUtil::kTimestampMinSeconds || v.seconds() > TimeUtil::kTimestampMaxSeconds ||
        v.nanos() < 0 || v.nanos() >= 1'000'000'000)
      return path + " is no valid Timestamp (" + std::to_string(v.seconds()) + " s, " +
             std::to_string(v.nanos()) + " ns)";
  }
  return "";
}

bool is_time(const pb::Descriptor* d) {
  return d->full_name() == "google.protobuf.Duration" || d->full_name() == "google.protobuf.Timestamp";
}

// Walks `m`: finds the first bad value (clear == false, `m` untouched), or
// clears every one (clear == true). Each bad value's path goes to `found`.
class Walker {
 public:
  explicit Walker(bool clear) : clear_(clear) {}

  // False once a first bad value is found and the walk is only looking.
  bool walk(pb::Message& m, const std::string& path) {
    const pb::Reflection* r = m.GetReflection();
    std::vector<const pb::FieldDescriptor*> fields;
    r->ListFields(m, &fields);
    for (const pb::FieldDescriptor* f : fields) {
      const bool rep = f->is_repeated();
      const int n = rep ? r->FieldSize(m, f) : 1;
      for (int i = 0; i < n; ++i) {
        const std::string at = path + "." + f->name() + (rep ? "[" + std::to_string(i) + "]" : "");
        if (!visit(m, r, f, rep, i, at)) return false;
      }
    }
    return true;
  }

  std::vector<std::string> found;

 private:
  bool bad(std::string why) {
    found.push_back(std::move(why));
    return clear_;
  }

  bool visit(pb::Message& m, const pb::Reflection* r, const pb::FieldDescriptor* f, bool rep, int i,
             const std::string& at) {
    switch (f->cpp_type()) {
      case pb::FieldDescriptor::CPPTYPE_MESSAGE: {
        const pb::Message& sub = rep ? r->GetRepeatedMessage(m, f, i) : r->GetMessage(m, f);
        if (is_time(f->message_type())) {
          std::string why = time_problem(sub, at);
          if (why.empty()) return true;
          if (clear_) {
            if (rep)
              r->MutableRepeatedMessage(&m, f, i)->Clear();
            else
              r->ClearField(&m, f);
          }
          return bad(std::move(why));
        }
        if (!clear_) return walk(const_cast<pb::Message&>(sub), at);
        return walk(rep ? *r->MutableRepeatedMessage(&m, f, i) : *r->MutableMessage(&m, f), at);
      }
      case pb::FieldDescriptor::CPPTYPE_DOUBLE: {
        if (std::isfinite(rep ? r->GetRepeatedDouble(m, f, i) : r->GetDouble(m, f))) return true;
        if (clear_) rep ? r->SetRepeatedDouble(&m, f, i, 0) : r->SetDouble(&m, f, 0);
        return bad(at + " is not a finite number");
      }
      case pb::FieldDescriptor::CPPTYPE_FLOAT: {
        if (std::isfinite(rep ? r->GetRepeatedFloat(m, f, i) : r->GetFloat(m, f))) return true;
        if (clear_) rep ? r->SetRepeatedFloat(&m, f, i, 0) : r->SetFloat(&m, f, 0);
        return bad(at + " is not a finite number");
      }
      case pb::FieldDescriptor::CPPTYPE_UINT64: {
        const uint64_t v = rep ? r->GetRepeatedUInt64(m, f, i) : r->GetUInt64(m, f);
        if (v <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return true;
        if (clear_) rep ? r->SetRepeatedUInt64(&m, f, i, 0) : r->SetUInt64(&m, f, 0);
        return bad(at + " " + std::to_string(v) + " is past what is stored (at most 2^63-1)");
      }
      case pb::FieldDescriptor::CPPTYPE_INT64: {
        const int64_t v = rep ? r->GetRepeatedInt64(m, f, i) : r->GetInt64(m, f);
        if (v != std::numeric_limits<int64_t>::min()) return true;
        if (clear_) rep ? r->SetRepeatedInt64(&m, f, i, 0) : r->SetInt64(&m, f, 0);
        return bad(at + " is the least int64, no real value");
      }
      case pb::FieldDescriptor::CPPTYPE_INT32: {
        const int32_t v = rep ? r->GetRepeatedInt32(m, f, i) : r->GetInt32(m, f);
        if (v != std::numeric_limits<int32_t>::min()) return true;
        if (clear_) rep ? r->SetRepeatedInt32(&m, f, i, 0) : r->SetInt32(&m, f, 0);
        return bad(at + " is the least int32, no real value");
      }
      default:
        return true;
    }
  }

  const bool clear_;
};

}  // namespace

std::string first_bad_value(const pb::Message& m, const std::string& path) {
  if (std::string why = time_problem(m, path); !why.empty()) return why;
  Walker w(false);
  w.walk(const_cast<pb::Message&>(m), path);  // looking only: nothing is written
  return w.found.empty() ? "" : w.found.front();
}

std::vector<std::string> clear_bad_values(pb::Message& m, const std::string& path) {
  Walker w(true);
  w.walk(m, path);
  return w.found;
}

}  // namespace leapfrog::outcome
