#include "coordinator/http/proto_json.h"

#include <google/protobuf/util/json_util.h>

#include "coordinator/http/api.h"

namespace leapfrog::coord {

namespace {

google::protobuf::util::JsonPrintOptions print_options() {
  google::protobuf::util::JsonPrintOptions o;
  o.preserve_proto_field_names = true;
  o.always_print_primitive_fields = true;
  o.always_print_enums_as_ints = false;
  o.add_whitespace = false;
  return o;
}

}  // namespace

std::string proto_json_text(const google::protobuf::Message& m) {
  std::string out;
  const auto status = google::protobuf::util::MessageToJsonString(m, &out, print_options());
  // Only a message the mapping cannot express (an Any of an unknown type)
  // fails, and the API has none: a bug.
  if (!status.ok())
    throw std::logic_error("cannot print " + m.GetTypeName() +
                           " as JSON: " + std::string(status.message()));
  return out;
}

nlohmann::json proto_json(const google::protobuf::Message& m) {
  return nlohmann::json::parse(proto_json_text(m));
}

void proto_from_json(const nlohmann::json& j, google::protobuf::Message& m,
                     const std::string& what) {
  google::protobuf::util::JsonParseOptions o;
  o.ignore_unknown_fields = false;
  const auto status = google::protobuf::util::JsonStringToMessage(j.dump(), &m, o);
  if (!status.ok())
    throw RequestError(ErrorKind::kInvalidArgument,
                       "bad " + what + ": " + std::string(status.message()));
}

}  // namespace leapfrog::coord
