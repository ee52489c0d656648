// The build driver on a toy source tree: its Makefile stands in for Kbuild
// (allnoconfig copies the fragment into .config, dropping one option, and
// bzImage "builds" by copying fs/namei.c), so these tests check our own logic:
// patch series, the input cache, failure records and config checks, and the
// records a build's result becomes (build_and_store, built_kernel). The real
// kernel is built in tests/planted_kernel_test.

#include "common/kernel/kernel_build.h"

#include <gtest/gtest.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "common/kernel/build_and_store.h"
#include "common/kernel/built_kernel.h"
#include "common/proto_time.h"

namespace leapfrog::kbuild {
namespace {

namespace sfs = std::filesystem;

const char* const kToyMakefile = R"mk(
# Stand-in for Kbuild: supports the targets and variables build_kernel uses.
VERSION = 6
PATCHLEVEL = 1
SUBLEVEL = 0
allnoconfig:
	mkdir -p $(O)
	grep '^CONFIG_' $(KCONFIG_ALLCONFIG) | grep -v '^CONFIG_ONLY_ON_REAL_KERNELS' > $(O)/.config
bzImage:
	@if grep -q BREAK_BUILD fs/namei.c; then echo "fs/namei.c:1: error: BREAK_BUILD found"; exit 1; fi
	mkdir -p $(O)/arch/x86/boot $(O)/include/config
	cp fs/namei.c $(O)/vmlinux
	cp fs/namei.c $(O)/arch/x86/boot/bzImage
	echo 6.1.0-toy > $(O)/include/config/kernel.release
	echo built >> $(O)/../build-count
)mk";

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void spit(const std::string& path, const std::string& text) {
  sfs::create_directories(sfs::path(path).parent_path());
  std::ofstream(path) << text;
}

class KernelBuildTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/leapfrog-kbuild-test-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    src_ = dir_ + "/linux";
    spit(src_ + "/Makefile", kToyMakefile);
    spit(src_ + "/fs/namei.c", "line one\nline two\nline three\n");
    spit(dir_ + "/base.config", "CONFIG_TMPFS=y\nCONFIG_NR_CPUS=8\n");
    // p1 changes line two; p2 (on top of p1) changes line three.
    spit(dir_ + "/p1.patch",
         "Subject: [PATCH] first\n---\n--- a/fs/namei.c\n+++ b/fs/namei.c\n@@ -1,3 +1,3 @@\n"
         " line one\n-line two\n+line TWO\n line three\n");
    spit(dir_ + "/p2.patch",
         "--- a/fs/namei.c\n+++ b/fs/namei.c\n@@ -1,3 +1,3 @@\n line one\n line TWO\n-line "
         "three\n+line THREE\n");
    spec_.label = "toy";
    spec_.source = src_;
    spec_.base_fragment = dir_ + "/base.config";
    spec_.cache_dir = dir_ + "/cache";
    spec_.jobs = 1;
  }
  void TearDown() override {
    std::error_code ec;
    sfs::remove_all(dir_, ec);
  }
  int builds() const {
    // build-count sits beside obj, in the one source folder of the cache.
    for (auto& e : sfs::recursive_directory_iterator(spec_.cache_dir + "/kbuild/src")) {
      if (e.path().filename() == "build-count") {
        std::string s = slurp(e.path().string());
        return static_cast<int>(std::count(s.begin(), s.end(), '\n'));
      }
    }
    return 0;
  }

  std::string dir_, src_;
  BuildSpec spec_;
};

TEST_F(KernelBuildTest, BuildsOnceAndThenComesFromTheCache) {
  auto r = build_kernel(spec_);
  EXPECT_FALSE(r.cached);
  EXPECT_EQ(r.release, "6.1.0-toy");
  EXPECT_EQ(slurp(r.vmlinux), "line one\nline two\nline three\n");
  EXPECT_TRUE(sfs::exists(r.bzimage));
  EXPECT_TRUE(sfs::exists(r.dir + "/meta.json"));
  EXPECT_EQ(builds(), 1);

  auto again = build_kernel(spec_);
  EXPECT_TRUE(again.cached);
  EXPECT_EQ(again.inputs_hash, r.inputs_hash);
  EXPECT_EQ(again.release, "6.1.0-toy");
  EXPECT_EQ(builds(), 1) << "the same inputs must not build twice";
}

