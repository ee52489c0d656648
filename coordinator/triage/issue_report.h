#pragma once
// An issue as a report in the form kernel lists expect (syzbot's reports are
// the model): title and signature; the kernels that reproduce it, with the
// rate and its interval; those that stayed clean, over how many lookups; the
// oracle's explanation of the first violation in plain words; the history
// excerpt around it; for a crash, the console; the C reproducer and how to
// run it; a link to the issue's page. As Markdown, or as a plain-text mail
// with the reproducer attached (MIME, base64, byte for byte).
// `leapfrog issue report N` prints it.

#include <cstdint>
#include <string>
#include <vector>

#include "leapfrog/v1/control.pb.h"
#include "leapfrog/v1/triage.pb.h"

namespace leapfrog::coord::triage {

// Clean runs of the issue's scenario on one kernel.
struct CleanRuns {
  std::string kernel_label;
  uint64_t runs = 0;
  uint64_t lookups = 0;  // lookups (and offset operations) judged in them
};

struct IssueReportInput {
  v1::Issue issue;                  // as GetIssue answers it (rates, actions)
  std::vector<v1::Kernel> kernels;  // the registered kernels (release, series)
  std::vector<CleanRuns> clean;     // per kernel
  std::string console_tail;         // the example's, for a crash, hang or boot failure
  std::string link;                 // the issue's page on the dashboard ("" if unknown)
};

// Counts one outcome of the issue's scenario into `in`: a PASS into its
// kernel's clean runs, the issue's example outcome's console into
// console_tail. The CLI (over gRPC) and the HTTP API (over the store) hand
// every outcome of the scenario here, page by page.
void add_outcome(IssueReportInput& in, const v1::OutcomeRecord& o);

// The address of the issue's page on a dashboard served at `base`
// (http://HOST:PORT).
std::string issue_page_link(std::string base, int64_t id);

// The reproducer the report carries: the latest finished minimize's, else
// one made from the example (c_reproducer); "" with `why` set when the
// scenario has none.
std::string report_reproducer(const v1::Issue& issue, std::string* why);

std::string issue_report_markdown(const IssueReportInput& in);

struct MailOptions {
  std::string from = "leapfrog <leapfrog@localhost>";
  std::string to;        // empty: no To header (the sender fills it)
  std::string date;      // RFC 5322 date; empty: now
  std::string boundary;  // empty: one derived from the content
};

// A multipart/mixed mail: the report as text/plain (UTF-8), and the
// reproducer as the attachment repro.c (base64) when there is one.
std::string issue_report_mail(const IssueReportInput& in, const MailOptions& opts = {});

}  // namespace leapfrog::coord::triage
