#pragma once
// The one JSON rendering of the HTTP API: protobuf's JSON mapping of the v1
// messages, printed with the options chosen here and nowhere else, so every
// field has one spelling from the .proto to the browser (docs/api.md).
//
// Options: field names as the .proto spells them (preserve_proto_field_names:
// snake_case, as the CLI, the docs and the SQL say them, not lowerCamelCase),
// and every scalar, repeated and map field printed even when it holds its
// default (always_print_primitive_fields), so a reader never has to know
// proto3's defaults: 0, "", false, [] and {} are there. A message field that
// is unset is absent (the mapping has no null for it). Enums print by name
// ("VERDICT_PASS"), 64-bit integers as strings, Timestamps as RFC 3339 UTC,
// Durations as "1.5s": the mapping's own rules.

#include <google/protobuf/message.h>

#include <nlohmann/json.hpp>
#include <string>

namespace leapfrog::coord {

// `m` as the API's JSON text; the mapping drops bytes of a string field that
// are not UTF-8 (build logs and console tails are bytes), so it always parses.
std::string proto_json_text(const google::protobuf::Message& m);
// `m` as the API's JSON, for handlers that answer nlohmann::json.
nlohmann::json proto_json(const google::protobuf::Message& m);
// Fills `m` from `j` by the same mapping (either field spelling, enum names
// or numbers); throws RequestError (400) saying what did not fit, with `what`
// naming the part of the request.
void proto_from_json(const nlohmann::json& j, google::protobuf::Message& m,
                     const std::string& what);

}  // namespace leapfrog::coord