TEST_F(KernelBuildTest, SwitchesPatchSeriesBothWays) {
  spec_.patches = {read_input_file(dir_ + "/p1.patch")};
  auto one = build_kernel(spec_);
  EXPECT_EQ(slurp(one.vmlinux), "line one\nline TWO\nline three\n");
  ASSERT_EQ(one.patches.size(), 1u);
  EXPECT_EQ(one.patches[0].name, "p1.patch");
  EXPECT_EQ(one.patches[0].subject, "[PATCH] first");
  EXPECT_EQ(one.patches[0].sha256, sha256_of_file(dir_ + "/p1.patch"));

  spec_.patches = {read_input_file(dir_ + "/p1.patch"), read_input_file(dir_ + "/p2.patch")};
  auto two = build_kernel(spec_);
  EXPECT_EQ(slurp(two.vmlinux), "line one\nline TWO\nline THREE\n");

  spec_.patches = {};
  auto none = build_kernel(spec_);
  EXPECT_EQ(slurp(none.vmlinux), "line one\nline two\nline three\n")
      << "reverting the series must restore the source";
  EXPECT_NE(one.inputs_hash, two.inputs_hash);
  EXPECT_NE(two.inputs_hash, none.inputs_hash);
  EXPECT_EQ(builds(), 3);
}

TEST_F(KernelBuildTest, APatchThatDoesNotApplyIsAClearErrorAndIsRemembered) {
  spec_.patches = {read_input_file(dir_ + "/p2.patch")};  // needs p1 first
  try {
    build_kernel(spec_);
    FAIL() << "expected a BuildError";
  } catch (const BuildError& e) {
    EXPECT_EQ(e.stage(), "patch");
    EXPECT_NE(std::string(e.what()).find("\"p2.patch\" does not apply"), std::string::npos)
        << e.what();
    EXPECT_NE(e.log_tail().find("FAILED"), std::string::npos) << e.log_tail();
  }
  try {
    build_kernel(spec_);
    FAIL() << "expected the cached failure";
  } catch (const BuildError& e) {
    EXPECT_EQ(e.stage(), "patch");
    EXPECT_NE(std::string(e.what()).find("failed before"), std::string::npos) << e.what();
  }
  EXPECT_EQ(builds(), 0);
  // A good series on the same tree still builds (the failed one left nothing applied).
  spec_.patches = {read_input_file(dir_ + "/p1.patch"), read_input_file(dir_ + "/p2.patch")};
  EXPECT_EQ(slurp(build_kernel(spec_).vmlinux), "line one\nline TWO\nline THREE\n");
}

TEST_F(KernelBuildTest, ABuildFailureCarriesTheLogTail) {
  spit(dir_ + "/break.patch",
       "--- a/fs/namei.c\n+++ b/fs/namei.c\n@@ -1,3 +1,3 @@\n line one\n-line two\n+BREAK_BUILD\n "
       "line three\n");
  spec_.patches = {read_input_file(dir_ + "/break.patch")};
  try {
    build_kernel(spec_);
    FAIL() << "expected a BuildError";
  } catch (const BuildError& e) {
    EXPECT_EQ(e.stage(), "build");
    EXPECT_NE(e.log_tail().find("error: BREAK_BUILD found"), std::string::npos) << e.log_tail();
    EXPECT_TRUE(sfs::exists(e.log_path()));
  }
  spec_.retry_failed = true;
  EXPECT_THROW(build_kernel(spec_), BuildError);
}

TEST_F(KernelBuildTest, AnOptionTheConfigDropsIsNamed) {
  spit(dir_ + "/user.config", "CONFIG_ONLY_ON_REAL_KERNELS=y\n");
  spec_.config_fragments = {read_input_file(dir_ + "/user.config", "config")};
  try {
    build_kernel(spec_);
    FAIL() << "expected a BuildError";
  } catch (const BuildError& e) {
    EXPECT_EQ(e.stage(), "config");
    EXPECT_NE(std::string(e.what()).find("CONFIG_ONLY_ON_REAL_KERNELS=y"), std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("configuration of Linux 6.1.0 lost"), std::string::npos)
        << e.what();
  }
}

