// The PostgreSQL stores' codecs that are not inline (pg_util.h).

#include "coordinator/store/pg_util.h"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <google/protobuf/wire_format.h>

namespace leapfrog::coord {

// The outcome serialized without its violations (they are rows of their
// own), field by field: serializing the whole message to cut them out again
// cost more than the rest of the outcome (it walks every violation twice).
std::string without_violations(const v1::Outcome& o) {
  using google::protobuf::internal::WireFormat;
  std::vector<const google::protobuf::FieldDescriptor*> fields;
  o.GetReflection()->ListFields(o, &fields);
  std::string out;
  {
    google::protobuf::io::StringOutputStream stream(&out);
    google::protobuf::io::CodedOutputStream coded(&stream);
    for (const auto* f : fields) {
      if (f->number() == v1::Outcome::kViolationsFieldNumber) continue;
      WireFormat::FieldByteSize(f, o);  // caches the sizes of nested messages
      WireFormat::SerializeFieldWithCachedSizes(f, o, &coded);
    }
    WireFormat::SerializeUnknownFields(o.GetReflection()->GetUnknownFields(o), &coded);
    if (coded.HadError()) throw StoreError("an outcome does not serialize", false);
  }
  return out;
}

}  // namespace leapfrog::coord
