#include "coordinator/triage/issue_report.h"

#include <openssl/evp.h>

#include <algorithm>
#include <cstdio>
#include <ctime>
#include <functional>
#include <map>

#include "common/ktap/words.h"
#include "coordinator/triage/repro_c.h"

namespace leapfrog::coord::triage {

namespace {

std::string when(const google::protobuf::Timestamp& ts) {
  if (ts.seconds() == 0) return "-";
  const time_t t = ts.seconds();
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S UTC", std::gmtime(&t));
  return buf;
}

std::string percent(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.0f%%", v * 100);
  return buf;
}

// 5400000 -> "5,400,000"
std::string grouped(uint64_t n) {
  std::string s = std::to_string(n), out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (i && (s.size() - i) % 3 == 0) out += ',';
    out += s[i];
  }
  return out;
}

std::string window(const v1::PossibleVersion& v) {
  auto at = [](bool has, int64_t ns) { return has ? std::to_string(ns) : std::string("-"); };
  return "[" + at(v.has_from_ns(), v.from_ns()) + ", " + at(v.has_to_ns(), v.to_ns()) + "]";
}

const v1::Kernel* kernel_of(const IssueReportInput& in, const std::string& label) {
  for (const auto& k : in.kernels)
    if (k.label() == label) return &k;
  return nullptr;
}

// One line on what a kernel is: release, and what it was built from.
std::string kernel_line(const IssueReportInput& in, const std::string& label) {
  const v1::Kernel* k = kernel_of(in, label);
  if (!k) return label;
  std::string s = label;
  const std::string release = !k->release().empty() ? k->release() : k->version();
  if (!release.empty()) s += " (" + release + ")";
  if (!k->source().empty()) s += ", " + k->source();
  if (!k->cmdline().empty()) s += ", booted with \"" + k->cmdline() + "\"";
  return s;
}

// The sections of the report, shared by both forms: `h` makes a heading,
// `code` a block of code or text kept as it is.
struct Style {
  std::function<std::string(const std::string&)> heading;
  std::function<std::string(const std::string&, const std::string&)> code;
  std::string bullet;
};

// `repro` is report_reproducer's answer (`why` when it is empty), made once
// by the caller: the mail attaches the same text.
std::string body(const IssueReportInput& in, const Style& st, bool inline_repro, const std::string& repro,
                 const std::string& why) {
  const v1::Issue& i = in.issue;
  std::string out;
  out += "Signature: " + i.signature() + "\n";
  out += "Kind: " + ktap::issue_kind_word(i.kind());
  if (i.kind() == v1::ISSUE_KIND_VIOLATION && i.has_example_violation())
    out += " (" + ktap::violation_kind_word(i.example_violation().kind()) + ")";
  out += "\nScenario: " + i.scenario() + "\n";
  out += "Seen: " + std::to_string(i.count()) + " failed runs, first " + when(i.first_seen()) +
         ", last " + when(i.last_seen()) + "\n";
  if (!in.link.empty()) out += "Page: " + in.link + "\n";

  // Where it reproduces: the measured rates first, then kernels it failed on.
  out += "\n" + st.heading("Kernels that reproduce it");
  std::map<std::string, bool> listed;
  for (const auto& r : i.rates()) {
    if (r.reproduced() == 0) continue;
    listed[r.kernel_label()] = true;
    out += st.bullet + kernel_line(in, r.kernel_label()) + ": reproduced in " +
           std::to_string(r.reproduced()) + " of " + std::to_string(r.runs()) + " runs, rate " +
           percent(r.rate()) + " (95% interval " + percent(r.lower()) + " to " + percent(r.upper()) +
           ")\n";
  }
  for (const auto& k : i.kernels()) {
    if (listed[k.kernel_label()]) continue;
    listed[k.kernel_label()] = true;
    out += st.bullet + kernel_line(in, k.kernel_label()) + ": failed " + std::to_string(k.count()) +
           " times (rate not measured: `leapfrog replay " + std::to_string(i.id()) + "` measures it)\n";
  }
  for (const auto& [label, yes] : listed) {
    const v1::Kernel* k = kernel_of(in, label);
    if (!k || k->patches().empty()) continue;
    out += "\n  Patch series of " + label + ":\n";
    for (const auto& p : k->patches())
      out += "    " + p.name() + " (" + p.sha256().substr(0, 12) + ")" +
             (p.subject().empty() ? "" : ": " + p.subject()) + "\n";
  }

  out += "\n" + st.heading("Kernels that stayed clean");
  bool any_clean = false;
  std::map<std::string, const v1::ReproRate*> clean_rates;
  for (const auto& r : i.rates())
    if (r.reproduced() == 0 && !listed.count(r.kernel_label())) clean_rates[r.kernel_label()] = &r;
  auto rate_words = [&](const v1::ReproRate& r) {
    return "a replay reproduced it in 0 of " + std::to_string(r.runs()) + " runs (95% interval up to " +
           percent(r.upper()) + ")";
  };
  for (const auto& c : in.clean) {
    if (listed.count(c.kernel_label) || c.runs == 0) continue;
    any_clean = true;
    out += st.bullet + kernel_line(in, c.kernel_label) + ": " + grouped(c.runs) + " clean runs of " +
           i.scenario() + ", " + grouped(c.lookups) + " lookups judged, no violation";
    if (auto it = clean_rates.find(c.kernel_label); it != clean_rates.end()) {
      out += "; " + rate_words(*it->second);
      clean_rates.erase(it);
    }
    out += "\n";
  }
  for (const auto& [label, r] : clean_rates) {
    any_clean = true;
    out += st.bullet + kernel_line(in, label) + ": " + rate_words(*r) + "\n";
  }
  if (!any_clean) out += "(none recorded)\n";

  if (i.has_example_violation()) {
    const v1::Violation& v = i.example_violation();
    out += "\n" + st.heading("What the oracle saw");
    out += "Actor " + std::to_string(v.actor()) + " ran " + v.op() + "(\"" + v.path() + "\") in the window [" +
           std::to_string(v.invoke_ns()) + ", " + std::to_string(v.complete_ns()) +
           "] ns, and it returned: " + v.observed() + ".\n";
    if (v.step() > 0)
      out += "At step " + std::to_string(v.step()) + " of the walk (component \"" + v.component() +
             "\", object " + v.object() + "), ";
    else
      out += "For the whole operation, ";
    out += "what the versions in that window allow is: " + v.expected() + ".\n";
    const auto& d = v.detail();
    if (!d.versions().empty()) {
      out += "The versions of " + v.object() + " possible in the window (from, to in ns; - is open):\n";
      for (const auto& pv : d.versions()) out += "  " + pv.value() + " " + window(pv) + "\n";
    }
    if (!d.steps().empty()) {
      out += "The walk, step by step, with the versions each step could have seen:\n";
      for (const auto& s : d.steps()) {
        out += "  step " + std::to_string(s.step()) + " \"" + s.component() + "\" " + s.object() + ":";
        for (int k = 0; k < s.versions_size(); ++k)
          out += std::string(k ? ";" : "") + " " + s.versions(k).value() + " " + window(s.versions(k));
        out += "\n";
      }
    }
    out += "No order of the operations consistent with their windows explains \"" + v.observed() +
           "\"";
    if (d.epsilon_ns() > 0) out += " (windows widened by " + std::to_string(d.epsilon_ns()) + " ns)";
    out += ".\n";
    if (!d.history().empty()) {
      out += "\n" + st.heading("History excerpt");
      std::string text = "The mutations nearest the window (actor, op, object, value, [invoke, complete] ns):\n";
      std::string rows;
      for (const auto& m : d.history())
        rows += "actor " + std::to_string(m.actor()) + " " + m.op() + " " + m.object() + " = " + m.value() +
                " [" + std::to_string(m.invoke_ns()) + ", " + std::to_string(m.complete_ns()) + "]" +
                (m.err() ? " err " + std::to_string(m.err()) : "") + "\n";
      out += text + st.code("", rows);
    }
  }
  if (!in.console_tail.empty()) {
    out += "\n" + st.heading("Console");
    out += st.code("", in.console_tail);
  }

  out += "\n" + st.heading("Reproducer");
  if (repro.empty()) {
    out += "No C reproducer: " + why + "\n";
  } else {
    out += std::string(inline_repro ? "The reproducer below" : "The attached repro.c") +
           " needs only libc. Build it with `cc -O2 -o repro repro.c` and run it as root on the kernel "
           "under test, with a scratch folder on the file system to test (and, for a FUSE two-view "
           "setup, the folder to look up through). It races the mutation against the lookup and prints "
           "\"FAIL <what>\" when a lookup contradicts the state current for its whole window, \"PASS\" "
           "when it judged enough lookups without one, or \"INCONCLUSIVE\" (exit 3).\n";
    if (inline_repro) out += st.code("c", repro);
  }
  return out;
}

std::string base64_lines(const std::string& bytes) {
  std::string out;
  for (size_t at = 0; at < bytes.size(); at += 57) {  // 57 bytes: 76 characters a line
    const size_t n = std::min<size_t>(57, bytes.size() - at);
    unsigned char buf[80];
    const int len = EVP_EncodeBlock(buf, reinterpret_cast<const unsigned char*>(bytes.data() + at),
                                    static_cast<int>(n));
    out.append(reinterpret_cast<const char*>(buf), static_cast<size_t>(len));
    out += "\r\n";
  }
  return out;
}

// A header value on one line: control bytes become spaces.
std::string header_value(std::string s) {
  for (auto& c : s)
    if (static_cast<unsigned char>(c) < 0x20) c = ' ';
  return s;
}

}  // namespace

