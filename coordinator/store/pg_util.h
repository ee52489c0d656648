#pragma once
// Small helpers the PgStore files share: cleaning text for PostgreSQL, array
// literals (libpqxx 6 binds no arrays), and the names stored rows use.

#include <algorithm>
#include <cctype>
#include <pqxx/pqxx>
#include <string>
#include <vector>

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
