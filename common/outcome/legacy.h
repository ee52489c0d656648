#pragma once
// The one reader of the shape outcomes had before every part was typed: an
// Outcome's JSON (old field 14, outcome_json) and a Violation's string kind
// (old field 1) and JSON detail (old field 12, detail_json; the violations
// table's `detail` text). Those fields are reserved now, so an old value
// parses with them as unknown fields; these functions turn them into the
// typed fields; a build's time, a double of seconds before it was a
// Duration, likewise. The store's migrations 18 and 20 run them over what it holds
// (coordinator/store/pg_legacy.h), so no other reader knows the old shape.

#include <optional>
#include <string>

#include "leapfrog/v1/common.pb.h"
#include "leapfrog/v1/control.pb.h"

namespace leapfrog {

// Sets o.run and o.scale from the old outcome JSON when they are unset (as
// the readers of that JSON did: run_detail_from_json, scale_run_from_json),
// and drops the JSON; upgrades o.build as below. Returns true if `o` carried
// either.
bool upgrade_legacy(v1::Outcome& o);

// Sets r.build_time from the old double of seconds (old field 7) when it is
// unset, and drops the double. Returns true if `r` carried it.
bool upgrade_legacy(v1::KernelBuildResult& r);

// The same for a kernel's build time (old Kernel field 13).
bool upgrade_legacy(v1::Kernel& k);

// Sets v.kind from the old string kind and v.detail from the old detail JSON
// when they are unset, and drops both. Returns true if `v` carried either.
bool upgrade_legacy(v1::Violation& v);

// An old detail JSON (a violation object as scenarios' to_json(Violation)
// writes it) as the typed detail; nullopt when it is not a JSON object or a
// field has the wrong type.
std::optional<v1::ViolationDetail> legacy_detail(const std::string& json_text);

// The last length-delimited unknown field `number` of `m` (a repeated
// scalar's last value wins, as protobuf parses it), removed with every copy:
// an old string field whose number is reserved now. nullopt if `m` has none.
std::optional<std::string> take_old_field(google::protobuf::Message& m, int number);

// The last 64-bit fixed unknown field `number` of `m` as a double, removed
// with every copy: an old double field whose number is reserved now.
std::optional<double> take_old_double(google::protobuf::Message& m, int number);

// `m` serialized with a length-delimited field `number` holding `text`
// appended, as an old agent or store wrote one of the fields above: for the
// tests of the conversion.
std::string with_old_field(const google::protobuf::MessageLite& m, int number,
                           const std::string& text);
// The same with a 64-bit fixed field `number` holding the double `value`.
std::string with_old_double(const google::protobuf::MessageLite& m, int number, double value);

}  // namespace leapfrog
