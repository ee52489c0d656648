#include "coordinator/triage/signature.h"

#include "common/ktap/words.h"
#include "scenarios/model.h"

#include <algorithm>
#include <optional>
#include <regex>

namespace leapfrog::coord::triage {

namespace {

// "mode=0700 uid=0 gid=0 user:65534:r-x" -> its fields.
struct AttrText {
  std::string mode, owner, acl;
};

AttrText split_attr(const std::string& value) {
  AttrText a;
  size_t pos = 0;
  while (pos < value.size()) {
    size_t end = value.find(' ', pos);
    if (end == std::string::npos) end = value.size();
    const std::string field = value.substr(pos, end - pos);
    if (field.rfind("mode=", 0) == 0) {
      a.mode = field;
    } else if (field.rfind("uid=", 0) == 0 || field.rfind("gid=", 0) == 0) {
      a.owner += field + " ";
    } else {
      a.acl += field + " ";
    }
    pos = end + 1;
  }
  return a;
}

using Versions = google::protobuf::RepeatedPtrField<v1::PossibleVersion>;

// A version that began or ended inside the checked window: the oracle stores
// an open bound (the start or the end of the run) as an unset field, or as a
// value at or past kTimeMin / kTimeMax.
bool bounded(const v1::PossibleVersion& v) {
  return (v.has_from_ns() && v.from_ns() > kTimeMin) || (v.has_to_ns() && v.to_ns() < kTimeMax);
}

// What the mutator did to the object, from the object's kind and how its
// possible versions differ.
std::string mutator_op(const std::string& object, const Versions& versions,
                       const std::string& scenario) {
  if (object.rfind("entry(", 0) == 0) return "rename";
  if (object.rfind("parent(", 0) == 0) return "rename";
  if (object.rfind("mount(", 0) == 0) return "mount";
  if (object.rfind("attr(", 0) != 0) return "unknown";
  bool mode = false, owner = false, acl = false;
  std::optional<AttrText> first;
  for (const auto& v : versions) {
    const AttrText a = split_attr(v.value());
    if (!first) {
      first = a;
      continue;
    }
    mode = mode || a.mode != first->mode;
    owner = owner || a.owner != first->owner;
    acl = acl || a.acl != first->acl;
  }
  if (acl) return "setfacl";
  if (owner) return "chown";
  if (mode) return "chmod";
  // One version in the window (the usual stale case): the scenario says
  // which attribute its mutator changes.
  if (scenario.find("chown") != std::string::npos) return "chown";
  if (scenario.find("acl") != std::string::npos) return "setfacl";
  if (scenario.find("setattr") != std::string::npos || scenario.find("chmod") != std::string::npos)
    return "chmod";
  return "setattr";
}

// The attribute a permission error at an entry's step comes from: the first
// step's attr(...) whose versions the mutator changed in the window (a
// version with an end or a start), else "".
std::string changed_attr_op(const v1::ViolationDetail& detail, const std::string& scenario) {
  for (const auto& st : detail.steps()) {
    if (st.object().rfind("attr(", 0) != 0) continue;
    for (const auto& v : st.versions())
      if (bounded(v)) return mutator_op(st.object(), st.versions(), scenario);
  }
  return "";
}

bool permission_error(const std::string& outcome) {
  return outcome.rfind("error EACCES", 0) == 0 || outcome.rfind("error EPERM", 0) == 0;
}

// How the lookup reached the stale step: "..", a symlink, a mount, a held
// dirfd, or plain names.
std::string path_via(const v1::Violation& v) {
  const std::string& path = v.path();
  if (path == ".." || path.rfind("../", 0) == 0 || path.find("/..") != std::string::npos) {
    return "dotdot";
  }
  if (v.object().rfind("parent(", 0) == 0) return "dotdot";
  if (v.object().rfind("mount(", 0) == 0 || v.kind() == v1::VIOLATION_KIND_WRONG_MOUNT)
    return "mount";
  size_t components = path.empty() ? 0 : 1;
  for (char c : path) components += c == '/';
  // The walk's trace lists each step's objects (its directory's attributes,
  // the entry); a step number past the path's names means a link was followed.
  int64_t steps = 0;
  for (const auto& st : v.detail().steps()) steps = std::max<int64_t>(steps, st.step());
  if (steps > static_cast<int64_t>(components)) return "symlink";
  // The catalogue names lookups from a held dirfd after their *at syscall.
  static const char* const kAtOps[] = {"fstatat", "faccessat", "openat", "readlinkat"};
  for (const char* op : kAtOps)
    if (v.op() == op) return "dirfd";
  return "names";
}

}  // namespace

Signature violation_signature(const std::string& scenario, const v1::Violation& v) {
  // Read from the typed detail (a violation without one has no versions and
  // no steps); its history excerpt plays no part.
  const v1::ViolationDetail& detail = v.detail();
  std::string mop = mutator_op(v.object(), detail.versions(), scenario);
  // A lookup refused (or let through) at an entry's step by a directory's
  // attributes: the mutator changed those, not the entry.
  if (mop == "rename" && (permission_error(v.observed()) || permission_error(v.expected()))) {
    const std::string attr = changed_attr_op(detail, scenario);
    if (!attr.empty()) mop = attr;
  }
  const std::string via = path_via(v);
  const std::string pair = v.op() + "/" + mop;
  Signature s;
  s.kind = "violation";
  s.scenario = scenario;
  const std::string kind = ktap::violation_kind_word(v.kind());
  s.key = "violation|" + scenario + "|" + kind + "|" + pair + "|step=" + std::to_string(v.step()) +
          "|via=" + via;
  // An escape's step is where the walk was last beneath its root.
  const char* where =
      v.kind() == v1::VIOLATION_KIND_ESCAPE ? ", out of the root after step " : ", stale at step ";
  s.title = kind + " in " + scenario + ": " + v.op() + " raced " + mop + where +
            std::to_string(v.step()) + " (via " + via + ")";
  return s;
}

std::string normalize_crash_title(const std::string& title) {
  std::string t = title.substr(0, title.find('\n'));
  static const std::regex timestamp(R"(^\s*\[\s*[0-9]+\.[0-9]+\]\s*)");
  static const std::regex offset(R"(\+0x[0-9a-fA-F]+/0x[0-9a-fA-F]+)");
  static const std::regex hex(R"(\b(0x)?[0-9a-fA-F]{8,}\b)");
  static const std::regex pid(R"(\b(PID|pid|CPU|cpu):?\s*[0-9]+)");
  static const std::regex task(R"(task [^ ]+:[0-9]+)");
  static const std::regex space(R"(\s+)");
  t = std::regex_replace(t, timestamp, "");
  t = std::regex_replace(t, offset, "");
  t = std::regex_replace(t, hex, "ADDR");
  t = std::regex_replace(t, pid, "$1");
  t = std::regex_replace(t, task, "task");
  t = std::regex_replace(t, space, " ");
  while (!t.empty() && t.back() == ' ') t.pop_back();
  while (!t.empty() && t.front() == ' ') t.erase(0, 1);
  return t.empty() ? "unknown" : t;
}

std::vector<Signature> outcome_signatures(const v1::ScenarioSpec& spec, const v1::Outcome& o) {
  std::vector<Signature> out;
  auto add = [&out](Signature s) {
    for (const auto& have : out)
      if (have.key == s.key) return;
    out.push_back(std::move(s));
  };
  switch (o.verdict()) {
    case v1::VERDICT_VIOLATION: {
      for (int i = 0; i < o.violations_size(); ++i) {
        Signature s = violation_signature(spec.scenario(), o.violations(i));
        s.violation_index = i;
        add(std::move(s));
      }
      if (out.empty()) {  // every report capped away: the kinds are all we know
        for (const auto& [kind, n] : o.violations_by_kind()) {
          if (n == 0) continue;
          Signature s;
          s.kind = "violation";
          s.scenario = spec.scenario();
          s.key = "violation|" + spec.scenario() + "|" + kind + "|?";
          s.title = kind + " in " + spec.scenario() + " (no report kept)";
          add(std::move(s));
        }
      }
      break;
    }
    case v1::VERDICT_KERNEL_CRASH:
    case v1::VERDICT_HANG: {
      const bool crash = o.verdict() == v1::VERDICT_KERNEL_CRASH;
      const std::string raw = !o.error().empty() ? o.error() : o.console_tail();
      Signature s;
      s.kind = crash ? "crash" : "hang";
      s.title = normalize_crash_title(raw);
      s.key = s.kind + "|" + s.title;
      add(std::move(s));
      break;
    }
    case v1::VERDICT_BOOT_FAILURE: {
      Signature s;
      s.kind = "boot-failure";
      s.title = "kernel did not boot";
      s.key = "boot-failure";
      add(std::move(s));
      break;
    }
    default:
      break;
  }
  return out;
}

bool outcome_has_signature(const v1::ScenarioSpec& spec, const v1::Outcome& o,
                           const std::string& key) {
  for (const auto& s : outcome_signatures(spec, o))
    if (s.key == key) return true;
  return false;
}

}  // namespace leapfrog::coord::triage
