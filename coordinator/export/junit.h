#pragma once
// A campaign as JUnit XML, the shape Jenkins and GitLab read: one
// <testsuite> per campaign, one <testcase> per job. A violation or crash is a
// <failure> with the violation summary and a link to the issue page; a run
// that could not judge is an <error>; a job not run yet is <skipped>. The
// console tail of a crash, hang or boot failure goes in <system-out>.

#include <string>

#include "coordinator/export/campaign_data.h"

namespace leapfrog::coord::exports {

std::string to_junit(const CampaignData& d, const ExportOptions& o);

// Text escaped for XML character data and attributes; characters XML 1.0
// cannot hold (control characters other than tab and line breaks) dropped.
std::string xml_escape(const std::string& text);

}  // namespace leapfrog::coord::exports
