#pragma once
// Signatures: what a failure is, independent of timing, so that the same bug
// seen twice groups into one issue. A violation's signature is (scenario,
// kind, observer op / mutator op, path shape); a crash's is its normalised
// kernel report title. docs/triage.md has the exact text format.

#include <string>
#include <vector>

#include "leapfrog/v1/common.pb.h"

namespace leapfrog::coord::triage {

// One signature with what an issue shows about it.
struct Signature {
  std::string key;       // stable text, the identity
  std::string kind;      // violation, crash, hang, boot-failure
  std::string scenario;  // violations only
  std::string title;     // one line for people
  // Index in Outcome.violations of the first violation with this key (-1: none).
  int violation_index = -1;

  bool operator==(const Signature& o) const { return key == o.key; }
};

// The signature of one violation of a run of `scenario`.
Signature violation_signature(const std::string& scenario, const v1::Violation& v);

// "BUG: KASAN: use-after-free in foo+0x1a/0x30 [ext4]" -> "BUG: KASAN:
// use-after-free in foo [ext4]": timestamps, offsets, addresses, pids and CPU
// numbers removed, spaces collapsed. Empty input gives "unknown".
std::string normalize_crash_title(const std::string& title);

// Every distinct signature of one outcome, in order of first appearance.
// PASS, ERROR and INFRA_FAILURE have none: they are not kernel bugs (an
// ERROR is a setup problem, INFRA_FAILURE a lost agent). KERNEL_CRASH and
// HANG take their title from Outcome.error (the VM launcher puts the console's
// report title there; the first line of console_tail is the fallback).
// BOOT_FAILURE is one signature per kernel-independent cause: "boot-failure".
std::vector<Signature> outcome_signatures(const v1::ScenarioSpec& spec, const v1::Outcome& o);

// True if `o` carries the signature `key`.
bool outcome_has_signature(const v1::ScenarioSpec& spec, const v1::Outcome& o,
                           const std::string& key);

}  // namespace leapfrog::coord::triage
