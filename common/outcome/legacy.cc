#include "common/outcome/legacy.h"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <google/protobuf/unknown_field_set.h>
#include <google/protobuf/wire_format_lite.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "common/ktap/words.h"
#include "common/outcome/run_proto.h"
#include "common/outcome/scale_proto.h"
#include "common/outcome/violation_proto.h"
#include "common/proto_time.h"

namespace leapfrog {

using google::protobuf::UnknownField;
using google::protobuf::UnknownFieldSet;
using nlohmann::json;

namespace {

// The old fields' numbers (reserved in common.proto).
constexpr int kOutcomeJson = 14;
constexpr int kViolationKind = 1;
constexpr int kDetailJson = 12;
constexpr int kBuildSeconds = 7;         // KernelBuildResult.build_seconds
constexpr int kKernelBuildSeconds = 13;  // Kernel.build_seconds

// Sets m.build_time from the old double of seconds in field `number` of `m`, if
// it has one and build_time is unset; true if it had one.
template <class M>
bool upgrade_time(M& m, int number) {
  const auto s = take_old_double(m, number);
  if (!s) return false;
  // mutable_build_time() only here: calling it sets the field.
  if (!m.has_build_time() && std::isfinite(*s) && *s > 0 && *s < 1e9)
    *m.mutable_build_time() = duration_of_seconds(*s);
  return true;
}

}  // namespace

// The last length-delimited unknown field `number` of `m` (a repeated
// scalar's last value wins, as protobuf parses it), removing every copy.
std::optional<std::string> take_old_field(google::protobuf::Message& m, int number) {
  UnknownFieldSet* unknown = m.GetReflection()->MutableUnknownFields(&m);
  std::optional<std::string> out;
  for (int i = 0; i < unknown->field_count(); ++i) {
    const UnknownField& f = unknown->field(i);
    if (f.number() == number && f.type() == UnknownField::TYPE_LENGTH_DELIMITED)
      out = f.length_delimited();
  }
  if (out) unknown->DeleteByNumber(number);
  return out;
}

std::optional<double> take_old_double(google::protobuf::Message& m, int number) {
  UnknownFieldSet* unknown = m.GetReflection()->MutableUnknownFields(&m);
  std::optional<double> out;
  for (int i = 0; i < unknown->field_count(); ++i) {
    const UnknownField& f = unknown->field(i);
    if (f.number() == number && f.type() == UnknownField::TYPE_FIXED64)
      out = google::protobuf::internal::WireFormatLite::DecodeDouble(f.fixed64());
  }
  if (out) unknown->DeleteByNumber(number);
  return out;
}

bool upgrade_legacy(v1::KernelBuildResult& r) {
  return upgrade_time(r, kBuildSeconds);
}

bool upgrade_legacy(v1::Kernel& k) {
  return upgrade_time(k, kKernelBuildSeconds);
}

bool upgrade_legacy(v1::Outcome& o) {
  const bool build = o.has_build() && upgrade_legacy(*o.mutable_build());
  const auto text = take_old_field(o, kOutcomeJson);
  if (!text) return build;
  const json j = json::parse(*text, nullptr, false);
  if (!j.is_object()) return true;
  if (!o.has_run()) *o.mutable_run() = run_detail_from_json(j);
  if (!o.has_scale())
    if (auto scale = scale_run_from_json(j)) *o.mutable_scale() = std::move(*scale);
  return true;
}

bool upgrade_legacy(v1::Violation& v) {
  const auto kind = take_old_field(v, kViolationKind);
  const auto detail = take_old_field(v, kDetailJson);
  if (kind && v.kind() == v1::VIOLATION_KIND_UNSPECIFIED)
    v.set_kind(ktap::violation_kind_from(*kind));
  if (detail && !v.has_detail())
    if (auto d = legacy_detail(*detail)) *v.mutable_detail() = std::move(*d);
  return kind || detail;
}

std::optional<v1::ViolationDetail> legacy_detail(const std::string& json_text) {
  const json j = json::parse(json_text, nullptr, false);
  if (!j.is_object()) return std::nullopt;
  try {
    return detail_from_json(j);
  } catch (const json::exception&) {
    return std::nullopt;
  }
}

std::string with_old_field(const google::protobuf::MessageLite& m, int number,
                           const std::string& text) {
  std::string out = m.SerializeAsString();
  {
    google::protobuf::io::StringOutputStream stream(&out);
    google::protobuf::io::CodedOutputStream coded(&stream);
    coded.WriteTag(google::protobuf::internal::WireFormatLite::MakeTag(
        number, google::protobuf::internal::WireFormatLite::WIRETYPE_LENGTH_DELIMITED));
    coded.WriteVarint32(static_cast<uint32_t>(text.size()));
    coded.WriteString(text);
  }
  return out;
}

std::string with_old_double(const google::protobuf::MessageLite& m, int number, double value) {
  std::string out = m.SerializeAsString();
  {
    google::protobuf::io::StringOutputStream stream(&out);
    google::protobuf::io::CodedOutputStream coded(&stream);
    coded.WriteTag(google::protobuf::internal::WireFormatLite::MakeTag(
        number, google::protobuf::internal::WireFormatLite::WIRETYPE_FIXED64));
    coded.WriteLittleEndian64(google::protobuf::internal::WireFormatLite::EncodeDouble(value));
  }
  return out;
}

}  // namespace leapfrog
