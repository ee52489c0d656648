#include "coordinator/http/api_json.h"

#include <cctype>

namespace leapfrog::coord {

namespace {

// "VERDICT_KERNEL_CRASH" with prefix "VERDICT_" -> "kernel-crash".
std::string short_name(const std::string& full, const std::string& prefix) {
  std::string name = full.rfind(prefix, 0) == 0 ? full.substr(prefix.size()) : full;
  for (char& c : name)
    c = c == '_' ? '-' : static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return name;
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
  if (k.status() == v1::KERNEL_STATUS_UNSPECIFIED) k.set_status(v1::KERNEL_STATUS_READY);
  return k;
}

}  // namespace leapfrog::coord