// A tree older than the oldest line Leapfrog is written for is refused before
// it is configured, naming its version; so is a tree whose Makefile says no
// version at all. Neither reaches `make`.
TEST_F(KernelBuildTest, AnOlderTreeOrNoKernelTreeIsRefusedBeforeConfiguring) {
  std::string old_tree = kToyMakefile;
  const std::string line61 = "VERSION = 6\nPATCHLEVEL = 1\n";
  old_tree.replace(old_tree.find(line61), line61.size(), "VERSION = 5\nPATCHLEVEL = 15\n");
  spit(src_ + "/Makefile", old_tree);
  try {
    build_kernel(spec_);
    FAIL() << "expected a BuildError";
  } catch (const BuildError& e) {
    EXPECT_EQ(e.stage(), "source");
    EXPECT_NE(std::string(e.what()).find("Linux 5.15.0 is older than 6.1"), std::string::npos) << e.what();
  }
  EXPECT_EQ(builds(), 0);

  const std::string src2 = dir_ + "/not-linux";
  spit(src2 + "/Makefile", "all:\n\techo hello\n");
  spit(src2 + "/fs/namei.c", "line one\n");
  spec_.source = src2;
  try {
    build_kernel(spec_);
    FAIL() << "expected a BuildError";
  } catch (const BuildError& e) {
    EXPECT_EQ(e.stage(), "source");
    EXPECT_NE(std::string(e.what()).find("is no kernel tree"), std::string::npos) << e.what();
  }
}

TEST_F(KernelBuildTest, EveryInputChangesTheHash) {
  const auto base = inputs_hash(spec_);
  EXPECT_EQ(inputs_hash(spec_), base);
  spit(dir_ + "/user.config", "CONFIG_FUSE_FS=y\n");
  auto with_fragment = spec_;
  with_fragment.config_fragments = {read_input_file(dir_ + "/user.config", "config")};
  EXPECT_NE(inputs_hash(with_fragment), base);
  auto with_patch = spec_;
  with_patch.patches = {read_input_file(dir_ + "/p1.patch")};
  const auto patched = inputs_hash(with_patch);
  EXPECT_NE(patched, base);
  spit(dir_ + "/p1.patch", slurp(dir_ + "/p1.patch") + "\n");
  with_patch.patches = {read_input_file(dir_ + "/p1.patch")};
  EXPECT_NE(inputs_hash(with_patch), patched);
  spit(src_ + "/fs/extra.c", "x\n");
  EXPECT_NE(inputs_hash(spec_), base) << "a changed source tree is a new input";
}

TEST_F(KernelBuildTest, MissingInputsAreClearErrors) {
  spec_.source = dir_ + "/nowhere";
  EXPECT_THROW(inputs_hash(spec_), BuildError);
  spec_.source = dir_ + "/base.config";
  try {
    inputs_hash(spec_);
    FAIL();
  } catch (const BuildError& e) {
    EXPECT_NE(std::string(e.what()).find("neither a folder nor a tarball"), std::string::npos);
  }
}

TEST(KernelBuildText, MissingOptionsComparesValues) {
  const std::string frag = "# comment\nCONFIG_A=y\nCONFIG_B=8\nCONFIG_C=y\n# CONFIG_D is not set\n";
  const std::string cfg = "CONFIG_A=y\nCONFIG_B=4\n# CONFIG_C is not set\n";
  EXPECT_EQ(missing_options(frag, cfg), (std::vector<std::string>{"CONFIG_B=8", "CONFIG_C=y"}));
  EXPECT_TRUE(missing_options("CONFIG_A=y\n", "CONFIG_A=y\n").empty());
}

TEST(KernelBuildText, TreeVersionReadsKbuildsOwnLines) {
  const auto v = tree_version(
      "# SPDX-License-Identifier: GPL-2.0\nVERSION = 6\nPATCHLEVEL = 12\nSUBLEVEL = 118\nEXTRAVERSION =\n"
      "NAME = Baby Opossum Posse\n\nSUBLEVEL = 9\n");
  ASSERT_TRUE(v.has_value());
  EXPECT_EQ(v->str(), "6.12.118");
  EXPECT_FALSE(v->older_than(6, 1));
  EXPECT_TRUE(tree_version("VERSION = 5\nPATCHLEVEL = 15\nSUBLEVEL = 0\n")->older_than(6, 1));
  EXPECT_FALSE(tree_version("VERSION = 7\nPATCHLEVEL = 0\n")->older_than(6, 1));
  EXPECT_EQ(tree_version("VERSION=7\nPATCHLEVEL=1\n")->str(), "7.1.0");
  EXPECT_FALSE(tree_version("VERSION = 6\n").has_value());
  EXPECT_FALSE(tree_version("VERSION = six\nPATCHLEVEL = 1\n").has_value());
  EXPECT_FALSE(tree_version("VERSION = 6\nPATCHLEVEL = 99999999999\n").has_value());
  EXPECT_FALSE(tree_version("").has_value());
}