void add_outcome(IssueReportInput& in, const v1::OutcomeRecord& o) {
  if (o.job_id() == in.issue.example_job_id() && o.attempt() == in.issue.example_attempt())
    in.console_tail = o.outcome().console_tail();
  if (o.outcome().verdict() != v1::VERDICT_PASS) return;
  auto it = std::find_if(in.clean.begin(), in.clean.end(),
                         [&](const CleanRuns& c) { return c.kernel_label == o.kernel_label(); });
  if (it == in.clean.end()) {
    in.clean.push_back(CleanRuns{o.kernel_label(), 0, 0});
    it = in.clean.end() - 1;
  }
  ++it->runs;
  it->lookups += o.outcome().lookups_checked() + o.outcome().offsets_checked();
}

std::string issue_page_link(std::string base, int64_t id) {
  while (!base.empty() && base.back() == '/') base.pop_back();
  return base + "/#/issues/" + std::to_string(id);
}

std::string report_reproducer(const v1::Issue& issue, std::string* why) {
  // The latest finished minimize's: actions come most recent first.
  for (const auto& a : issue.actions())
    if (a.kind() == v1::ACTION_KIND_MINIMIZE && a.state() == v1::ACTION_STATE_DONE &&
        !a.minimize().c_reproducer().empty())
      return a.minimize().c_reproducer();
  if (issue.kind() != v1::ISSUE_KIND_VIOLATION) {
    if (why) *why = "the issue is a " + ktap::issue_kind_word(issue.kind()) + ", not a violation";
    return "";
  }
  try {
    return c_reproducer(issue.example_spec(), issue.example_violation());
  } catch (const ReproError& e) {
    if (why) *why = e.what();
    return "";
  }
}

