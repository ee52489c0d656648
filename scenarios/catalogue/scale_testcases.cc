#include "scenarios/catalogue/scale_testcases.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <system_error>

namespace leapfrog::catalogue::scale {
namespace {

constexpr size_t kBufLen = 4096;

std::system_error sys_error(const std::string& what, const std::string& path) {
  return std::system_error(errno, std::generic_category(), what + " \"" + path + "\"");
}

size_t page_size() {
  return static_cast<size_t>(sysconf(_SC_PAGESIZE));
}

// Writes `bytes` zero bytes to fd, 4096 at a time.
void fill(int fd, size_t bytes, const std::string& path) {
  char zero[kBufLen] = {};
  while (bytes > 0) {
    const ssize_t n = ::write(fd, zero, std::min(bytes, sizeof zero));
    if (n <= 0) throw sys_error("write", path);
    bytes -= static_cast<size_t>(n);
  }
}

void make_file(const std::string& path, size_t bytes) {
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) throw sys_error("create", path);
  fill(fd, bytes, path);
  ::close(fd);
}

// One iteration at a time until stop; `op` returns false when it failed.
template <class Op>
int loop(std::atomic<uint64_t>& count, const std::atomic<uint32_t>& stop, Op op) {
  uint64_t n = 0;
  while (!stop.load(std::memory_order_relaxed)) {
    if (!op()) return errno ? errno : EIO;
    count.store(++n, std::memory_order_relaxed);
  }
  return 0;
}

}  // namespace

// One line each on what an iteration works on.
const Testcase kTestcases[kTestcaseCount] = {
    // Leapfrog's lookups; the first four keep their old `test` indices.
    {"access-same", "Same file access at depth N", Work::Access, Where::LookupSame, 0, false},
    {"access-separate", "Separate file access at depth N", Work::Access, Where::LookupSeparate, 0,
     false},
    {"stat-same", "Same file stat at depth N", Work::Stat, Where::LookupSame, 0, false},
    {"stat-separate", "Separate file stat at depth N", Work::Stat, Where::LookupSeparate, 0, false},
    // will-it-scale's.
    {"lseek1", "Separate file lseek", Work::Lseek, Where::Private, O_RDWR, false},
    {"lseek2", "Same file lseek", Work::Lseek, Where::Same, O_RDWR, false},
    {"readseek1", "Separate file seek+read", Work::ReadSeek, Where::Private, O_RDWR, false},
    {"readseek2", "Same file seek+read", Work::ReadSeek, Where::Same, O_RDWR, false},
    {"readseek3", "Same file seek+read to different offsets", Work::ReadSeek, Where::Same, O_RDONLY,
     true},
    {"open1", "Separate file open/close", Work::OpenClose, Where::Separate, 0, false},
    {"open2", "Separate file open/close in different directories", Work::OpenClose,
     Where::SeparateDirs, 0, false},
    {"open3", "Same file open/close", Work::OpenClose, Where::Same, 0, false},
    {"unlink1", "Separate file open/close/unlink", Work::CreateUnlink, Where::Separate, 0, false},
    {"unlink2", "Separate file open/close/unlink in different directories", Work::CreateUnlink,
     Where::SeparateDirs, 0, false},
    {"pread1", "Separate file pread", Work::Pread, Where::Private, O_RDWR, false},
    {"pread2", "Same file pread", Work::Pread, Where::Same, O_RDONLY, false},
    {"pread3", "Same file pread to different offsets", Work::Pread, Where::Same, O_RDONLY, true},
};
static_assert(sizeof kTestcases / sizeof kTestcases[0] == kTestcaseCount);

const Testcase* find_testcase(std::string_view name) {
  for (const auto& tc : kTestcases)
    if (name == tc.name) return &tc;
  return nullptr;
}