// The version of a source, from a folder's Makefile or a tarball's first
// top-level one; a source with none is a clear error.
TEST_F(KernelBuildTest, TheSourcesVersionIsReadFromAFolderOrATarball) {
  EXPECT_EQ(source_version(src_).str(), "6.1.0");
  const std::string tarball = dir_ + "/linux.tar.xz";
  ASSERT_EQ(std::system(("tar -C " + dir_ + " -cJf " + tarball + " linux").c_str()), 0);
  EXPECT_EQ(source_version(tarball).str(), "6.1.0");
  spit(dir_ + "/other/README", "no Makefile here\n");
  EXPECT_THROW(source_version(dir_ + "/other"), BuildError);
  const std::string empty = dir_ + "/other.tar.gz";
  ASSERT_EQ(std::system(("tar -C " + dir_ + " -czf " + empty + " other").c_str()), 0);
  EXPECT_THROW(source_version(empty), BuildError);
}

TEST(KernelBuildText, TailLines) {
  EXPECT_EQ(tail_lines("a\nb\nc\n", 2), "b\nc\n");
  EXPECT_EQ(tail_lines("a\nb\nc", 2), "b\nc");
  EXPECT_EQ(tail_lines("a\n", 5), "a\n");
  EXPECT_EQ(tail_lines("", 3), "");
}

