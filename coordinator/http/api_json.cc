#include "coordinator/http/api_json.h"

#include <algorithm>
#include <cctype>

#include "common/proto_time.h"
#include "coordinator/http/api.h"

namespace leapfrog::coord {

using nlohmann::json;

namespace {

// "VERDICT_KERNEL_CRASH" with prefix "VERDICT_" -> "kernel-crash".
std::string short_name(const std::string& full, const std::string& prefix) {
  std::string name = full.rfind(prefix, 0) == 0 ? full.substr(prefix.size()) : full;
  for (char& c : name)
    c = c == '_' ? '-' : static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return name;
}

const json* field(const json& j, const std::string& key) {
  auto it = j.find(key);
  return it == j.end() || it->is_null() ? nullptr : &*it;
}

std::vector<std::string> string_list(const json& j, const std::string& key) {
  std::vector<std::string> out;
  const json* f = field(j, key);
  if (!f) return out;
  if (!f->is_array())
    throw RequestError(ErrorKind::kInvalidArgument, "\"" + key + "\" must be a list of strings");
  for (const auto& item : *f) {
    if (!item.is_string())
      throw RequestError(ErrorKind::kInvalidArgument, "\"" + key + "\" must be a list of strings");
    out.push_back(item.get<std::string>());
  }
  return out;
}

uint64_t unsigned_field(const json& j, const std::string& key) {
  const json* f = field(j, key);
  if (!f) return 0;
  if (!f->is_number_unsigned() && !(f->is_number_integer() && f->get<int64_t>() >= 0))
    throw RequestError(ErrorKind::kInvalidArgument,
                       "\"" + key + "\" must be a non-negative integer");
  return f->get<uint64_t>();
}

}  // namespace

std::string verdict_name(v1::Verdict v) {
  if (v == v1::VERDICT_UNSPECIFIED) return "";
  return short_name(v1::Verdict_Name(v), "VERDICT_");
}

std::string job_state_name(v1::JobState s) {
  return short_name(v1::JobState_Name(s), "JOB_STATE_");
}

v1::Kernel shown(v1::Kernel k) {
  if (k.status().empty()) k.set_status("ready");
  return k;
}

v1::CampaignSpec campaign_spec_from_json(const json& j) {
  if (!j.is_object())
    throw RequestError(ErrorKind::kInvalidArgument, "\"campaign\" must be an object");
  v1::CampaignSpec s;
  if (const json* f = field(j, "name")) {
    if (!f->is_string())
      throw RequestError(ErrorKind::kInvalidArgument, "\"name\" must be a string");
    s.set_name(f->get<std::string>());
  }
  for (auto& v : string_list(j, "scenarios")) s.add_scenarios(v);
  for (auto& v : string_list(j, "kernels")) s.add_kernels(v);
  for (auto& v : string_list(j, "filesystems")) s.add_filesystems(v);
  s.set_seeds(static_cast<uint32_t>(unsigned_field(j, "seeds")));
  s.set_first_seed(unsigned_field(j, "first_seed"));
  s.set_iterations(unsigned_field(j, "iterations"));
  s.set_observers(static_cast<uint32_t>(unsigned_field(j, "observers")));
  s.set_max_attempts(static_cast<uint32_t>(unsigned_field(j, "max_attempts")));
  if (const json* f = field(j, "align")) {
    if (!f->is_string())
      throw RequestError(ErrorKind::kInvalidArgument, "\"align\" must be a string");
    const std::string a = f->get<std::string>();
    s.set_align(a == "seed" ? "" : a);  // checked with the rest of the spec
  }
  if (const json* f = field(j, "pin")) {
    const std::string p = f->is_string() ? f->get<std::string>() : "";
    if (p == "on")
      s.set_pin(v1::CPU_PINNING_ON);
    else if (p == "off")
      s.set_pin(v1::CPU_PINNING_OFF);
    else if (p != "seed" && p != "")
      throw RequestError(ErrorKind::kInvalidArgument,
                         "\"pin\" must be \"on\", \"off\" or \"seed\"");
  }
  if (const json* f = field(j, "duration_s")) {
    // Past int64's range the conversion below is undefined (found by
    // fuzz/http_request_fuzz.cc); normalize() refuses past 3600 s anyway.
    if (!f->is_number() || f->get<double>() < 0 || f->get<double>() > 1e9)
      throw RequestError(ErrorKind::kInvalidArgument,
                         "\"duration_s\" must be a non-negative number of seconds, at most 3600");
    const double secs = f->get<double>();
    s.mutable_duration()->set_seconds(static_cast<int64_t>(secs));
    s.mutable_duration()->set_nanos(
        static_cast<int32_t>((secs - static_cast<double>(static_cast<int64_t>(secs))) * 1e9));
  }
  if (const json* f = field(j, "params")) {
    if (!f->is_object())
      throw RequestError(ErrorKind::kInvalidArgument, "\"params\" must be an object of integers");
    for (const auto& [k, v] : f->items()) {
      if (!v.is_number_integer())
        throw RequestError(ErrorKind::kInvalidArgument,
                           "parameter \"" + k + "\" must be an integer");
      (*s.mutable_params())[k] = v.get<int64_t>();
    }
  }
  return s;
}

}  // namespace leapfrog::coord
