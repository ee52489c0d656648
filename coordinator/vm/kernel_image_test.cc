// Kernel image inspection and vmlinux extraction on the real Debian kernel
// (skipped without one), on a damaged copy, and on files that are no kernel.

#include "common/kernel/kernel_image.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>

#include "coordinator/pg/test_dir.h"
#include "tests/process_util.h"

namespace leapfrog::vm {
namespace {

namespace stdfs = std::filesystem;
using coord::testing::TestDir;


TEST(KernelImage, ReadsTheVersionAndExtractsACompleteVmlinux) {
  const std::string image = leapfrog::testing::stock_boot_kernel();
  if (image.empty()) GTEST_SKIP() << "no /boot/vmlinuz-6.1.*";
  const ImageInfo info = inspect_image(image);
  EXPECT_EQ(info.format, ImageFormat::BzImage);
  EXPECT_EQ(info.release, stdfs::path(image).filename().string().substr(8));
  EXPECT_EQ(info.sha256.size(), 64u);
  TestDir dir;
  std::string why;
  ASSERT_TRUE(extract_vmlinux(image, dir / "vmlinux", why)) << why;
  const ImageInfo elf = inspect_image(dir / "vmlinux");
  EXPECT_EQ(elf.format, ImageFormat::Elf);
  EXPECT_EQ(elf.release, info.release);
}

TEST(KernelImage, ADamagedPayloadExtractsNothing) {
  const std::string image = leapfrog::testing::stock_boot_kernel();
  if (image.empty()) GTEST_SKIP() << "no /boot/vmlinuz-6.1.*";
  TestDir dir;
  const std::string broken = dir / "vmlinuz";
  stdfs::copy_file(image, broken);
  {
    std::fstream f(broken, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(stdfs::file_size(broken) / 2));
    const std::string junk(1 << 16, '\x5a');
    f.write(junk.data(), static_cast<std::streamsize>(junk.size()));
  }
  // The header still reads: the image registers, and boots into a failure.
  EXPECT_EQ(inspect_image(broken).release, inspect_image(image).release);
  std::string why;
  EXPECT_FALSE(extract_vmlinux(broken, dir / "vmlinux", why));
  EXPECT_FALSE(why.empty());
  EXPECT_FALSE(stdfs::exists(dir / "vmlinux"));
}

TEST(KernelImage, RefusesFilesThatAreNoKernel) {
  TestDir dir;
  std::ofstream(dir / "text") << "not a kernel\n";
  EXPECT_THROW(inspect_image(dir / "text"), ImageError);
  EXPECT_THROW(inspect_image(dir / "missing"), ImageError);
  std::string why;
  EXPECT_FALSE(extract_vmlinux(dir / "text", dir / "out", why));
}

TEST(KernelImage, TheStoreKeepsWhatLoadReads) {
  const std::string image = leapfrog::testing::stock_boot_kernel();
  if (image.empty()) GTEST_SKIP() << "no /boot/vmlinuz-6.1.*";
  TestDir dir;
  const StoredKernel k = store_kernel(dir.path(), image, "");
  const StoredKernel back = load_kernel(dir.path(), k.sha256);
  EXPECT_EQ(back.release, k.release);
  EXPECT_EQ(back.vmlinux, k.vmlinux);
  EXPECT_FALSE(back.vmlinux.empty());
  EXPECT_EQ(back.modules, k.modules);
  EXPECT_THROW(load_kernel(dir.path(), std::string(64, '0')), ImageError);
}

// The token archive is checked with GNU cpio: it must read both archives of
// the initrd, as the kernel does, and find the token with mode 0600.
TEST(KernelImage, TheInitrdCarriesTheTokenAfterTheImage) {
  TestDir dir;
  const std::string stage = dir / "stage";
  stdfs::create_directories(stage + "/etc/leapfrog");
  std::ofstream(stage + "/init") << "#!/bin/sh\n";
  const std::string image = dir / "image.cpio";
  ASSERT_EQ(std::system(("cd " + stage + " && printf 'etc\\netc/leapfrog\\ninit\\n' | cpio --quiet -o -H newc -R 0:0 > " +
                         image)
                            .c_str()),
            0);
  const std::string initrd = dir / "initrd.cpio";
  write_initrd_with_token(image, "s3cret-token", initrd);
  EXPECT_EQ(stdfs::status(initrd).permissions() & stdfs::perms::all, stdfs::perms::owner_read | stdfs::perms::owner_write);
  // cpio stops at the first trailer; the second archive starts on the next
  // 512-byte block, where GNU cpio padded the first.
  const std::string out = dir / "out";
  stdfs::create_directories(out);
  const std::string both = "cd " + out + " && { cpio --quiet -id < " + initrd + " && dd if=" + initrd +
                           " bs=512 skip=$(( $(stat -c %s " + image + ") / 512 )) status=none | cpio --quiet -idu; }";
  ASSERT_EQ(std::system(both.c_str()), 0);
  std::ifstream token(out + "/etc/leapfrog/token");
  std::string line;
  std::getline(token, line);
  EXPECT_EQ(line, "s3cret-token");
  EXPECT_TRUE(stdfs::exists(out + "/init"));
  EXPECT_EQ(stdfs::status(out + "/etc/leapfrog/token").permissions() & stdfs::perms::all,
            stdfs::perms::owner_read | stdfs::perms::owner_write);
  EXPECT_THROW(write_initrd_with_token(dir / "missing.cpio", "t", dir / "x.cpio"), ImageError);
  EXPECT_FALSE(stdfs::exists(dir / "x.cpio.tmp"));
}

// An image on tmpfs and a run folder elsewhere: copy_file_range refuses
// between file systems of different kinds, and the copy must still happen.
TEST(KernelImage, TheInitrdIsWrittenAcrossFileSystems) {
  if (!stdfs::is_directory("/dev/shm")) GTEST_SKIP() << "no /dev/shm";
  TestDir dir;
  const std::string image = "/dev/shm/leapfrog-test-image-" + std::to_string(getpid()) + ".cpio";
  std::string bytes(300'000, 'x');
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<char>('a' + i % 26);
  std::ofstream(image, std::ios::binary) << bytes;
  const std::string initrd = dir / "initrd.cpio";
  write_initrd_with_token(image, "tok", initrd);
  stdfs::remove(image);
  std::ifstream in(initrd, std::ios::binary);
  std::string got((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ASSERT_GT(got.size(), bytes.size());
  EXPECT_EQ(got.substr(0, bytes.size()), bytes);
  EXPECT_NE(got.find("etc/leapfrog/token", bytes.size()), std::string::npos);
}

// The image script with a modules folder of the user's, which has no
// modules.dep or modules.builtin: it builds, and a second run finds the same
// image through its stat fast path. busybox stands in for the static agent
// (the script only needs a static executable).
TEST(VmImage, BuildsFromAModulesFolderWithoutModulesDep) {
  TestDir dir;
  const std::string mods = dir / "mods";
  stdfs::create_directories(mods);
  for (const auto& e : stdfs::recursive_directory_iterator("/lib/modules", stdfs::directory_options::skip_permission_denied)) {
    if (e.path().filename() == "virtio_net.ko") {
      stdfs::copy_file(e.path(), mods + "/virtio_net.ko");
      break;
    }
  }
  const std::string cmd = std::string("bash ") + LEAPFROG_IMAGE_SCRIPT +
                          " image --agent /bin/busybox --release test --cache " + (dir / "cache") + " --modules " +
                          mods + " 2>" + (dir / "err") + " >>" + (dir / "out");
  ASSERT_EQ(std::system(cmd.c_str()), 0) << std::ifstream(dir / "err").rdbuf();
  ASSERT_EQ(std::system(cmd.c_str()), 0) << std::ifstream(dir / "err").rdbuf();
  std::ifstream out(dir / "out");
  std::string first, second;
  std::getline(out, first);
  std::getline(out, second);
  EXPECT_EQ(first, second);
  EXPECT_TRUE(stdfs::exists(first)) << first;
  EXPECT_FALSE(stdfs::is_empty(dir / "cache/by-stat"));
  if (stdfs::exists(mods + "/virtio_net.ko")) {
    const std::string list = "cd " + (dir / "x") + " 2>/dev/null || mkdir " + (dir / "x") + " && cd " + (dir / "x") +
                             " && cpio --quiet -id < " + first + " && grep -qx virtio_net etc/leapfrog/modules";
    EXPECT_EQ(std::system(list.c_str()), 0);
  }
}

}  // namespace
}  // namespace leapfrog::vm
