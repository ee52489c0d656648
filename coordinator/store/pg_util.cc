// The PostgreSQL stores' codecs that are not inline (pg_util.h).

#include "coordinator/store/pg_util.h"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <google/protobuf/wire_format.h>
#include <zlib.h>

#include "common/outcome/values.h"

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

namespace {

constexpr char kPacked = '\0';  // first byte of a packed value
// Smaller values are kept as they are: deflate's framing would eat the gain.
constexpr size_t kPackFrom = 64;

// Raw deflate with a 4 KB window (no zlib header or checksum: the length and the
// message's parse check it) of `in` into `out`, after what `out` holds.
bool deflate_into(const std::string& in, std::string& out) {
  z_stream z{};
  if (deflateInit2(&z, Z_DEFAULT_COMPRESSION, Z_DEFLATED, -12, 8, Z_DEFAULT_STRATEGY) != Z_OK)
    return false;
  const size_t at = out.size();
  out.resize(at + deflateBound(&z, in.size()));
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  z.avail_in = static_cast<uInt>(in.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data() + at);
  z.avail_out = static_cast<uInt>(out.size() - at);
  const int rc = deflate(&z, Z_FINISH);
  out.resize(at + z.total_out);
  deflateEnd(&z);
  return rc == Z_STREAM_END;
}

}  // namespace

std::string pack_outcome(const std::string& serialized) {
  if (serialized.size() < kPackFrom) return serialized;
  std::string out(1, kPacked);
  {  // the length, as a varint
    google::protobuf::io::StringOutputStream stream(&out);
    google::protobuf::io::CodedOutputStream(&stream).WriteVarint64(serialized.size());
  }
  if (!deflate_into(serialized, out) || out.size() >= serialized.size()) return serialized;
  return out;
}

namespace {

// A row stored before ReportOutcome checked values (an older coordinator)
// may hold one no reader can print: it is cleared, and the outcome says so
// in a note, instead of failing every list and page that holds the row.
v1::Outcome& without_bad_values(v1::Outcome& o) {
  const std::vector<std::string> cleared = outcome::clear_bad_values(o, "outcome");
  if (cleared.empty()) return o;
  std::string note = "stored with values no reader can print, from before the coordinator checked them; cleared:";
  for (const auto& c : cleared) note += " " + c + ";";
  note.pop_back();
  o.mutable_run()->add_notes(note);
  return o;
}

}  // namespace

v1::Outcome parse_outcome(const std::string& stored) {
  v1::Outcome o;
  if (stored.empty() || stored[0] != kPacked) {
    if (!o.ParseFromString(stored)) throw StoreError("a stored outcome does not parse", false);
    return without_bad_values(o);
  }
  uint64_t size = 0;
  google::protobuf::io::CodedInputStream in(reinterpret_cast<const uint8_t*>(stored.data()) + 1,
                                            static_cast<int>(stored.size() - 1));
  const bool have_size = in.ReadVarint64(&size);
  const size_t i = 1 + static_cast<size_t>(in.CurrentPosition());
  if (!have_size || size == 0 || size > (64u << 20))
    throw StoreError("a stored outcome has a bad packed length", false);
  std::string raw(size, '\0');
  z_stream z{};
  if (inflateInit2(&z, -15) != Z_OK) throw StoreError("zlib does not start", false);
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(stored.data() + i));
  z.avail_in = static_cast<uInt>(stored.size() - i);
  z.next_out = reinterpret_cast<Bytef*>(raw.data());
  z.avail_out = static_cast<uInt>(raw.size());
  const int rc = inflate(&z, Z_FINISH);
  const bool whole = rc == Z_STREAM_END && z.total_out == size;
  inflateEnd(&z);
  if (!whole || !o.ParseFromString(raw))
    throw StoreError("a stored outcome does not unpack", false);
  return without_bad_values(o);
}

v1::Outcome parse_outcome(const pqxx::field& f) {
  const pqxx::binarystring b(f);
  return parse_outcome(b.str());
}

int rewrite_outcome_values(
    pqxx::work& txn,
    const std::function<std::optional<std::string>(const std::string& stored)>& rewrite,
    const std::string& scope) {
  int rewritten = 0;
  int64_t after_job = -1;
  int64_t after_attempt = -1;
  for (;;) {
    const auto rows = txn.exec_params(
        "SELECT job_id, attempt, outcome FROM outcomes WHERE (job_id, attempt) > ($1, $2)" +
            (scope.empty() ? std::string() : " AND (" + scope + ")") +
            " ORDER BY job_id, attempt LIMIT 1000",
        after_job, after_attempt);
    if (rows.empty()) return rewritten;
    std::vector<int64_t> jobs, attempts;
    std::vector<std::string> values;
    for (const auto& r : rows) {
      after_job = r[0].as<int64_t>();
      after_attempt = r[1].as<int64_t>();
      const pqxx::binarystring b(r[2]);
      std::optional<std::string> value = rewrite(b.str());
      if (!value) continue;
      jobs.push_back(after_job);
      attempts.push_back(after_attempt);
      values.push_back(hex_encode(*value));
    }
    if (jobs.empty()) continue;
    txn.exec_params(
        "UPDATE outcomes o SET outcome = decode(u.v, 'hex')"
        " FROM unnest($1::bigint[], $2::int[], $3::text[]) AS u(job_id, attempt, v)"
        " WHERE o.job_id = u.job_id AND o.attempt = u.attempt",
        number_array(jobs), number_array(attempts), text_array(values));
    rewritten += static_cast<int>(jobs.size());
  }
}

}  // namespace leapfrog::coord
