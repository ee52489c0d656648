// JUnit XML (junit.h).

#include "coordinator/export/junit.h"

#include <cstdio>
#include <sstream>

#include "common/ktap/ktap.h"
#include "common/ktap/words.h"
#include "common/proto_time.h"

namespace leapfrog::coord::exports {

using ktap::verdict_word;

namespace {

// Console lines kept in <system-out>.
constexpr size_t kConsoleCap = 64 * 1024;

std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f", v);
  return buf;
}

}  // namespace

std::string xml_escape(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (unsigned char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&apos;";
        break;
      default:
        if (c < 0x20 && c != '\t' && c != '\n' && c != '\r') break;
        out += static_cast<char>(c);
    }
  }
  return out;
}

std::string to_junit(const CampaignData& d, const ExportOptions& o) {
  const v1::Campaign& c = d.campaign;
  std::ostringstream cases;
  int tests = 0, failures = 0, errors = 0, skipped = 0;
  double total = 0;
  for (const auto& job : d.jobs) {
    if (job.has_build()) continue;
    ++tests;
    const v1::OutcomeRecord* rec = job_outcome(d, job);
    const v1::Verdict verdict =
        job.state() == v1::JOB_STATE_DONE ? job.verdict() : v1::VERDICT_UNSPECIFIED;
    const double time =
        rec && rec->outcome().has_elapsed() ? seconds_of(rec->outcome().elapsed()) : 0;
    total += time;
    const std::string name = job.spec().scenario() + "." + job.spec().fs() + "." +
                             job.kernel_label() + ".seed" + std::to_string(job.spec().seed());
    cases << "    <testcase name=\"" << xml_escape(name) << "\" classname=\""
          << xml_escape(test_path(job.spec())) << "\" time=\"" << num(time) << "\"";
    if (rec && rec->outcome().has_finished_at())
      cases << " timestamp=\"" << xml_escape(rfc3339(rec->outcome().finished_at())) << "\"";
    cases << ">\n";
    cases << "      <properties>\n";
    auto prop = [&](const std::string& k, const std::string& v) {
      cases << "        <property name=\"" << xml_escape(k) << "\" value=\"" << xml_escape(v)
            << "\"/>\n";
    };
    prop("job_id", std::to_string(job.job_id()));
    prop("seed", std::to_string(job.spec().seed()));
    prop("fs", job.spec().fs());
    prop("kernel", job.kernel_label());
    if (verdict != v1::VERDICT_UNSPECIFIED) prop("verdict", verdict_word(verdict));
    if (rec) {
      const v1::Outcome& out = rec->outcome();
      prop("ops", std::to_string(out.ops()));
      prop("lookups_checked", std::to_string(out.lookups_checked()));
      prop("violations", std::to_string(out.violation_count()));
    }
    const std::string job_url = job_link(o, job.job_id());
    if (!job_url.empty()) prop("url", job_url);
    cases << "      </properties>\n";
    const ktap::Result result = ktap::result_of(verdict);
    std::string body, message;
    if (rec) {
      const v1::Outcome& out = rec->outcome();
      message = violation_summary(out);
      body = message;
      for (const v1::Issue* issue : outcome_issues(d, *rec)) {
        body += "\nissue " + std::to_string(issue->id()) + ": " + issue->title();
        const std::string link = issue_link(o, issue->id());
        if (!link.empty()) body += "\n  " + link;
      }
      if (!job_url.empty()) body += "\njob: " + job_url;
    }
    if (message.empty()) message = job.reason().empty() ? verdict_word(verdict) : job.reason();
    if (result == ktap::Result::Fail || result == ktap::Result::Hang) {
      ++failures;
      cases << "      <failure message=\"" << xml_escape(message) << "\" type=\""
            << verdict_word(verdict) << "\">" << xml_escape(body) << "</failure>\n";
    } else if (result == ktap::Result::Error) {
      ++errors;
      cases << "      <error message=\"" << xml_escape(message) << "\" type=\""
            << verdict_word(verdict) << "\">" << xml_escape(body.empty() ? job.reason() : body)
            << "</error>\n";
    } else if (result == ktap::Result::Skip) {
      ++skipped;
      cases << "      <skipped message=\"not run yet ("
            << xml_escape(v1::JobState_Name(job.state())) << ")\"/>\n";
    } else if (result == ktap::Result::Unjudged) {
      ++skipped;
      const std::string why = rec ? rec->outcome().error() : "";
      cases << "      <skipped message=\"inconclusive"
            << (why.empty() ? "" : ": " + xml_escape(why)) << "\"/>\n";
    }
    if (rec && !rec->outcome().console_tail().empty()) {
      std::string tail = rec->outcome().console_tail();
      if (tail.size() > kConsoleCap) tail = tail.substr(tail.size() - kConsoleCap);
      cases << "      <system-out>" << xml_escape(tail) << "</system-out>\n";
    }
    cases << "    </testcase>\n";
  }
  const std::string suite =
      "campaign-" + std::to_string(c.id()) + (c.spec().name().empty() ? "" : " " + c.spec().name());
  std::ostringstream out;
  auto counts = [&] {
    out << " tests=\"" << tests << "\" failures=\"" << failures << "\" errors=\"" << errors
        << "\" skipped=\"" << skipped << "\" time=\"" << num(total) << "\"";
  };
  out << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites name=\"leapfrog\"";
  counts();
  out << ">\n  <testsuite name=\"" << xml_escape(suite) << "\" id=\"" << c.id() << "\"";
  counts();
  out << " timestamp=\"" << xml_escape(rfc3339(c.created_at())) << "\">\n";
  out << "    <properties>\n";
  out << "      <property name=\"campaign_id\" value=\"" << c.id() << "\"/>\n";
  out << "      <property name=\"schedule_id\" value=\"" << c.schedule_id() << "\"/>\n";
  out << "      <property name=\"origin\" value=\"" << xml_escape(o.origin) << "\"/>\n";
  out << "    </properties>\n";
  out << cases.str();
  out << "  </testsuite>\n</testsuites>\n";
  return out.str();
}

}  // namespace leapfrog::coord::exports
