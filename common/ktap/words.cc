#include "common/ktap/words.h"

#include <cctype>
#include <utility>

namespace leapfrog::ktap {

std::string verdict_word(v1::Verdict v) {
  std::string n = v1::Verdict_Name(v);
  if (n.rfind("VERDICT_", 0) == 0) n = n.substr(8);
  for (char& c : n) c = c == '_' ? '-' : static_cast<char>(std::tolower(c));
  return n;
}

std::string alignment_name(v1::Alignment a) {
  switch (a) {
    case v1::ALIGNMENT_FUZZY:
      return "fuzzy";
    case v1::ALIGNMENT_FREE:
      return "free";
    case v1::ALIGNMENT_BOTH:
      return "both";
    default:
      return "";
  }
}

namespace {

// The one table of kinds and their words.
constexpr std::pair<v1::ViolationKind, const char*> kKindWords[] = {
    {v1::VIOLATION_KIND_STALE_GRANT, "stale-grant"},
    {v1::VIOLATION_KIND_STALE_DENY, "stale-deny"},
    {v1::VIOLATION_KIND_STALE_ENTRY, "stale-entry"},
    {v1::VIOLATION_KIND_WRONG_MOUNT, "wrong-mount"},
    {v1::VIOLATION_KIND_ESCAPE, "escape"},
    {v1::VIOLATION_KIND_TORN_OFFSET, "torn-offset"},
};

constexpr std::pair<v1::IssueKind, const char*> kIssueKindWords[] = {
    {v1::ISSUE_KIND_VIOLATION, "violation"},
    {v1::ISSUE_KIND_CRASH, "crash"},
    {v1::ISSUE_KIND_HANG, "hang"},
    {v1::ISSUE_KIND_BOOT_FAILURE, "boot-failure"},
};

constexpr std::pair<v1::BisectStepVerdict, const char*> kBisectStepWords[] = {
    {v1::BISECT_STEP_BAD, "bad"},
    {v1::BISECT_STEP_GOOD, "good"},
    {v1::BISECT_STEP_SKIPPED, "skipped"},
    {v1::BISECT_STEP_MEASURE, "measure"},
};

}  // namespace

std::string violation_kind_word(v1::ViolationKind k) {
  for (const auto& [kind, word] : kKindWords)
    if (kind == k) return word;
  return "";
}

v1::ViolationKind violation_kind_from(const std::string& word) {
  for (const auto& [kind, w] : kKindWords)
    if (word == w) return kind;
  return v1::VIOLATION_KIND_UNSPECIFIED;
}

std::string issue_kind_word(v1::IssueKind k) {
  for (const auto& [kind, word] : kIssueKindWords)
    if (kind == k) return word;
  return "";
}

v1::IssueKind issue_kind_from(const std::string& text) {
  for (const auto& [kind, word] : kIssueKindWords)
    if (text == word || text == v1::IssueKind_Name(kind)) return kind;
  return v1::ISSUE_KIND_UNSPECIFIED;
}

std::string kernel_status_word(v1::KernelStatus s) {
  return s == v1::KERNEL_STATUS_BUILD_FAILURE ? "build-failure" : "ready";
}

v1::KernelStatus kernel_status_from(const std::string& text) {
  if (text == "ready" || text == "KERNEL_STATUS_READY") return v1::KERNEL_STATUS_READY;
  if (text == "build-failure" || text == "KERNEL_STATUS_BUILD_FAILURE")
    return v1::KERNEL_STATUS_BUILD_FAILURE;
  return v1::KERNEL_STATUS_UNSPECIFIED;
}

std::string bisect_step_word(v1::BisectStepVerdict v) {
  for (const auto& [verdict, word] : kBisectStepWords)
    if (verdict == v) return word;
  return "";
}

v1::BisectStepVerdict bisect_step_from(const std::string& word) {
  for (const auto& [verdict, w] : kBisectStepWords)
    if (word == w) return verdict;
  return v1::BISECT_STEP_UNSPECIFIED;
}

}  // namespace leapfrog::ktap