std::string issue_report_markdown(const IssueReportInput& in) {
  Style st;
  st.heading = [](const std::string& h) { return "## " + h + "\n\n"; };
  st.code = [](const std::string& lang, const std::string& text) {
    return "```" + lang + "\n" + text + (text.empty() || text.back() == '\n' ? "" : "\n") + "```\n";
  };
  st.bullet = "- ";
  std::string why;
  const std::string repro = report_reproducer(in.issue, &why);
  return "# " + in.issue.title() + "\n\n" + body(in, st, true, repro, why);
}

std::string issue_report_mail(const IssueReportInput& in, const MailOptions& opts) {
  Style st;
  st.heading = [](const std::string& h) { return h + "\n" + std::string(h.size(), '-') + "\n"; };
  st.code = [](const std::string&, const std::string& text) {
    std::string out;
    size_t at = 0;
    while (at < text.size()) {
      const size_t nl = std::min(text.find('\n', at), text.size());
      out += "    " + text.substr(at, nl - at) + "\n";
      at = nl + 1;
    }
    return out;
  };
  st.bullet = "  ";
  std::string why;
  const std::string repro = report_reproducer(in.issue, &why);
  const std::string text = in.issue.title() + "\n\n" + body(in, st, false, repro, why);
  std::string date = opts.date;
  if (date.empty()) {
    const time_t now = std::time(nullptr);
    char buf[64];
    std::strftime(buf, sizeof buf, "%a, %d %b %Y %H:%M:%S +0000", std::gmtime(&now));
    date = buf;
  }
  const std::string boundary =
      !opts.boundary.empty() ? opts.boundary
                             : "leapfrog-" + std::to_string(in.issue.id()) + "-" +
                                   std::to_string(std::hash<std::string>{}(text + repro));
  std::string m;
  m += "From: " + header_value(opts.from) + "\r\n";
  if (!opts.to.empty()) m += "To: " + header_value(opts.to) + "\r\n";
  m += "Subject: [leapfrog] " + header_value(in.issue.title()) + "\r\n";
  m += "Date: " + date + "\r\n";
  m += "MIME-Version: 1.0\r\n";
  m += "Content-Type: multipart/mixed; boundary=\"" + boundary + "\"\r\n\r\n";
  m += "This is a multi-part message in MIME format.\r\n";
  m += "--" + boundary + "\r\n";
  m += "Content-Type: text/plain; charset=utf-8\r\n";
  m += "Content-Transfer-Encoding: base64\r\n\r\n";
  m += base64_lines(text);
  if (!repro.empty()) {
    m += "--" + boundary + "\r\n";
    m += "Content-Type: text/x-csrc; charset=utf-8; name=\"repro.c\"\r\n";
    m += "Content-Disposition: attachment; filename=\"repro.c\"\r\n";
    m += "Content-Transfer-Encoding: base64\r\n\r\n";
    m += base64_lines(repro);
  }
  m += "--" + boundary + "--\r\n";
  return m;
}

}  // namespace leapfrog::coord::triage
