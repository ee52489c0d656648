// Child processes through common/process.h: exit codes, redirections, the
// signal mask a child starts with, output capture.

#include "common/process.h"

#include <gtest/gtest.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace leapfrog {
namespace {

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

class TempDir {
 public:
  TempDir() {
    char path[] = "/tmp/leapfrog-process-test-XXXXXX";
    if (mkdtemp(path) == nullptr) throw std::runtime_error("mkdtemp failed");
    path_ = path;
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  std::string operator/(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

TEST(Process, RunGivesTheExitStatusOr128PlusTheSignal) {
  SpawnOptions opts;
  opts.search_path = true;
  EXPECT_EQ(run_process({"true"}, opts), 0);
  EXPECT_EQ(run_process({"sh", "-c", "exit 7"}, opts), 7);
  EXPECT_EQ(run_process({"sh", "-c", "kill -9 $$"}, opts), 128 + SIGKILL);
}

TEST(Process, AProgramThatDoesNotExistDoesNotStart) {
  int error = 0;
  EXPECT_EQ(spawn_process({"/nonexistent/leapfrog-no-such-program"}, {}, &error), -1);
  EXPECT_EQ(error, ENOENT);
  EXPECT_EQ(run_process({"/nonexistent/leapfrog-no-such-program"}, {}), -1);
  // Without search_path a bare name is a path relative to the current folder.
  EXPECT_EQ(run_process({"true"}, {}), access("true", X_OK) == 0 ? 0 : -1);
}

TEST(Process, StreamsGoToFilesTruncatedOrAppended) {
  TempDir dir;
  SpawnOptions opts;
  opts.search_path = true;
  opts.stdin_path = dir / "in";
  opts.stdout_path = dir / "out";
  opts.stderr_path = dir / "err";
  std::ofstream(dir / "in") << "from stdin\n";
  std::ofstream(dir / "out") << "old contents that must go\n";
  ASSERT_EQ(run_process({"sh", "-c", "cat; echo to-err >&2"}, opts), 0);
  EXPECT_EQ(slurp(dir / "out"), "from stdin\n");
  EXPECT_EQ(slurp(dir / "err"), "to-err\n");

  opts.append = true;
  ASSERT_EQ(run_process({"sh", "-c", "echo again; echo again-err >&2"}, opts), 0);
  EXPECT_EQ(slurp(dir / "out"), "from stdin\nagain\n");
  EXPECT_EQ(slurp(dir / "err"), "to-err\nagain-err\n");

  SpawnOptions both;
  both.search_path = true;
  both.stdin_path = "/dev/null";
  both.stdout_path = dir / "both";
  both.stderr_to_stdout = true;
  ASSERT_EQ(run_process({"sh", "-c", "echo one; echo two >&2; cat"}, both), 0);
  EXPECT_EQ(slurp(dir / "both"), "one\ntwo\n");
}

// A close-on-exec descriptor named in inherit_fds reaches the child under its
// number; one not named does not (the control).
TEST(Process, InheritFdsHandsCloseOnExecDescriptorsToTheChild) {
  TempDir dir;
  std::ofstream(dir / "secret") << "handed over\n";
  const int fd = ::open((dir / "secret").c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  const std::string cat = "cat /proc/self/fd/" + std::to_string(fd) + " 2>/dev/null || echo closed";
  SpawnOptions opts;
  opts.search_path = true;
  opts.stdout_path = dir / "out";
  ASSERT_EQ(run_process({"sh", "-c", cat}, opts), 0);
  EXPECT_EQ(slurp(dir / "out"), "closed\n");
  opts.inherit_fds = {fd};
  ASSERT_EQ(run_process({"sh", "-c", cat}, opts), 0);
  EXPECT_EQ(slurp(dir / "out"), "handed over\n");
  ::close(fd);
}

// The child's blocked signals, as /proc's SigBlk shows them (bit n-1 for
// signal n).
uint64_t child_blocked_signals(bool reset, const TempDir& dir) {
  SpawnOptions opts;
  opts.search_path = true;
  opts.stdout_path = dir / "mask";
  opts.reset_signal_mask = reset;
  // grep itself, not a shell: dash blocks every signal while it waits for a child.
  EXPECT_EQ(run_process({"grep", "SigBlk", "/proc/self/status"}, opts), 0);
  const std::string line = slurp(dir / "mask");
  const size_t tab = line.find('\t');
  if (tab == std::string::npos) {
    ADD_FAILURE() << "no SigBlk line: " << line;
    return 0;
  }
  return std::stoull(line.substr(tab + 1), nullptr, 16);
}

TEST(Process, ResetSignalMaskUnblocksWhatTheParentBlocked) {
  TempDir dir;
  sigset_t set, old;
  sigemptyset(&set);
  sigaddset(&set, SIGUSR1);
  ASSERT_EQ(pthread_sigmask(SIG_BLOCK, &set, &old), 0);
  const uint64_t inherited = child_blocked_signals(false, dir);
  const uint64_t reset = child_blocked_signals(true, dir);
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  const uint64_t usr1 = uint64_t{1} << (SIGUSR1 - 1);
  EXPECT_EQ(inherited & usr1, usr1) << std::hex << inherited;
  EXPECT_EQ(reset, 0u) << std::hex << reset;
}

TEST(Process, CaptureReturnsStdoutOfAProgramThatSucceeds) {
  EXPECT_EQ(capture_output({"sh", "-c", "echo out; echo err >&2"}), "out\n");
  EXPECT_EQ(capture_output({"printf", "no newline"}), "no newline");
  EXPECT_EQ(capture_output({"sh", "-c", "echo partial; exit 3"}), std::nullopt);
  EXPECT_EQ(capture_output({"leapfrog-no-such-program"}), std::nullopt);
}

TEST(Process, FindInPathLooksUpExecutables) {
  const std::string sh = find_in_path("sh");
  ASSERT_FALSE(sh.empty());
  EXPECT_EQ(sh.front(), '/');
  EXPECT_EQ(access(sh.c_str(), X_OK), 0);
  EXPECT_EQ(find_in_path("leapfrog-no-such-program"), "");
  EXPECT_EQ(find_in_path("/bin/sh"), "/bin/sh");
  EXPECT_EQ(find_in_path("/nonexistent/sh"), "");
  EXPECT_EQ(find_in_path(""), "");
}

}  // namespace
}  // namespace leapfrog
