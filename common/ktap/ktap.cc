// KTAP v1 lines for jobs (ktap.h).

#include "common/ktap/ktap.h"

#include <sstream>

#include "common/ktap/words.h"

namespace leapfrog::ktap {

namespace {

// Lines the kernel's kunit_parser.py stops at wherever they appear (KTAP_END).
constexpr const char* kStopPhrases[] = {
    "List of all partitions:", "Kernel panic - not syncing: VFS:", "reboot: System halted"};

}  // namespace

Result result_of(v1::Verdict verdict) {
  switch (verdict) {
    case v1::VERDICT_PASS:
      return Result::Pass;
    case v1::VERDICT_VIOLATION:
    case v1::VERDICT_KERNEL_CRASH:
    case v1::VERDICT_BOOT_FAILURE:
      return Result::Fail;
    case v1::VERDICT_HANG:
      return Result::Hang;
    case v1::VERDICT_UNSPECIFIED:
      return Result::Skip;
    case v1::VERDICT_INCONCLUSIVE:
      return Result::Unjudged;
    default:
      return Result::Error;
  }
}

std::string safe_name(const std::string& name) {
  std::string out;
  for (char c : name) out += (c == '#' || c == '\n' || c == '\r') ? '_' : c;
  while (!out.empty() && out.back() == ' ') out.pop_back();
  return out.empty() ? "unnamed" : out;
}

std::string safe_text(const std::string& text) {
  std::string out;
  for (char c : text) out += (c == '\n' || c == '\r' || c == '\0') ? ' ' : c;
  for (const char* phrase : kStopPhrases) {
    const std::string p = phrase;
    for (size_t at; (at = out.find(p)) != std::string::npos;) out[at + p.size() - 1] = '_';
  }
  return out;
}

std::string job_lines(const JobLines& job) {
  const std::string pad(job.indent, ' ');
  std::ostringstream out;
  auto note = [&](const std::string& text) { out << pad << "# " << safe_text(text) << "\n"; };
  const v1::Verdict verdict = job.verdict != v1::VERDICT_UNSPECIFIED
                                  ? job.verdict
                                  : (job.outcome ? job.outcome->verdict() : job.verdict);
  if (job.spec) {
    note("scenario=" + job.spec->scenario() + " fs=" + job.spec->fs() + " seed=" +
         std::to_string(job.spec->seed()) + (job.kernel.empty() ? "" : " kernel=" + job.kernel));
  }
  std::string directive;
  if (job.outcome && verdict != v1::VERDICT_UNSPECIFIED) {
    const v1::Outcome& o = *job.outcome;
    const v1::RaceStrategy& s = o.strategy();
    const std::string alignment = alignment_name(s.alignment());
    note("strategy alignment=" + (alignment.empty() ? "unset" : alignment) + " observers=" +
         std::to_string(s.observers()) + " aligned=" + std::to_string(s.aligned_observers()) +
         " pinned=" + (s.pinned() ? "yes" : "no") +
         (s.widening().empty() ? "" : " widening=" + s.widening()));
    note("verdict=" + verdict_word(verdict) + " ops=" + std::to_string(o.ops()) +
         " lookups_checked=" + std::to_string(o.lookups_checked()) +
         " offsets_checked=" + std::to_string(o.offsets_checked()) +
         " violations=" + std::to_string(o.violation_count()) +
         " race_window_hits=" + std::to_string(o.race_window_hits()));
    for (const auto& [kind, n] : o.violations_by_kind())
      note("violations." + kind + "=" + std::to_string(n));
    int shown = 0;
    for (const auto& v : o.violations()) {
      if (++shown > 5) {
        const int more = o.violations_size() - 5;
        note("... " + std::to_string(more) + (more == 1 ? " more violation" : " more violations"));
        break;
      }
      note("violation " + violation_kind_word(v.kind()) + ": " + v.op() + " " + v.path() +
           " step " + std::to_string(v.step()) + " (" + v.component() + ") observed " +
           v.observed() + ", expected " + v.expected());
    }
    if (!o.error().empty()) note("error: " + o.error());
  } else if (job.verdict != v1::VERDICT_UNSPECIFIED) {
    note("verdict=" + verdict_word(verdict));
  }
  if (!job.why_not.empty() && result_of(verdict) != Result::Skip) note(job.why_not);
  for (const auto& n : job.notes) note(n);
  const std::string name = safe_name(job.name);
  const std::string num = std::to_string(job.number);
  switch (result_of(verdict)) {
    case Result::Pass:
      out << pad << "ok " << num << " " << name << "\n";
      break;
    case Result::Fail:
      out << pad << "not ok " << num << " " << name << "\n";
      break;
    case Result::Hang:
      out << pad << "not ok " << num << " " << name
          << " # TIMEOUT the VM stopped making progress\n";
      break;
    case Result::Error: {
      std::string why =
          job.outcome && !job.outcome->error().empty() ? job.outcome->error() : job.why_not;
      if (why.empty()) why = verdict_word(verdict);
      out << pad << "not ok " << num << " " << name << " # ERROR " << safe_text(why) << "\n";
      break;
    }
    case Result::Skip:
      out << pad << "ok " << num << " " << name << " # SKIP "
          << safe_text(job.why_not.empty() ? "not run" : job.why_not) << "\n";
      break;
    case Result::Unjudged: {
      const std::string why = job.outcome ? job.outcome->error() : "";
      out << pad << "ok " << num << " " << name << " # SKIP inconclusive"
          << (why.empty() ? "" : ": " + safe_text(why)) << "\n";
      break;
    }
  }
  return out.str();
}

std::string run_document(const v1::ScenarioSpec& spec, const std::string& kernel,
                         const v1::Outcome& outcome) {
  JobLines job;
  job.name = "leapfrog." + spec.scenario() + "." + spec.fs();
  job.spec = &spec;
  job.kernel = kernel;
  job.outcome = &outcome;
  return "KTAP version 1\n1..1\n" + job_lines(job);
}

}  // namespace leapfrog::ktap
