#pragma once
// Window widening on kernels built with `leapfrog kernel build --widen`
// (deploy/kernel/widen/<line>/), or on stock kernels with Leapfrog's kprobe module
// (deploy/kernel/kprobe-widen/, the same controls at function granularity):
// before a run the agent checks that the kernel's
// delay-point controls refuse bad values, chooses the points from the job's
// seed and sets them in /sys/kernel/leapfrog_widen; after the run it reads
// how often each fired and turns every point off again.
//
// The choice is a pure function of the seed, the points the kernel offers
// and the observers' uid, so `replay` (same spec, same seed, same kernel)
// sets exactly the same points. `leapfrog-agent run --widen` overrides it.

#include <cstdint>
#include <string>
#include <vector>

#include "scenarios/outcome.h"
#include "scenarios/widen_request.h"

namespace leapfrog::widen {

inline constexpr const char* kControlDir = "/sys/kernel/leapfrog_widen";

// The points a `--widen` build offers (deploy/kernel/widen/<line>/, the same on every line),
// sorted: what choose() picks from on such a kernel, for the tests and the
// detection bench that must know a seed's choice before the kernel boots.
inline const std::vector<std::string> kBuiltInPoints = {
    "acl_fetched", "d_move",       "dotdot",           "dotdot_mountpoint", "exec_setid",
    "link_body",   "lookup_found", "may_lookup_after", "may_lookup_before", "mount_attach",
    "mount_cross", "setattr_copy", "step_into",        "step_validated"};
// In the VM image: why the kprobe module is not loaded (no module built for
// the kernel, vermagic mismatch, insmod's error), or empty; see deploy/vm/init.
inline constexpr const char* kKprobeStatusFile = "/run/leapfrog-widen-kprobe";

// The points a seed chooses among `offered` (any order): none for one seed
// in four (a run without widening, as a control), else one to three points
// with a probability of 1-50 % and a delay of 1-100 us; lookup points delay
// only `observer_uid`, the mutators' points (setattr_copy, d_move,
// mount_attach) only root.
std::vector<WidenPoint> choose(uint64_t seed, std::vector<std::string> offered,
                               uint32_t observer_uid);

// Sets up the widening of one run from `dir` (kControlDir in production).
// Off, with the reason, when the kernel has no controls (with the kprobe
// module's status from `kprobe_status` when it says why), they are locked,
// they accept a bad value, or the request or the seed says off. Throws
// std::runtime_error when the kernel refuses a point the request set.
Widening begin(const std::string& dir, const Request& request, uint64_t seed, uint32_t observer_uid,
               const std::string& kprobe_status = kKprobeStatusFile);

// Reads the hits of w's points (and their length on the clock, where the
// kernel counts it) and turns every point off. No-op when off.
void end(const std::string& dir, Widening& w);

// One note per point whose delays took less than 90 % of hits × delay_ns
// on the kernel's clock: its windows were narrower than the seed asked, so a
// clean run says less than it seems. None when the kernel does not count.
std::vector<std::string> short_delays(const Widening& w);

}  // namespace leapfrog::widen
