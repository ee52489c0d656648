#pragma once
// The live counts of a job's run (scenarios/progress.h) in memory shared
// between the agent that heartbeats and the run, which is a child process
// (`leapfrog-agent run`) that judges in a child of its own (the sandbox):
// the agent makes the memory, hands its descriptor to the run as
// `--progress-fd`, and reads the counts at each heartbeat.

#include "scenarios/progress.h"

namespace leapfrog {

// The descriptor the run child finds the shared memory at.
inline constexpr int kProgressFd = 3;

// One RunProgress in a memfd, mapped shared. Without memfd (a very old
// kernel) get() is null and the heartbeats carry no counts.
class SharedProgress {
 public:
  SharedProgress();
  ~SharedProgress();
  SharedProgress(const SharedProgress&) = delete;
  SharedProgress& operator=(const SharedProgress&) = delete;

  RunProgress* get() const { return progress_; }
  // The memfd to hand to the run (-1 without one).
  int fd() const { return fd_; }

 private:
  int fd_ = -1;
  RunProgress* progress_ = nullptr;
};

// In the run child: the RunProgress behind `fd` (made by SharedProgress),
// mapped shared for the rest of the process and its children; `fd` is
// closed. Throws std::runtime_error when it cannot be mapped.
RunProgress* map_shared_progress(int fd);

}  // namespace leapfrog
