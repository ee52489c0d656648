// The kernel JSON and the build log the kernel page serves: whole, capped to
// its last whole lines, absent, and refused outside the coordinator's cache
// (the path came from a client).

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>

#include "common/proto_time.h"
#include "coordinator/http/api.h"
#include "coordinator/http/api_json.h"
#include "coordinator/http/proto_json.h"

namespace leapfrog::coord {
namespace {

class BuildLogTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/leapfrog-http-test-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  // A file at `rel` below the test folder.
  std::string write(const std::string& rel, const std::string& text) {
    const std::string path = dir_ + "/" + rel;
    std::filesystem::create_directories(std::filesystem::path(path).parent_path());
    std::ofstream(path, std::ios::binary) << text;
    return path;
  }
  // The test folder is the cache; a log in its layout.
  std::string write_log(const std::string& text, const std::string& hash = "ab12") {
    return write("kbuild/out/" + hash + "/build.log", text);
  }
  std::string dir_;
};

TEST_F(BuildLogTest, ASmallLogIsServedWhole) {
  const std::string text = "  CC fs/namei.o\nfs/namei.c:3:9: error: 'X' undeclared\n";
  const auto j = build_log(dir_, write_log(text));
  EXPECT_TRUE(j["readable"].get<bool>());
  EXPECT_FALSE(j["truncated"].get<bool>());
  EXPECT_EQ(j["size"].get<uint64_t>(), text.size());
  EXPECT_EQ(j["text"].get<std::string>(), text);
}

TEST_F(BuildLogTest, ABigLogKeepsItsLastWholeLines) {
  std::string text;
  for (int i = 0; text.size() < 3 * kBuildLogCap; ++i) text += "line " + std::to_string(i) + "\n";
  text += "make: *** [Makefile:7: bzImage] Error 1\n";
  const auto j = build_log(dir_, write_log(text));
  const std::string served = j["text"].get<std::string>();
  EXPECT_TRUE(j["truncated"].get<bool>());
  EXPECT_EQ(j["size"].get<uint64_t>(), text.size());
  EXPECT_LE(served.size(), kBuildLogCap);
  EXPECT_GT(served.size(), kBuildLogCap - 64);
  EXPECT_EQ(served.rfind("line ", 0), 0u) << "starts mid-line: " << served.substr(0, 40);
  EXPECT_EQ(text.compare(text.size() - served.size(), served.size(), served), 0)
      << "not the end of the log";
}

TEST_F(BuildLogTest, AMissingLogIsNotReadableAndSaysWhy) {
  const std::string path = dir_ + "/kbuild/out/cd34/build.log";
  const auto j = build_log(dir_, path);
  EXPECT_FALSE(j["readable"].get<bool>());
  EXPECT_EQ(j["text"].get<std::string>(), "");
  EXPECT_NE(j["error"].get<std::string>().find(path), std::string::npos) << j.dump();
}

TEST_F(BuildLogTest, NoFileOutsideTheCacheIsRead) {
  const std::string secret = "root:$y$j9T$secret:19000:0:99999:7:::\n";
  const std::string cache = dir_ + "/cache";
  std::filesystem::create_directories(cache + "/kbuild/out");
  // Any file, a log of another cache, and paths that climb out of this one.
  const std::vector<std::string> paths = {
      write("shadow", secret),
      write("other/kbuild/out/ab12/build.log", secret),
      cache + "/kbuild/out/../../shadow",
      cache + "/kbuild/out/ab12/../../../../shadow",
      cache + "/kbuild/out/build.log",
  };
  for (const auto& p : paths) {
    const auto j = build_log(cache, p);
    EXPECT_FALSE(j["readable"].get<bool>()) << p;
    EXPECT_EQ(j["text"].get<std::string>(), "") << p;
    EXPECT_EQ(j["error"].get<std::string>().find("No such file"), std::string::npos)
        << "says whether " << p << " exists: " << j.dump();
  }
  EXPECT_FALSE(build_log("", write_log(secret))["readable"].get<bool>())
      << "a coordinator without a cache reads no log";
}

TEST_F(BuildLogTest, ASymlinkInTheCacheDoesNotLeadOut) {
  const std::string secret = "TOP SECRET\n";
  const std::string target = write("shadow", secret);
  std::filesystem::create_directories(dir_ + "/kbuild/out/ab12");
  std::filesystem::create_symlink(target, dir_ + "/kbuild/out/ab12/build.log");
  std::filesystem::create_directory_symlink(dir_ + "/elsewhere", dir_ + "/kbuild/out/cd34");
  write("elsewhere/build.log", secret);
  for (const std::string hash : {"ab12", "cd34"}) {
    const auto j = build_log(dir_, dir_ + "/kbuild/out/" + hash + "/build.log");
    EXPECT_FALSE(j["readable"].get<bool>()) << hash << ": " << j.dump();
    EXPECT_EQ(j["text"].get<std::string>(), "") << hash;
  }
  // Positive control: the same bytes as a real log are served.
  EXPECT_EQ(build_log(dir_, write_log(secret, "ef56"))["text"], secret);
}

// The kernel as every route prints it (protobuf's JSON mapping, shown()).
TEST(KernelJson, CarriesTheBuildRecordAndDefaultsToReady) {
  v1::Kernel k;
  k.set_label("lf-patched");
  auto* p = k.add_patches();
  p->set_name("0001-a.patch");
  p->set_sha256("ab12");
  p->set_subject("[PATCH] a");
  k.set_release("6.1.0-lf1");
  *k.mutable_build_time() = duration_of_seconds(12.5);
  nlohmann::json j = proto_json(shown(k));
  EXPECT_EQ(j["status"], "KERNEL_STATUS_READY")
      << "a kernel registered before builds had no status";
  ASSERT_EQ(j["patches"].size(), 1u);
  EXPECT_EQ(j["patches"][0]["name"], "0001-a.patch");
  EXPECT_EQ(j["patches"][0]["subject"], "[PATCH] a");
  EXPECT_EQ(j["release"], "6.1.0-lf1");
  EXPECT_EQ(j["build_time"], "12.500s") << "a Duration, as protobuf's JSON mapping prints it";
  k.set_status(v1::KERNEL_STATUS_BUILD_FAILURE);
  k.set_build_log_tail("error: x\n");
  j = proto_json(shown(k));
  EXPECT_EQ(j["status"], "KERNEL_STATUS_BUILD_FAILURE");
  EXPECT_EQ(j["build_log_tail"], "error: x\n");
}

}  // namespace
}  // namespace leapfrog::coord
