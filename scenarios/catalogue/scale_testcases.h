#pragma once
// lookup-scale's testcases: will-it-scale's lseek, readseek, open, unlink and
// pread families under their own names and with the same per-iteration work,
// plus the access/stat lookups will-it-scale lacks. Each names its files,
// opens them per task, and runs its loop until told to stop.

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace leapfrog::catalogue::scale {

// What one iteration does.
enum class Work {
  Access,       // access(path, R_OK)
  Stat,         // stat(path)
  Lseek,        // lseek(fd, offset, SEEK_SET)
  ReadSeek,     // lseek(fd, offset, SEEK_SET) + read(fd, 4096)
  Pread,        // pread(fd, 4096, offset)
  OpenClose,    // close(open(path, O_RDWR))
  CreateUnlink  // close(open(path, O_RDWR | O_CREAT, 0600)) + unlink(path)
};

// Which file each task works on.
enum class Where {
  LookupSame,      // access/stat: one file at depth N in the root-built tree
  LookupSeparate,  // access/stat: a file per task beside it
  Same,            // one file the point prepares, opened by every task
  Separate,        // a file per task, all in the point's folder
  Private,         // a file each task creates, fills and unlinks, keeping it open
  SeparateDirs     // a file per task, each in its own folder
};

struct Testcase {
  const char* name;
  const char* description;
  Work work;
  Where where;
  int open_flags;      // fd-based work: how each task opens its file
  bool per_task_page;  // the file holds a page per task; task t works at page t
};

inline constexpr int kTestcaseCount = 17;
extern const Testcase kTestcases[kTestcaseCount];
// nullptr when no testcase has that name.
const Testcase* find_testcase(std::string_view name);

// What one task's loop works on.
struct TaskFiles {
  int fd = -1;
  std::string path;  // relative to the cwd
  off_t offset = 0;
};

// The files of one point, for `tasks` tasks, under the folder `dir`
// (relative to the cwd, created here and removed with everything in it by
// the destructor). `same` and `separate` are the lookup tree's paths. Throws
// std::system_error.
class PointFiles {
 public:
  PointFiles(const Testcase& tc, std::string dir, uint32_t tasks, std::string same,
             std::vector<std::string> separate);
  ~PointFiles();
  PointFiles(const PointFiles&) = delete;
  PointFiles& operator=(const PointFiles&) = delete;

  // Opens task `task`'s file as the testcase says (in the task itself, since
  // will-it-scale's tasks open their own). Throws std::system_error.
  TaskFiles open_task(uint32_t task) const;
  // Closes what open_task opened.
  static void close_task(TaskFiles& f);

 private:
  const Testcase& tc_;
  std::string dir_, same_;
  std::vector<std::string> separate_;
  uint32_t tasks_;
};

// Runs the testcase's iteration until `stop` is set, storing the iteration
// count into `count` after each one (as will-it-scale does). Returns 0, or the
// errno of the first failed iteration (the loop then ends).
int run_loop(const Testcase& tc, const TaskFiles& f, std::atomic<uint64_t>& count,
             const std::atomic<uint32_t>& stop);

}  // namespace leapfrog::catalogue::scale
