#pragma once
// Builds a test kernel from a source tree (or tarball) and a patch series:
// unpack once, apply the patches in order, configure `allnoconfig` plus
// Leapfrog's fragment (deploy/kernel/leapfrog.config) plus the user's
// fragments, build, and keep the result in a cache keyed by every input
// (source, patches, config, compiler). The same inputs never build twice.
//
// Layout under the cache root (default /var/cache/leapfrog):
//   kbuild/src/<source-id>/tree      the unpacked source, patched in place
//   kbuild/src/<source-id>/obj       the out-of-tree build (O=), reused, so a
//                                    rebuild after a small patch change is quick
//   kbuild/src/<source-id>/applied   the patch series applied to tree now
//   kbuild/out/<inputs-hash>/        vmlinux, bzImage, build.log, meta.json
//   kbuild/out/<inputs-hash>/failed  present when that build failed (log kept)

#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/kernel/build_file.h"
#include "common/kernel/build_sandbox.h"

namespace leapfrog::kbuild {

// One patch of the series, as recorded with the kernel.
struct PatchInfo {
  std::string name;     // file name
  std::string sha256;   // of its bytes
  std::string subject;  // its "Subject:" line, if any
};

// A patch or config fragment as a build takes it: bytes and a file name,
// never a path the build reads (a builder agent gets them in the request).
struct InputFile {
  std::string name;
  std::string content;
};

// The file at `path` as an InputFile named by its file name. Throws
// BuildError(stage) when it cannot be read.
InputFile read_input_file(const std::string& path, const std::string& stage = "patch");

struct BuildSpec {
  std::string label;
  // A kernel source folder, or a tarball (.tar, .tar.gz, .tar.xz, .tar.bz2):
  // a path here, resolved by the caller (a builder agent: under its source
  // roots, build_file.h).
  std::string source;
  // Applied in order with `patch -p1`.
  std::vector<InputFile> patches;
  // User fragments, applied on top of Leapfrog's own.
  std::vector<InputFile> config_fragments;
  // Where tar, cp, patch and make run (build_sandbox.h); off: as this process.
  SandboxConfig sandbox;
  // Leapfrog's fragment; empty: found next to the executable or in the tree.
  std::string base_fragment;
  std::string cache_dir;
  unsigned jobs = 0;  // 0: online CPUs
  // Build again although these inputs failed before (a failure is cached too,
  // so a broken series is not rebuilt every night).
  bool retry_failed = false;
};

struct BuildResult {
  std::string label;
  std::string inputs_hash;
  std::string dir;      // kbuild/out/<inputs-hash>
  std::string vmlinux;  // ELF, for direct (PVH) boot
  std::string bzimage;
  std::string release;    // `uname -r` of the built kernel
  std::string build_log;  // path
  std::vector<PatchInfo> patches;
  bool cached = false;  // true: these inputs were built before
  double seconds = 0;   // build time (0 when cached)
};

// What failed and where: stage is "source", "patch", "config", "build" or
// "sandbox" (the sandbox could not be set up).
// log_tail holds the last lines of the tool's output.
class BuildError : public std::runtime_error {
 public:
  BuildError(std::string stage, const std::string& what, std::string log_tail,
             std::string log_path = {})
      : std::runtime_error(what),
        stage_(std::move(stage)),
        log_tail_(std::move(log_tail)),
        log_path_(std::move(log_path)) {}
  const std::string& stage() const { return stage_; }
  const std::string& log_tail() const { return log_tail_; }
  const std::string& log_path() const { return log_path_; }

 private:
  std::string stage_;
  std::string log_tail_;
  std::string log_path_;
};

// Progress lines for people ("unpacking ...", "building ...").
using Progress = std::function<void(const std::string&)>;

// Builds (or finds in the cache) the kernel. Throws BuildError.
BuildResult build_kernel(const BuildSpec& spec, const Progress& progress = {});

// The hash that keys the cache for these inputs; reads every input. Throws
// BuildError for a missing input.
std::string inputs_hash(const BuildSpec& spec);

// Lowercase hex sha256 of a file's bytes (of bytes: build_file.h).
std::string sha256_of_file(const std::string& path);

// A kernel tree's version, from the first lines of its Makefile.
struct TreeVersion {
  int version = 0, patchlevel = 0, sublevel = 0;
  std::string str() const;  // "6.12.118"
  bool older_than(int v, int p) const { return version < v || (version == v && patchlevel < p); }
};

// VERSION, PATCHLEVEL and SUBLEVEL of a kernel's top Makefile (the first
// assignment of each); nullopt when VERSION or PATCHLEVEL is missing or not
// a number (no kernel tree).
std::optional<TreeVersion> tree_version(const std::string& makefile_text);

// The oldest line Leapfrog's fragment, delay points and scenarios are
// written for: an older tree is refused before it is configured.
inline constexpr int kOldestVersion = 6, kOldestPatchlevel = 1;

// Leapfrog's window-widening series for a tree of `version`, kept per
// kernel line (deploy/kernel/widen/<line>/*.patch, in name order, with the
// same point names on every line): the folder of the newest line not newer
// than the tree (6.1 for 6.1 to 6.11, 6.12 from 6.12 on). `dir` is the
// folder of the lines; by default found next to the executable or in the
// current folder. Throws BuildError("patch") when the folder is missing, no
// line fits the version, or the line's folder holds no patch.
std::vector<std::string> widen_series(const TreeVersion& version, const std::string& dir = {});

// The version of a kernel source: a folder's top Makefile, or a tarball's
// (its first Makefile one level down, read without unpacking the rest).
// Throws BuildError("source") when there is none or it names no version.
TreeVersion source_version(const std::string& source);

// The `=y`/`=m`/`=<value>` lines of a fragment that did not survive into a
// .config (a missing dependency or a misspelt name), as "CONFIG_X=y".
std::vector<std::string> missing_options(const std::string& fragment_text,
                                         const std::string& dot_config_text);

// The "Subject:" header of a patch's text before its first diff; "" if none.
std::string patch_subject(const std::string& patch_text);

// The last `lines` lines of a text.
std::string tail_lines(const std::string& text, size_t lines);

}  // namespace leapfrog::kbuild
