#pragma once
// Values of a message that no reader can store and print: ReportOutcome
// refuses an outcome that holds one (coordinator/report_check.h), and the
// store clears them from rows stored before it did, so that one such row is
// shown with a note instead of failing every list that prints it.
//
// Bad values are:
//   - Durations and Timestamps outside protobuf's ranges, or whose nanos are
//     out of range or of the other sign than the seconds (the JSON printer
//     refuses them, and a page that prints the row fails);
//   - doubles and floats that are not finite (JSON has no NaN or infinity);
//   - uint64 values past int64 (the store keeps counters as bigint, and -1
//     read back fails every list that converts it);
//   - int32 and int64 values at their type's minimum (no real count, offset
//     or step is; negating one overflows the printers' arithmetic).

#include <google/protobuf/message.h>

#include <string>
#include <vector>

namespace leapfrog::outcome {

// The first bad value of `m`, as "<path>.<field> is ..." with `path` as the
// message's own name ("outcome"), or "" when there is none.
std::string first_bad_value(const google::protobuf::Message& m, const std::string& path);

// Clears every bad value of `m` (a Duration or Timestamp field is unset, a
// number becomes 0) and returns each one it cleared, named as
// first_bad_value names it.
std::vector<std::string> clear_bad_values(google::protobuf::Message& m, const std::string& path);

}  // namespace leapfrog::outcome