// --widen's series: the folder's .patch files in name order, nothing else;
// a missing or empty folder is a clear error, not an unwidened kernel.
// The series is the patches of the newest line's folder the tree is not
// older than, in name order; a folder name that is no line is ignored.
TEST_F(KernelBuildTest, TheWidenSeriesIsThePatchesOfItsLinesFolderInOrder) {
  const std::string w = dir_ + "/widen";
  spit(w + "/6.1/0002-b.patch", "b");
  spit(w + "/6.1/0001-a.patch", "a");
  spit(w + "/6.1/README", "not a patch");
  spit(w + "/6.12/0001-c.patch", "c");
  spit(w + "/notes/0001-x.patch", "x");
  const std::vector<std::string> six_one = {w + "/6.1/0001-a.patch", w + "/6.1/0002-b.patch"};
  EXPECT_EQ(widen_series({6, 1, 192}, w), six_one);
  EXPECT_EQ(widen_series({6, 11, 0}, w), six_one);
  EXPECT_EQ(widen_series({6, 12, 118}, w), (std::vector<std::string>{w + "/6.12/0001-c.patch"}));
  EXPECT_EQ(widen_series({7, 1, 5}, w), (std::vector<std::string>{w + "/6.12/0001-c.patch"}));
  try {
    widen_series({5, 15, 0}, w);
    ADD_FAILURE() << "no error for a version no line fits";
  } catch (const BuildError& e) {
    EXPECT_NE(std::string(e.what()).find("no widening series fits Linux 5.15.0"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("6.1, 6.12"), std::string::npos) << e.what();
  }
  sfs::create_directories(dir_ + "/empty/6.1");
  EXPECT_THROW(widen_series({6, 1, 0}, dir_ + "/empty"), BuildError);
  try {
    widen_series({6, 1, 0}, dir_ + "/missing");
    ADD_FAILURE() << "no error for a missing folder";
  } catch (const BuildError& e) {
    EXPECT_EQ(e.stage(), "patch");
    EXPECT_NE(std::string(e.what()).find("widening series"), std::string::npos) << e.what();
  }
}

// build_and_store never throws for a failed build: the result names the
// stage and records the series as given, sha256 and subject included.
TEST_F(KernelBuildTest, BuildAndStoreRecordsAFailedSeriesFully) {
  spec_.patches = {read_input_file(dir_ + "/p2.patch"), read_input_file(dir_ + "/p1.patch")};  // p2 needs p1 first
  const v1::KernelBuildResult r = build_and_store(spec_);
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(r.failed_stage(), "patch");
  EXPECT_NE(r.error().find("\"p2.patch\" does not apply"), std::string::npos) << r.error();
  EXPECT_NE(r.log_tail().find("FAILED"), std::string::npos) << r.log_tail();
  ASSERT_EQ(r.patches_size(), 2);
  EXPECT_EQ(r.patches(0).name(), "p2.patch");
  EXPECT_EQ(r.patches(0).sha256(), sha256_of_file(dir_ + "/p2.patch"));
  EXPECT_EQ(r.patches(1).subject(), "[PATCH] first");
  EXPECT_TRUE(r.vmlinux_sha256().empty());
}

// The toy "vmlinux" is text, which the kernel store refuses: a failure of the
// store stage, after a build that worked.
TEST_F(KernelBuildTest, BuildAndStoreFailsAtTheStoreForWhatIsNoKernelImage) {
  const v1::KernelBuildResult r = build_and_store(spec_);
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(r.failed_stage(), "store");
  EXPECT_FALSE(r.error().empty());
  EXPECT_EQ(r.release(), "6.1.0-toy");
  EXPECT_FALSE(r.inputs_hash().empty());
  EXPECT_TRUE(r.vmlinux_sha256().empty());
  EXPECT_EQ(builds(), 1);
}

// ---- the build sandbox (issue 41: a builder that read any file) ----

// A toy tree whose bzImage step probes what a hostile Makefile could reach,
// each probe's answer in a file of the object folder.
const char* const kProbeMakefile = R"mk(
allnoconfig:
	mkdir -p $(O)
	grep '^CONFIG_' $(KCONFIG_ALLCONFIG) > $(O)/.config
bzImage:
	mkdir -p $(O)/arch/x86/boot $(O)/include/config
	id -un > $(O)/probe-user
	-cat $(SECRET) > $(O)/probe-secret 2>&1
	-cat $(CACHE)/kbuild/out/*/build.log > $(O)/probe-cache 2>&1
	-bash -c 'echo hello > /dev/tcp/127.0.0.1/$(PORT) && echo reached' > $(O)/probe-net 2>&1
	-touch $(ESCAPE) > $(O)/probe-write 2>&1
	cp fs/namei.c $(O)/vmlinux
	cp fs/namei.c $(O)/arch/x86/boot/bzImage
	echo 6.1.0-toy > $(O)/include/config/kernel.release
)mk";

class BuildSandboxTest : public KernelBuildTest {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "the build sandbox needs root";
    KernelBuildTest::SetUp();
    // The build user passes through the test folder to the cache (mkdtemp
    // made it 0700), as it does through /var/cache.
    sfs::permissions(dir_, sfs::perms::others_exec, sfs::perm_options::add);
    // A listener on the host's loopback: the network a build must not reach.
    listener_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ASSERT_EQ(::bind(listener_, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
    ASSERT_EQ(::listen(listener_, 4), 0);
    socklen_t len = sizeof addr;
    ::getsockname(listener_, reinterpret_cast<sockaddr*>(&addr), &len);
    const std::string port = std::to_string(ntohs(addr.sin_port));
    spit(dir_ + "/secret", "TOPSECRET-4242\n");
    sfs::permissions(dir_ + "/secret", sfs::perms::owner_read | sfs::perms::owner_write);
    // The probe's targets ride in the Makefile (the sandbox clears the environment).
    spit(src_ + "/Makefile", "VERSION = 6\nPATCHLEVEL = 1\nSECRET := " + dir_ + "/secret\nCACHE := " + spec_.cache_dir + "\nPORT := " + port +
                                 "\nESCAPE := " + dir_ + "/escaped\n" + kProbeMakefile);
  }
  void TearDown() override {
    if (listener_ >= 0) ::close(listener_);
    KernelBuildTest::TearDown();
  }
  std::string probe(const BuildResult& r, const std::string& name) {
    for (auto& e : sfs::recursive_directory_iterator(spec_.cache_dir + "/kbuild/src"))
      if (e.path().filename() == "probe-" + name) return slurp(e.path().string());
    ADD_FAILURE() << "no probe-" << name << " (log: " << slurp(r.build_log) << ")";
    return "";
  }
  int listener_ = -1;
};

// Positive control: without the sandbox (as root) every probe reaches its
// target, so the probes can fire.
TEST_F(BuildSandboxTest, WithoutTheSandboxTheProbesReachEverything) {
  build_kernel(spec_);  // a first build, so the second finds a log in the cache
  spit(src_ + "/fs/namei.c", "line one\nline two, again\n");
  const BuildResult r = build_kernel(spec_);
  EXPECT_EQ(probe(r, "user"), "root\n");
  EXPECT_EQ(probe(r, "secret"), "TOPSECRET-4242\n");
  EXPECT_NE(probe(r, "cache").find("$ make"), std::string::npos) << probe(r, "cache");
  EXPECT_NE(probe(r, "net").find("reached"), std::string::npos) << probe(r, "net");
  EXPECT_TRUE(sfs::exists(dir_ + "/escaped"));
}

// In the sandbox the same Makefile runs as the build user, reads no secret
// and no cache, reaches no network, writes nothing outside its tree and
// objects, and what it writes is not world-readable.
TEST_F(BuildSandboxTest, InTheSandboxAHostileMakefileReachesNothing) {
  spec_.sandbox.enabled = true;
  build_kernel(spec_);
  spit(src_ + "/fs/namei.c", "line one\nline two, again\n");
  const BuildResult r = build_kernel(spec_);
  EXPECT_EQ(probe(r, "user"), std::string(kBuildUser) + "\n");
  EXPECT_EQ(probe(r, "secret").find("TOPSECRET"), std::string::npos) << probe(r, "secret");
  EXPECT_EQ(probe(r, "cache").find("$ make"), std::string::npos) << probe(r, "cache");
  EXPECT_EQ(probe(r, "net").find("reached"), std::string::npos) << probe(r, "net");
  EXPECT_FALSE(sfs::exists(dir_ + "/escaped"));
  EXPECT_EQ(slurp(r.build_log).find("TOPSECRET"), std::string::npos);
  EXPECT_NE(slurp(r.build_log).find("build sandbox as " + std::string(kBuildUser)), std::string::npos);
  // Nothing the build left is world-readable: the tree, the objects, the log, the record.
  std::vector<std::string> readable;
  for (const auto* top : {"/kbuild/src", "/kbuild/out"})
    for (auto& e : sfs::recursive_directory_iterator(spec_.cache_dir + top))
      if (!e.is_symlink() && (e.status().permissions() & sfs::perms::others_read) != sfs::perms::none)
        readable.push_back(e.path().string());
  std::string list;
  for (const auto& r : readable) list += "\n  " + r;
  EXPECT_TRUE(readable.empty()) << "world-readable:" << list;
}

// A tree a root build left (an older Leapfrog) is handed to the build user,
// and builds in the sandbox.
TEST_F(BuildSandboxTest, ATreeARootBuildLeftBuildsInTheSandbox) {
  build_kernel(spec_);
  spec_.sandbox.enabled = true;
  spec_.patches = {read_input_file(dir_ + "/p1.patch")};
  const BuildResult r = build_kernel(spec_);
  EXPECT_FALSE(r.cached);
  EXPECT_EQ(slurp(r.vmlinux), "line one\nline TWO\nline three\n");
  EXPECT_EQ(probe(r, "user"), std::string(kBuildUser) + "\n");
}

// A sandbox without its user says so, before anything runs.
TEST(BuildSandbox, AMissingBuildUserIsAClearError) {
  if (::geteuid() != 0) GTEST_SKIP() << "the build sandbox needs root";
  SandboxConfig c;
  c.enabled = true;
  c.user = "leapfrog-no-such-user";
  try {
    BuildSandbox sandbox(c, "/nonexistent");
    FAIL() << "expected a BuildError";
  } catch (const BuildError& e) {
    EXPECT_EQ(e.stage(), "sandbox");
    EXPECT_NE(std::string(e.what()).find("no system user \"leapfrog-no-such-user\""), std::string::npos)
        << e.what();
  }
}

// ---- source names under source roots ----

TEST(SourceRoots, ANameResolvesInsideItsRootAndNowhereElse) {
  char tmpl[] = "/tmp/leapfrog-roots-test-XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl;
  spit(dir + "/roots/a/linux.tar.xz", "x");
  spit(dir + "/roots/b/trees/linux/Makefile", "x");
  spit(dir + "/outside/secret.tar.xz", "x");
  sfs::create_symlink(dir + "/outside", dir + "/roots/a/escape");
  const std::vector<std::string> roots = {dir + "/roots/a", dir + "/roots/b"};
  EXPECT_EQ(resolve_source("linux.tar.xz", roots), dir + "/roots/a/linux.tar.xz");
  EXPECT_EQ(resolve_source("trees/linux", roots), dir + "/roots/b/trees/linux");
  auto error_of = [&](const std::string& name) {
    try {
      resolve_source(name, roots);
      return std::string();
    } catch (const BuildError& e) {
      return std::string(e.what());
    }
  };
  EXPECT_NE(error_of("escape/secret.tar.xz").find("resolves outside its source root"), std::string::npos);
  EXPECT_NE(error_of("../outside/secret.tar.xz").find("\"..\" component"), std::string::npos);
  EXPECT_NE(error_of(dir + "/outside/secret.tar.xz").find("absolute path"), std::string::npos);
  EXPECT_NE(error_of("missing.tar.xz").find("is in no source root"), std::string::npos);
  EXPECT_NE(error_of("").find("no source"), std::string::npos);
  sfs::remove_all(dir);
}

v1::KernelBuild toy_build() {
  v1::KernelBuild b;
  b.set_label("toy");
  b.set_source("linux");
  b.add_patch_files()->set_name("0001-first.patch");
  b.add_patch_files()->set_name("0002-second.patch");
  b.set_cmdline("leapfrog_planted=0");
  return b;
}

TEST(BuiltKernel, AReadyKernelCarriesTheStoredImage) {
  v1::KernelBuildResult r;
  r.set_ok(true);
  r.set_inputs_hash("abc");
  r.set_release("6.1.0-lfabcdef01");
  r.set_vmlinux_sha256("0123");
  r.set_version("6.1.0-lfabcdef01 (gcc) #1");
  *r.mutable_build_time() = duration_of_seconds(12.5);
  r.set_log_path("/cache/kbuild/out/abc/build.log");
  auto* p = r.add_patches();
  p->set_name("0001-first.patch");
  p->set_sha256("ff");
  p->set_subject("[PATCH] first");
  const v1::Kernel k = built_kernel(toy_build(), r);
  EXPECT_EQ(k.label(), "toy");
  EXPECT_EQ(k.status(), v1::KERNEL_STATUS_READY);
  EXPECT_EQ(k.source(), "build of linux + 0001-first.patch + 0002-second.patch");
  EXPECT_EQ(k.cmdline(), "leapfrog_planted=0");
  EXPECT_EQ(k.release(), "6.1.0-lfabcdef01");
  EXPECT_EQ(k.sha256(), "0123");
  EXPECT_EQ(k.version(), "6.1.0-lfabcdef01 (gcc) #1");
  EXPECT_EQ(k.inputs_hash(), "abc");
  EXPECT_EQ(ns_of(k.build_time()), 12'500'000'000);
  EXPECT_EQ(k.build_log_path(), "/cache/kbuild/out/abc/build.log");
  ASSERT_EQ(k.patches_size(), 1);
  EXPECT_EQ(k.patches(0).subject(), "[PATCH] first");
  EXPECT_EQ(k.patches(0).sha256(), "ff");
}

TEST(BuiltKernel, AFailedBuildSaysWhichStageAndKeepsTheLog) {
  v1::KernelBuildResult r;
  r.set_failed_stage("patch");
  r.set_error("patch \"0002-second.patch\" does not apply");
  r.set_log_tail("Hunk #1 FAILED at 1.\n");
  r.set_release("ignored on failure");
  *r.mutable_build_time() = duration_of_seconds(3);
  const v1::Kernel k = built_kernel(toy_build(), r);
  EXPECT_EQ(k.status(), v1::KERNEL_STATUS_BUILD_FAILURE);
  EXPECT_EQ(k.version(), "patch failed: patch \"0002-second.patch\" does not apply");
  EXPECT_EQ(k.build_log_tail(), "Hunk #1 FAILED at 1.\n");
  EXPECT_EQ(k.release(), "");
  EXPECT_EQ(k.sha256(), "");
  EXPECT_FALSE(k.has_build_time());
  // No series in the result (the agent failed before the build): the build's names.
  ASSERT_EQ(k.patches_size(), 2);
  EXPECT_EQ(k.patches(0).name(), "0001-first.patch");
  EXPECT_EQ(k.patches(1).name(), "0002-second.patch");
}

}  // namespace
}  // namespace leapfrog::kbuild
