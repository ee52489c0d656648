#include "scenarios/catalogue/common.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace leapfrog::catalogue {

static fs::SetupError setup_error(const std::string& what, const std::string& path) {
  return fs::SetupError(what + " \"" + path + "\": " + std::strerror(errno));
}

void DiskTree::mkdir(const std::string& rel, mode_t mode) const {
  mkdir_at(s(rel), mode);
}

void DiskTree::file(const std::string& rel, mode_t mode, const std::string& tag) const {
  file_at(s(rel), mode, tag);
}

void mkdir_at(const std::string& p, mode_t mode) {
  if (::mkdir(p.c_str(), mode) != 0) throw setup_error("mkdir", p);
  if (::chmod(p.c_str(), mode) != 0) throw setup_error("chmod", p);
}

void file_at(const std::string& p, mode_t mode, const std::string& tag) {
  const int fd = ::open(p.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
  if (fd < 0) throw setup_error("create", p);
  const ssize_t n = ::write(fd, tag.data(), tag.size());
  ::close(fd);
  if (n != static_cast<ssize_t>(tag.size())) throw setup_error("write", p);
  if (::chmod(p.c_str(), mode) != 0) throw setup_error("chmod", p);
}

void DiskTree::symlink(const std::string& target, const std::string& rel) const {
  const std::string p = s(rel);
  if (::symlink(target.c_str(), p.c_str()) != 0) throw setup_error("symlink", p);
}

static Query make_query(const char* op, NodeId start, const std::string& path, uint8_t access) {
  Query q;
  q.op = op;
  q.start = start;
  q.final_access = access;
  size_t i = 0;
  while (i < path.size()) {
    size_t j = path.find('/', i);
    if (j == std::string::npos) j = path.size();
    if (j > i) q.path.push_back(path.substr(i, j - i));
    i = j + 1;
  }
  return q;
}

QueryTemplate stat_query(NodeId start, const std::string& path, int dirfd) {
  return QueryTemplate{make_query(dirfd >= 0 ? "fstatat" : "stat", start, path, 0), nullptr,
                       LookupCall::Stat, dirfd >= 0 ? dirfd : AT_FDCWD, path};
}

QueryTemplate access_query(NodeId start, const std::string& path, int dirfd) {
  return QueryTemplate{make_query(dirfd >= 0 ? "faccessat" : "access", start, path, kMayRead),
                       nullptr, LookupCall::Access, dirfd >= 0 ? dirfd : AT_FDCWD, path};
}

QueryTemplate open_query(NodeId start, const std::string& path, int dirfd) {
  return QueryTemplate{make_query(dirfd >= 0 ? "openat" : "open", start, path, kMayRead), nullptr,
                       LookupCall::Open, dirfd >= 0 ? dirfd : AT_FDCWD, path};
}

void add_query_mix(RacePlan& plan, NodeId start, const std::string& path, int dirfd) {
  if (plan.query_ops & kOpStat) plan.queries.push_back(stat_query(start, path, dirfd));
  if (plan.query_ops & kOpAccess) plan.queries.push_back(access_query(start, path, dirfd));
  if (plan.query_ops & kOpOpen) plan.queries.push_back(open_query(start, path, dirfd));
}

ParamSpec ops_param() {
  return {"ops", kOpStat | kOpAccess | kOpOpen, 1, kOpStat | kOpAccess | kOpOpen,
          "lookups in the observers' mix, a bitmask: 1 stat, 2 access, 4 open"};
}

ParamSpec mutate_pct_param() {
  return {"mutate_pct", 50, 1, 100, "chance in % that the mutator acts in a round"};
}

RacePlan new_plan(const RunContext& ctx) {
  RacePlan plan{TreeModel(mode_attr(0755)), {}, 1.0, {}, {}, {}, {}};
  plan.mutate_probability = static_cast<double>(ctx.param("mutate_pct")) / 100.0;
  if (ctx.params.count("ops")) plan.query_ops = static_cast<uint32_t>(ctx.param("ops"));
  return plan;
}

Chain build_chain(const DiskTree& disk, TreeModel& model, int depth,
                  const std::function<mode_t(int)>& mode_of) {
  Chain c;
  NodeId dir = model.root();
  std::string path;
  for (int i = 0; i < depth; ++i) {
    path += (i ? "/d" : "d") + std::to_string(i);
    const mode_t mode = mode_of(i);
    disk.mkdir(path, mode);
    dir = model.add_dir(dir, "d" + std::to_string(i), mode_attr(mode));
    c.dirs.push_back(dir);
    c.dir_paths.push_back(disk.m(path));
  }
  c.file = path + "/f";
  disk.file(c.file, 0644, "f");
  identify(model, model.add_file(dir, "f", mode_attr(0644)), disk.l(c.file));
  return c;
}

MutationTemplate chmod_template(const TreeModel& model, NodeId n, const std::string& path,
                                mode_t mode) {
  return {model.chmod(n, mode_attr(mode)),
          [path, mode] { return ::chmod(path.c_str(), mode) == 0 ? 0 : errno; },
          {}};
}

void assign_observers(RacePlan& plan, const RunContext& ctx) {
  plan.observers.assign(ctx.observers, ctx.opts.observer);
  plan.observer_cwd = ctx.ws.lookup_root();
}

Attr mode_attr(mode_t mode, uint32_t uid, uint32_t gid) {
  return Attr{static_cast<uint32_t>(mode), uid, gid, {}};
}

int open_dirfd(const std::string& path) {
  const int fd = ::open(path.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) throw setup_error("open dirfd", path);
  return fd;
}

}  // namespace leapfrog::catalogue
