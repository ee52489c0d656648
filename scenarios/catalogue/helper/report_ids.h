#pragma once
// The bytes of report_ids (helper/report_ids.c), a static program that writes
// its effective uid and gid ("EUID EGID\n") to standard output. Generated at
// build time (embed_bytes.cmake).

#include <cstddef>

namespace leapfrog::catalogue {

extern const unsigned char kReportIds[];
extern const size_t kReportIdsSize;

}  // namespace leapfrog::catalogue
