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
// Any other string a request carries (ids, secrets, versions, uname, page
// tokens): coordinator/request_bounds.h bounds every string field by this
// unless it names a limit of its own.
inline constexpr size_t kMaxFieldBytes = 4096;
// Any other repeated field of a request, by entries (the same walk).
inline constexpr size_t kMaxFieldEntries = kMaxListEntries;
// An agent's host name (a DNS name is at most 253 bytes).
inline constexpr size_t kMaxHostBytes = 255;
// A webhook URL, and a mail address (RFC 5321 allows 254 bytes).
inline constexpr size_t kMaxUrlBytes = 2048;
inline constexpr size_t kMaxMailAddressBytes = 254;
// A patch's subject line in a kernel record (conventionally under 75).
inline constexpr size_t kMaxPatchSubjectBytes = 512;
// Notification subscriptions kept at once (ListSubscriptions answers them
// all): 128 of the largest still fit one page (kMaxPageBytes).
inline constexpr size_t kMaxSubscriptions = 128;
// A kernel's build log tail (the last 40 lines of the tool's output).
inline constexpr size_t kMaxLogTailBytes = 64 << 10;
// A campaign's widening request: "seed", "off", or up to a few dozen
// "POINT:PPM:DELAY_NS:UID" entries.
inline constexpr size_t kMaxWidenBytes = 4096;
// One reported outcome, serialized (the oracle reports a few dozen violations).
inline constexpr size_t kMaxOutcomeBytes = 1 << 20;
// Largest gRPC message either way, for the server and every client of it
// (coordinator/channel.h): gRPC's 4 MiB default would refuse answers the
// server sends. Lists page (docs/api.md), so an answer stays far below.
inline constexpr int kMaxMessageBytes = 64 << 20;
// What one page of a list holds, serialized: a page is cut at its count or
// here, whichever comes first (at least one item), and says more follow.
// Far below kMaxMessageBytes (a client on the coordinator's channel reads
// it; one with gRPC's default 4 MiB receive limit may not), and what one
// HTTP answer of a list holds too.
inline constexpr size_t kMaxPageBytes = 8 << 20;
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

// The first at most `max` bytes of `text`, cut before a UTF-8 character
// rather than inside it (a proto string must stay valid UTF-8): what a
// producer sends in a field bounded by `max`.
inline std::string utf8_prefix(const std::string& text, size_t max) {
  if (text.size() <= max) return text;
  size_t n = max;
  while (n > 0 && (static_cast<unsigned char>(text[n]) & 0xc0) == 0x80) --n;
  return text.substr(0, n);
}

// The last at most `max` bytes of `text`, starting at a UTF-8 character.
inline std::string utf8_suffix(const std::string& text, size_t max) {
  if (text.size() <= max) return text;
  size_t from = text.size() - max;
  while (from < text.size() && (static_cast<unsigned char>(text[from]) & 0xc0) == 0x80) ++from;
  return text.substr(from);
}

}  // namespace leapfrog
