#pragma once
// Tests: a temporary folder every user can enter (PostgreSQL runs as the
// `postgres` user when tests run as root, so no parent may be 0700).

#include <stdlib.h>
#include <sys/stat.h>

#include <filesystem>
#include <stdexcept>
#include <string>

namespace leapfrog::coord::testing {

class TestDir {
 public:
  TestDir() {
    char path[] = "/var/tmp/leapfrog-test-XXXXXX";
    if (mkdtemp(path) == nullptr) throw std::runtime_error("mkdtemp under /var/tmp failed");
    chmod(path, 0755);
    path_ = path;
  }
  ~TestDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TestDir(const TestDir&) = delete;
  TestDir& operator=(const TestDir&) = delete;

  const std::string& path() const { return path_; }
  std::string operator/(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

}  // namespace leapfrog::coord::testing
