#pragma once
// `leapfrog-agent connect`: register with a coordinator, lease jobs, run each
// in a fresh sandbox (a child `leapfrog-agent run`), heartbeat, spool every
// outcome to disk until the coordinator acknowledges it, reconnect with
// backoff, and on SIGTERM hand the running job back and exit.

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "leapfrog/v1/common.pb.h"

namespace leapfrog {

// Runs one kernel build job (agent/build_job.h), writing progress lines to
// `log`; returns the outcome to report (with Outcome.build set).
using BuildRunner = std::function<v1::Outcome(const v1::KernelBuild& build,
                                              const std::function<void(const std::string&)>& log)>;

struct ConnectOptions {
  // gRPC target, e.g. "127.0.0.1:7070" or "ipv4:127.0.0.1:7070,127.0.0.1:7071"
  // (several replicas: the channel fails over between them).
  std::string coordinator;
  // `<data-dir>/address` of a `leapfrog up`/`serve` (--data-dir): read again
  // while the coordinator is unavailable, since a restarted one may listen
  // elsewhere. Empty: `coordinator` was given as is.
  std::string address_file;
  std::string token;
  std::string name;          // default: host name + pid
  std::string kernel_label;  // default: "host"
  std::vector<std::string> filesystems;  // default: what this machine can provision
  // A job's file system -> the one it runs on here ("fuse-cached" ->
  // "fuse-direct"): the keys are advertised too. Lets tests stand in kernels
  // whose runs really differ.
  std::map<std::string, std::string> fs_map;
  std::string spool_dir;     // default: /var/tmp/leapfrog-agent-<name>
  std::string self_exe;      // the leapfrog-agent binary to run jobs with
  int max_jobs = 0;          // stop after this many jobs (0: no limit); for tests
  bool vm = false;
  // Run the selftest-* jobs (crash the kernel, freeze the agent); only with
  // vm, and only when the launcher was asked to (`leapfrog vm run --selftest`).
  bool selftest = false;
  // Advertise Capabilities.builder and run kernel build jobs with
  // build_runner (set by the full agent; the static VM agent has none).
  bool builder = false;
  BuildRunner build_runner;
  // Test only: the `uname -r` to advertise instead of the running kernel's,
  // so a host agent can stand in for a VM booted with a built kernel.
  std::string uname_release;
  // TESTS ONLY: each run first allocates this many MiB (run
  // --test-allocate-mib), so that a memory limit gets it killed.
  uint32_t test_run_allocate_mib = 0;
  // Connect only once this file exists (the VM's /init creates it when the
  // network is up). The agent starts before that so that its start-up, slow
  // under TCG, overlaps the loading of the network modules.
  std::string wait_for;
};

// Runs until SIGTERM/SIGINT (or max_jobs). Returns the process exit code.
// Fills what run_connect defaults: the name (host-pid) and the spool
// (/var/tmp/leapfrog-agent-<name>).
void fill_connect_defaults(ConnectOptions& opts);

int run_connect(const ConnectOptions& opts);

}  // namespace leapfrog
