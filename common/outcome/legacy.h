#pragma once
// The one reader of the shape outcomes had before every part was typed: an
// Outcome's JSON (old field 14, outcome_json) and a Violation's string kind
// (old field 1) and JSON detail (old field 12, detail_json; the violations
// table's `detail` text). Those fields are reserved now, so an old value
// parses with them as unknown fields; these functions turn them into the
// typed fields. The store's migration 18 runs them over what it holds
// (coordinator/store/pg_legacy.h), so no other reader knows the old shape.

#include <optional>
#include <string>

#include "leapfrog/v1/common.pb.h"

namespace leapfrog {

// Sets o.run and o.scale from the old outcome JSON when they are unset (as
// the readers of that JSON did: run_detail_from_json, scale_run_from_json),
// and drops the JSON. Returns true if `o` carried it.
bool upgrade_legacy(v1::Outcome& o);

// Sets v.kind from the old string kind and v.detail from the old detail JSON
// when they are unset, and drops both. Returns true if `v` carried either.
bool upgrade_legacy(v1::Violation& v);

// An old detail JSON (a violation object as scenarios' to_json(Violation)
// writes it) as the typed detail; nullopt when it is not a JSON object or a
// field has the wrong type.
std::optional<v1::ViolationDetail> legacy_detail(const std::string& json_text);

// `m` serialized with a length-delimited field `number` holding `text`
// appended, as an old agent or store wrote one of the fields above: for the
// tests of the conversion.
std::string with_old_field(const google::protobuf::MessageLite& m, int number,
                           const std::string& text);

}  // namespace leapfrog
