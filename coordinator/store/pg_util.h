#pragma once
// Small helpers and codecs the PostgreSQL stores share (PgStore, the triage
// and notify stores, the bench): cleaning text for PostgreSQL, times as
// microseconds, proto messages as bytea, array literals (libpqxx 6 binds no
// arrays), and the names stored rows use.

#include <google/protobuf/message_lite.h>
#include <google/protobuf/timestamp.pb.h>

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <functional>
#include <optional>
#include <pqxx/pqxx>
#include <string>
#include <vector>

#include "common/hex.h"
#include "coordinator/clock.h"
#include "coordinator/store/store.h"
#include "leapfrog/v1/control.pb.h"

namespace leapfrog::coord {

// PostgreSQL text cannot hold NUL bytes; agents' strings should not either.
inline std::string clean(const std::string& s) {
  if (s.find('\0') == std::string::npos) return s;
  std::string out = s;
  out.erase(std::remove(out.begin(), out.end(), '\0'), out.end());
  return out;
}

// A time as it crosses the wire: microseconds since the epoch (lf_ts and
// lf_us convert in SQL).
inline int64_t us(TimePoint t) {
  return t.time_since_epoch().count();
}

// `us` microseconds since the epoch into `ts` (rounding down before 1970 too).
inline void set_timestamp(google::protobuf::Timestamp* ts, int64_t us) {
  int64_t seconds = us / 1000000;
  int64_t rest = us % 1000000;
  if (rest < 0) {
    seconds -= 1;
    rest += 1000000;
  }
  ts->set_seconds(seconds);
  ts->set_nanos(static_cast<int32_t>(rest * 1000));
}

inline google::protobuf::Timestamp proto_timestamp(int64_t us) {
  google::protobuf::Timestamp ts;
  set_timestamp(&ts, us);
  return ts;
}

// A proto message as a bytea parameter.
inline pqxx::binarystring bytes(const google::protobuf::MessageLite& m) {
  return pqxx::binarystring(m.SerializeAsString());
}

// A proto message as a bytea in COPY text format (the stream escapes the
// backslash once more).
inline std::string bytea_text(const google::protobuf::MessageLite& m) {
  return "\\x" + hex_encode(m.SerializeAsString());
}

// The outcome serialized without its violations (they are rows of their
// own; pg_util.cc).
std::string without_violations(const v1::Outcome& o);

// The stored form of an outcome value (outcomes.outcome): `serialized` (a
// v1.Outcome without its violations) deflated behind a 0x00 byte and its
// length (a varint) when that is smaller, else `serialized` as is. No
// serialized message starts with 0x00 (there is no field 0), so both forms
// read back through parse_outcome. PostgreSQL compresses a value only in a
// row over 2 KB, and an outcome row is about 600 bytes (docs/bench.md).
std::string pack_outcome(const std::string& serialized);
// An outcomes.outcome value, packed or not, as the message; StoreError if it
// does not unpack or parse.
v1::Outcome parse_outcome(const std::string& stored);
// For migrations: rewrites every stored outcome value, a page of 1,000 rows
// at a time by key (at 10⁷ outcomes the values do not fit in memory at once).
// `rewrite` gets a value as stored and returns its replacement, or nullopt
// to leave it. `scope`, if not empty, is an SQL condition on the outcomes
// row that limits the values read. Returns how many values it replaced.
int rewrite_outcome_values(
    pqxx::work& txn,
    const std::function<std::optional<std::string>(const std::string& stored)>& rewrite,
    const std::string& scope = "");
v1::Outcome parse_outcome(const pqxx::field& f);

// A counter column (or a sum of one) as a count: 0 for a negative value,
// which only a row stored before ReportOutcome bounded counters holds
// (2^64-1 went in as -1). Read as unsigned, it failed every list with it.
inline uint64_t count_of(const pqxx::field& f) {
  const int64_t v = f.as<int64_t>();
  return v < 0 ? 0 : static_cast<uint64_t>(v);
}

// A proto message stored as bytea; StoreError naming `what` if it does not parse.
template <class M>
M parse(const pqxx::field& f, const char* what) {
  pqxx::binarystring b(f);
  M m;
  if (!m.ParseFromArray(b.data(), static_cast<int>(b.size())))
    throw StoreError(std::string("a stored ") + what + " does not parse", false);
  return m;
}

// '{"a","b"}': a text[] literal, each element quoted.
template <class Strings>
inline std::string text_array(const Strings& items) {
  std::string out = "{";
  for (const auto& item : items) {
    if (out.size() > 1) out += ',';
    out += '"';
    for (char c : clean(item)) {
      if (c == '"' || c == '\\') out += '\\';
      out += c;
    }
    out += '"';
  }
  return out + "}";
}

template <class T>
inline std::string number_array(const std::vector<T>& items) {
  std::string out = "{";
  for (const auto& v : items) {
    if (out.size() > 1) out += ',';
    out += std::to_string(v);
  }
  return out + "}";
}

inline std::string bool_array(const std::vector<bool>& items) {
  std::string out = "{";
  for (bool v : items) {
    if (out.size() > 1) out += ',';
    out += v ? 't' : 'f';
  }
  return out + "}";
}

// "pass", "violation", "infra-failure", ...
inline std::string verdict_key(int verdict) {
  std::string name = v1::Verdict_IsValid(verdict)
                         ? v1::Verdict_Name(static_cast<v1::Verdict>(verdict))
                         : "VERDICT_" + std::to_string(verdict);
  name = name.substr(std::string("VERDICT_").size());
  for (char& c : name) c = c == '_' ? '-' : static_cast<char>(std::tolower(c));
  return name;
}

// A jobs.state as its enum.
inline v1::JobState job_state(const std::string& s) {
  if (s == "queued") return v1::JOB_STATE_QUEUED;
  if (s == "leased") return v1::JOB_STATE_LEASED;
  if (s == "done") return v1::JOB_STATE_DONE;
  if (s == "waiting") return v1::JOB_STATE_WAITING;
  return v1::JOB_STATE_UNSPECIFIED;
}

}  // namespace leapfrog::coord