PointFiles::PointFiles(const Testcase& tc, std::string dir, uint32_t tasks, std::string same,
                       std::vector<std::string> separate)
    : tc_(tc),
      dir_(std::move(dir)),
      same_(std::move(same)),
      separate_(std::move(separate)),
      tasks_(tasks) {
  if (::mkdir(dir_.c_str(), 0700) != 0) throw sys_error("mkdir", dir_);
  switch (tc_.where) {
    case Where::LookupSame:
    case Where::LookupSeparate:
    case Where::Private:
      break;
    case Where::Same:
      if (tc_.work != Work::OpenClose)
        make_file(dir_ + "/f", tc_.per_task_page ? page_size() * tasks_ : kBufLen);
      else
        make_file(dir_ + "/f", 0);
      break;
    case Where::Separate:
      // unlink1's tasks create their own file every iteration.
      if (tc_.work == Work::OpenClose)
        for (uint32_t t = 0; t < tasks_; ++t) make_file(dir_ + "/f" + std::to_string(t), 0);
      break;
    case Where::SeparateDirs:
      for (uint32_t t = 0; t < tasks_; ++t) {
        const std::string d = dir_ + "/d" + std::to_string(t);
        if (::mkdir(d.c_str(), 0700) != 0) throw sys_error("mkdir", d);
        if (tc_.work == Work::OpenClose) make_file(d + "/f", 0);
      }
      break;
  }
}

PointFiles::~PointFiles() {
  std::error_code ec;
  std::filesystem::remove_all(dir_, ec);
}

TaskFiles PointFiles::open_task(uint32_t task) const {
  TaskFiles f;
  switch (tc_.where) {
    case Where::LookupSame:
      f.path = same_;
      break;
    case Where::LookupSeparate:
      f.path = separate_.at(task);
      break;
    case Where::Same:
      f.path = dir_ + "/f";
      break;
    case Where::Separate:
      f.path = dir_ + "/f" + std::to_string(task);
      break;
    case Where::SeparateDirs:
      f.path = dir_ + "/d" + std::to_string(task) + "/f";
      break;
    case Where::Private: {
      std::string tmpl = dir_ + "/p" + std::to_string(task) + ".XXXXXX";
      f.fd = ::mkostemp(tmpl.data(), O_CLOEXEC);
      if (f.fd < 0) throw sys_error("mkstemp", tmpl);
      fill(f.fd, kBufLen, tmpl);
      if (::unlink(tmpl.c_str()) != 0) throw sys_error("unlink", tmpl);
      return f;
    }
  }
  if (tc_.per_task_page) f.offset = static_cast<off_t>(page_size() * task);
  const bool fd_work =
      tc_.work == Work::Lseek || tc_.work == Work::ReadSeek || tc_.work == Work::Pread;
  if (fd_work) {
    f.fd = ::open(f.path.c_str(), tc_.open_flags | O_CLOEXEC);
    if (f.fd < 0) throw sys_error("open", f.path);
  }
  return f;
}

void PointFiles::close_task(TaskFiles& f) {
  if (f.fd >= 0) ::close(f.fd);
  f.fd = -1;
}

int run_loop(const Testcase& tc, const TaskFiles& f, std::atomic<uint64_t>& count,
             const std::atomic<uint32_t>& stop) {
  errno = 0;
  const char* path = f.path.c_str();
  const int fd = f.fd;
  const off_t off = f.offset;
  char buf[kBufLen];
  struct stat st;
  switch (tc.work) {
    case Work::Access:
      return loop(count, stop, [&] { return ::access(path, R_OK) == 0; });
    case Work::Stat:
      return loop(count, stop, [&] { return ::stat(path, &st) == 0; });
    case Work::Lseek:
      return loop(count, stop, [&] {
        ::lseek(fd, off, SEEK_SET);
        return true;
      });
    case Work::ReadSeek:
      return loop(count, stop, [&] {
        ::lseek(fd, off, SEEK_SET);
        return ::read(fd, buf, kBufLen) == static_cast<ssize_t>(kBufLen);
      });
    case Work::Pread:
      return loop(count, stop,
                  [&] { return ::pread(fd, buf, kBufLen, off) == static_cast<ssize_t>(kBufLen); });
    case Work::OpenClose:
      return loop(count, stop, [&] {
        const int o = ::open(path, O_RDWR);
        if (o < 0) return false;
        ::close(o);
        return true;
      });
    case Work::CreateUnlink:
      return loop(count, stop, [&] {
        const int o = ::open(path, O_RDWR | O_CREAT, 0600);
        if (o < 0) return false;
        ::close(o);
        return ::unlink(path) == 0;
      });
  }
  return EINVAL;
}

}  // namespace leapfrog::catalogue::scale
