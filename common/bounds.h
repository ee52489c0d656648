#pragma once
// Limits on what clients and agents send, checked before anything is stored,
// so that no stored value can make a later answer exceed the transport's
// limits or break a reader. Messages about a bad value quote only its start.
// Header-only: the triage library, below the coordinator's, and the agent
// (which fits its outcomes under kMaxOutcomeBytes) use it too.

#include <cstddef>
#include <string>

namespace leapfrog {

// Campaign and schedule names.
inline constexpr size_t kMaxNameBytes = 200;
// Scenario, kernel, file system and parameter names, align and cron text.
inline constexpr size_t kMaxLabelBytes = 100;
// Entries of one list in a spec (scenarios, kernels, file systems, params, patches).
inline constexpr size_t kMaxListEntries = 64;
// A path in a spec (kernel sources, patches, config fragments).
inline constexpr size_t kMaxPathBytes = 4096;
// A file a kernel build carries (a patch or a config fragment), and all of
// one build's files together: a real series is a few hundred KiB.
inline constexpr size_t kMaxBuildFileBytes = 4 << 20;
inline constexpr size_t kMaxBuildBytes = 16 << 20;
// A triage note.
inline constexpr size_t kMaxNoteBytes = 16 << 10;
// One reported outcome, serialized (the oracle reports a few dozen violations).
inline constexpr size_t kMaxOutcomeBytes = 1 << 20;
// Largest gRPC message either way, for the server and every client of it
// (coordinator/channel.h): gRPC's 4 MiB default would refuse answers the
// server sends. Lists page (docs/api.md), so an answer stays far below.
inline constexpr int kMaxMessageBytes = 64 << 20;
// How much of a bad value an error message quotes.
inline constexpr size_t kQuotedBytes = 64;

// The first kQuotedBytes of `value` in quotes, "..." if cut, control bytes
// as '?' (one line whatever the value holds).
inline std::string quoted_start(const std::string& value) {
  std::string out = value.substr(0, kQuotedBytes);
  for (char& c : out)
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = '?';
  return "\"" + out + (value.size() > kQuotedBytes ? "...\"" : "\"");
}

// "" when `value` fits in `max` bytes, else why not ("campaign name "abc..."
// (5242880 bytes) is too long, want at most 200 bytes").
inline std::string too_long(const std::string& what, const std::string& value, size_t max) {
  if (value.size() <= max) return "";
  return what + " " + quoted_start(value) + " (" + std::to_string(value.size()) +
         " bytes) is too long, want at most " + std::to_string(max) + " bytes";
}

}  // namespace leapfrog
