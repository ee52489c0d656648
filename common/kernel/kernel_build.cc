#include "common/kernel/kernel_build.h"

#include <fcntl.h>
#include <openssl/evp.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "common/bounds.h"
#include "common/hex.h"
#include "common/process.h"

namespace leapfrog::kbuild {

namespace sfs = std::filesystem;

namespace {

// Bumped when the way a kernel is built changes, so old cache entries are not reused.
constexpr const char* kRecipeVersion = "leapfrog-kbuild-1";
constexpr size_t kTailLines = 40;

class Sha256 {
 public:
  Sha256() : ctx_(EVP_MD_CTX_new(), EVP_MD_CTX_free) {
    EVP_DigestInit_ex(ctx_.get(), EVP_sha256(), nullptr);
  }
  void update(const void* data, size_t n) { EVP_DigestUpdate(ctx_.get(), data, n); }
  void update(const std::string& s) {
    update(s.data(), s.size());
    update("\0", 1);  // field separator: ("ab","c") and ("a","bc") differ
  }
  std::string hex() {
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int n = 0;
    EVP_DigestFinal_ex(ctx_.get(), md, &n);
    return hex_encode(md, n);
  }

 private:
  std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> ctx_;
};

std::string read_file(const std::string& path, const std::string& stage, const std::string& what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw BuildError(stage, "cannot read " + what + " \"" + path + "\"", "");
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Written whole (a temporary, then renamed), mode 0640: a build's files are
// not world-readable.
void write_file(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << text;
    if (!out) throw BuildError("source", "cannot write \"" + tmp + "\"", "");
  }
  sfs::permissions(tmp, sfs::perms::owner_read | sfs::perms::owner_write | sfs::perms::group_read);
  sfs::rename(tmp, path);
}

std::string tail_of_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  // Lines can be long (a compiler's): the tail stays within what AddKernel takes.
  return utf8_suffix(tail_lines(ss.str(), kTailLines), kMaxLogTailBytes);
}

// The build log, open for appending (mode 0640), for the tools' output.
class Log {
 public:
  explicit Log(std::string path)
      : path_(std::move(path)),
        fd_(::open(path_.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0640)) {
    if (fd_ < 0) throw BuildError("source", "cannot open the build log \"" + path_ + "\"", "");
  }
  ~Log() { ::close(fd_); }
  Log(const Log&) = delete;
  Log& operator=(const Log&) = delete;
  const std::string& path() const { return path_; }
  void line(const std::string& text) const {
    const std::string l = text + "\n";
    (void)!::write(fd_, l.data(), l.size());
  }
  // Runs argv in the sandbox with `binds` (stdin from `stdin_fd`), its
  // output appended; the exit code.
  int run(const BuildSandbox& sandbox, const std::vector<std::string>& argv,
          const std::vector<Bind>& binds, int stdin_fd = -1) const {
    show(argv);
    return sandbox.run(argv, binds, fd_, stdin_fd);
  }
  // Runs argv as this process (root), its output appended; the exit code.
  int run_here(const std::vector<std::string>& argv) const {
    show(argv);
    return run_logged_here(argv, fd_);
  }

 private:
  void show(const std::vector<std::string>& argv) const {
    std::string shown = "$";
    for (const auto& a : argv) shown += " " + a;
    line(shown);
  }
  std::string path_;
  int fd_;
};

// Runs argv and returns its stdout; "" if it fails.
std::string capture(const std::vector<std::string>& argv) {
  std::string text = capture_output(argv).value_or("");
  // Line by line, as the inputs hash has always taken it: the last line ends too.
  if (!text.empty() && text.back() != '\n') text += '\n';
  return text;
}

bool is_tarball(const std::string& path) {
  for (const char* ext : {".tar", ".tar.gz", ".tgz", ".tar.xz", ".txz", ".tar.bz2", ".tar.zst"}) {
    const std::string e = ext;
    if (path.size() > e.size() && path.compare(path.size() - e.size(), e.size(), e) == 0)
      return true;
  }
  return false;
}

// What identifies the source: a tarball's bytes, or a folder's files (path,
// size and modification time of each; the build copies the folder).
std::string source_id(const std::string& source) {
  std::error_code ec;
  if (sfs::is_regular_file(source, ec)) {
    if (!is_tarball(source)) {
      throw BuildError(
          "source",
          "source \"" + source +
              "\" is neither a folder nor a tarball (.tar, .tar.gz, .tar.xz, .tar.bz2)",
          "");
    }
    return "tar-" + sha256_of_file(source);
  }
  if (!sfs::is_directory(source, ec)) {
    throw BuildError("source", "source \"" + source + "\" does not exist", "");
  }
  if (!sfs::exists(sfs::path(source) / "Makefile") ||
      !sfs::exists(sfs::path(source) / "fs" / "namei.c")) {
    throw BuildError(
        "source",
        "\"" + source + "\" does not look like a Linux source tree (no Makefile or fs/namei.c)",
        "");
  }
  std::vector<std::string> entries;
  for (auto it = sfs::recursive_directory_iterator(
           source, sfs::directory_options::skip_permission_denied, ec);
       it != sfs::recursive_directory_iterator(); it.increment(ec)) {
    if (ec) break;
    const auto rel = sfs::relative(it->path(), source).string();
    if (rel == ".git" || rel.rfind(".git/", 0) == 0) {
      if (it->is_directory()) it.disable_recursion_pending();
      continue;
    }
    if (!it->is_regular_file(ec)) continue;
    const auto mtime = it->last_write_time(ec).time_since_epoch().count();
    entries.push_back(rel + ":" + std::to_string(it->file_size(ec)) + ":" + std::to_string(mtime));
  }
  std::sort(entries.begin(), entries.end());
  Sha256 h;
  for (const auto& e : entries) h.update(e);
  return "dir-" + h.hex();
}

std::string compiler_id() {
  std::string cc = capture({"gcc", "--version"});
  std::string ld = capture({"ld", "--version"});
  auto first = [](const std::string& s) { return s.substr(0, s.find('\n')); };
  return first(cc) + " / " + first(ld);
}

// `rel` under the checkout (build/bin/leapfrog -> <checkout>/rel), the
// installed share folder, or the current folder; "" if none exists.
std::string find_deploy_file(const std::string& rel, const std::string& installed) {
  std::vector<sfs::path> candidates;
  std::error_code ec;
  auto exe = sfs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    candidates.push_back(exe.parent_path().parent_path().parent_path() / rel);
    candidates.push_back(exe.parent_path().parent_path() / "share/leapfrog" / installed);
  }
  candidates.push_back(sfs::current_path(ec) / rel);
  for (const auto& c : candidates) {
    if (sfs::exists(c, ec)) return c.string();
  }
  return "";
}

std::string find_base_fragment(const BuildSpec& spec) {
  if (!spec.base_fragment.empty()) return spec.base_fragment;
  auto found = find_deploy_file("deploy/kernel/leapfrog.config", "leapfrog.config");
  if (found.empty()) {
    throw BuildError(
        "config",
        "cannot find Leapfrog's config fragment deploy/kernel/leapfrog.config: pass it explicitly",
        "");
  }
  return found;
}

}  // namespace

std::string patch_subject(const std::string& patch_text) {
  std::istringstream in(patch_text);
  std::string line;
  while (std::getline(in, line)) {
    // Within what AddKernel takes for a subject (common/bounds.h).
    if (line.rfind("Subject: ", 0) == 0) return utf8_prefix(line.substr(9), kMaxPatchSubjectBytes);
    if (line.rfind("--- ", 0) == 0) break;
  }
  return "";
}

namespace {

// Holds an exclusive flock on a file for the lifetime of the object.
class FileLock {
 public:
  explicit FileLock(const std::string& path)
      : fd_(::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600)) {
    if (fd_ < 0) throw BuildError("source", "cannot create the lock \"" + path + "\"", "");
    ::flock(fd_, LOCK_EX);
  }
  ~FileLock() { ::close(fd_); }
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;

 private:
  int fd_;
};

std::vector<std::string> read_lines(const std::string& path) {
  std::vector<std::string> out;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty()) out.push_back(line);
  }
  return out;
}

std::string join_lines(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += x + "\n";
  return s;
}

struct SourceTree {
  sfs::path root;     // kbuild/src/<id>
  sfs::path tree;     // root/tree
  sfs::path obj;      // root/obj
  sfs::path patches;  // root/patches: copies of applied patches, by sha256
  sfs::path applied;  // root/applied: sha256 per line, in order
};

// A folder made here (root) for the build user to write into: theirs, 0750.
void make_build_folder(const BuildSandbox& sandbox, const sfs::path& dir) {
  sfs::create_directories(dir);
  sfs::permissions(dir, sfs::perms::owner_all | sfs::perms::group_read | sfs::perms::group_exec);
  sandbox.hand_over(dir.string());
}

void unpack(const BuildSpec& spec, const BuildSandbox& sandbox, const SourceTree& st,
            const Log& log, const Progress& progress) {
  std::error_code ec;
  sfs::remove_all(st.tree, ec);
  sfs::remove_all(st.obj, ec);  // old objects would look newer than the fresh sources
  sfs::remove(st.applied, ec);
  const sfs::path tmp = st.root / "tree.unpacking";
  sfs::remove_all(tmp, ec);
  make_build_folder(sandbox, tmp);
  int rc;
  if (sfs::is_regular_file(spec.source)) {
    // The sandbox reads the tarball from stdin, opened here: the build user
    // needs no right on its folder. tar cannot guess the compression there.
    if (progress) progress("unpacking " + spec.source);
    std::vector<std::string> tar = {"tar", "-x", "-f", "-", "-C", tmp.string(), "--strip-components=1",
                                    "--no-same-owner", "--no-same-permissions"};
    for (const auto& [ext, flag] : std::vector<std::pair<std::string, std::string>>{
             {".gz", "-z"}, {".tgz", "-z"}, {".xz", "-J"}, {".txz", "-J"}, {".bz2", "-j"}, {".zst", "--zstd"}})
      if (spec.source.size() > ext.size() &&
          spec.source.compare(spec.source.size() - ext.size(), ext.size(), ext) == 0)
        tar.insert(tar.begin() + 1, flag);
    const int in = ::open(spec.source.c_str(), O_RDONLY | O_CLOEXEC);
    if (in < 0) throw BuildError("source", "cannot read \"" + spec.source + "\"", "");
    rc = log.run(sandbox, tar, {{tmp.string(), true}}, in);
    ::close(in);
  } else {
    // A folder (a source root's, or the caller's own) is copied here, its
    // symlinks as symlinks, and then handed to the build user.
    if (progress) progress("copying " + spec.source);
    rc = log.run_here({"cp", "-R", "--preserve=timestamps,links", "--reflink=auto",
                       spec.source + "/.", tmp.string()});
    sfs::remove_all(tmp / ".git", ec);
    sandbox.hand_over(tmp.string());
  }
  if (rc != 0)
    throw BuildError("source", "cannot unpack \"" + spec.source + "\"", tail_of_file(log.path()),
                     log.path());
  sfs::rename(tmp, st.tree);
}

// Brings the tree to exactly `want` (patch files, in order), reversing what is
// applied beyond the common prefix. Throws BuildError naming the patch that
// does not apply.
void apply_series(const BuildSpec& spec, const BuildSandbox& sandbox, const SourceTree& st,
                  const std::vector<PatchInfo>& want, const Log& log, const Progress& progress) {
  const std::vector<Bind> binds = {{st.tree.string(), true}, {st.patches.string(), false}};
  auto applied = read_lines(st.applied);
  size_t common = 0;
  while (common < applied.size() && common < want.size() && applied[common] == want[common].sha256)
    ++common;
  while (applied.size() > common) {
    const auto copy = (st.patches / (applied.back() + ".patch")).string();
    if (progress) progress("reverting patch " + applied.back().substr(0, 12));
    int rc = log.run(sandbox,
                     {"patch", "-p1", "-R", "--batch", "-s", "-d", st.tree.string(), "-i", copy},
                     binds);
    if (rc != 0) {
      // The tree is in an unknown state: start again from the source.
      if (progress) progress("cannot revert; unpacking the source again");
      unpack(spec, sandbox, st, log, progress);
      applied.clear();
      common = 0;
      break;
    }
    applied.pop_back();
    write_file(st.applied.string(), join_lines(applied));
  }
  for (size_t i = common; i < want.size(); ++i) {
    const auto& p = want[i];
    const auto copy = (st.patches / (p.sha256 + ".patch")).string();
    if (progress) progress("applying " + p.name);
    int dry = log.run(sandbox,
                      {"patch", "-p1", "--dry-run", "--batch", "--forward", "--fuzz=0", "-d",
                       st.tree.string(), "-i", copy},
                      binds);
    if (dry != 0) {
      throw BuildError("patch",
                       "patch \"" + p.name + "\" does not apply to \"" + spec.source + "\"" +
                           (i > 0 ? " after " + want[i - 1].name : ""),
                       tail_of_file(log.path()), log.path());
    }
    int rc = log.run(sandbox,
                     {"patch", "-p1", "--batch", "--forward", "--fuzz=0", "-s", "-d",
                      st.tree.string(), "-i", copy},
                     binds);
    if (rc != 0)
      throw BuildError("patch", "patch \"" + p.name + "\" failed to apply", tail_of_file(log.path()),
                       log.path());
    applied.push_back(p.sha256);
    write_file(st.applied.string(), join_lines(applied));
  }
}

// A line folder's name as the line's version ("6.12"), or nullopt.
std::optional<TreeVersion> line_named(const std::string& name) {
  TreeVersion v;
  char rest = 0;
  if (std::sscanf(name.c_str(), "%d.%d%c", &v.version, &v.patchlevel, &rest) != 2) return std::nullopt;
  return v;
}

// The version a top Makefile names; BuildError("source") naming `source`
// when it names none.
TreeVersion version_named_by(const std::string& makefile, const std::string& source) {
  const auto v = tree_version(makefile);
  if (!v) throw BuildError("source", source + " is no kernel tree: its Makefile sets no VERSION and PATCHLEVEL", "");
  return *v;
}

}  // namespace

std::vector<std::string> widen_series(const TreeVersion& version, const std::string& dir) {
  const std::string lines = dir.empty() ? find_deploy_file("deploy/kernel/widen", "widen") : dir;
  std::error_code ec;
  if (lines.empty() || !sfs::is_directory(lines, ec)) {
    throw BuildError("patch",
                     "cannot find Leapfrog's widening series deploy/kernel/widen" +
                         (dir.empty() ? std::string() : " (\"" + dir + "\")"),
                     "");
  }
  // The lines the folder keeps ("6.1", "6.12"), and the newest that fits.
  std::optional<TreeVersion> best;
  std::string d;
  std::vector<std::pair<int, int>> kept;
  for (const auto& e : sfs::directory_iterator(lines, ec)) {
    const auto line = e.is_directory() ? line_named(e.path().filename().string()) : std::nullopt;
    if (!line) continue;
    kept.emplace_back(line->version, line->patchlevel);
    const bool fits = !version.older_than(line->version, line->patchlevel);
    if (fits && (!best || best->older_than(line->version, line->patchlevel))) {
      best = line;
      d = e.path().string();
    }
  }
  if (!best) {
    std::sort(kept.begin(), kept.end());
    std::string have;
    for (const auto& [v, p] : kept) have += (have.empty() ? "" : ", ") + std::to_string(v) + "." + std::to_string(p);
    throw BuildError("patch",
                     "no widening series fits Linux " + version.str() + " (" + lines + " keeps " +
                         (have.empty() ? std::string("none") : have) + ")",
                     "");
  }
  std::vector<std::string> out;
  for (const auto& e : sfs::directory_iterator(d, ec)) {
    if (e.is_regular_file() && e.path().extension() == ".patch") out.push_back(e.path().string());
  }
  std::sort(out.begin(), out.end());
  if (out.empty())
    throw BuildError("patch", "the widening series \"" + d + "\" holds no .patch file", "");
  return out;
}

TreeVersion source_version(const std::string& source) {
  std::error_code ec;
  if (sfs::is_directory(source, ec))
    return version_named_by(read_file((sfs::path(source) / "Makefile").string(), "source", "the top Makefile"),
                            source);
  // Only the first Makefile one level down (the tree's own), and tar stops
  // there: a second or two of a 150 MB tarball, not all of it.
  const auto makefile = capture_output({"tar", "-xOf", source, "--wildcards", "--no-wildcards-match-slash",
                                        "--occurrence=1", "*/Makefile"});
  if (!makefile) throw BuildError("source", "cannot read the top Makefile of " + source, "");
  return version_named_by(*makefile, source);
}

InputFile read_input_file(const std::string& path, const std::string& stage) {
  return {sfs::path(path).filename().string(), read_file(path, stage, stage == "patch" ? "patch" : "config fragment")};
}

std::string sha256_of_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw BuildError("source", "cannot read \"" + path + "\"", "");
  Sha256 h;
  std::vector<char> buf(1 << 20);
  while (in) {
    in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
    h.update(buf.data(), static_cast<size_t>(in.gcount()));
  }
  return h.hex();
}

std::string tail_lines(const std::string& text, size_t lines) {
  size_t pos = text.size();
  if (pos > 0 && text[pos - 1] == '\n') --pos;
  for (size_t n = 0; n < lines && pos > 0; ++n) {
    auto nl = text.rfind('\n', pos - 1);
    if (nl == std::string::npos) return text;
    pos = nl;
  }
  return pos == 0 ? text : text.substr(pos + 1);
}

std::string TreeVersion::str() const {
  return std::to_string(version) + "." + std::to_string(patchlevel) + "." + std::to_string(sublevel);
}

std::optional<TreeVersion> tree_version(const std::string& makefile_text) {
  std::map<std::string, int> found;
  std::istringstream in(makefile_text);
  std::string line;
  // Kbuild's own lines: "VERSION = 6", "PATCHLEVEL = 12", "SUBLEVEL = 118".
  for (int n = 0; n < 64 && std::getline(in, line); ++n) {
    const size_t eq = line.find('=');
    if (eq == std::string::npos) continue;
    std::string key = line.substr(0, eq), value = line.substr(eq + 1);
    auto trim = [](std::string& t) {
      t.erase(0, t.find_first_not_of(" \t"));
      t.erase(t.find_last_not_of(" \t\r") + 1);
    };
    trim(key);
    trim(value);
    if (key != "VERSION" && key != "PATCHLEVEL" && key != "SUBLEVEL") continue;
    if (found.count(key)) continue;
    if (value.empty() || value.size() > 6 ||
        value.find_first_not_of("0123456789") != std::string::npos)
      return std::nullopt;
    found[key] = std::stoi(value);
  }
  if (!found.count("VERSION") || !found.count("PATCHLEVEL")) return std::nullopt;
  return TreeVersion{found["VERSION"], found["PATCHLEVEL"],
                     found.count("SUBLEVEL") ? found["SUBLEVEL"] : 0};
}

std::vector<std::string> missing_options(const std::string& fragment_text,
                                         const std::string& dot_config_text) {
  std::map<std::string, std::string> have;
  std::istringstream cfg(dot_config_text);
  std::string line;
  while (std::getline(cfg, line)) {
    auto eq = line.find('=');
    if (line.rfind("CONFIG_", 0) == 0 && eq != std::string::npos)
      have[line.substr(0, eq)] = line.substr(eq + 1);
  }
  std::vector<std::string> missing;
  std::istringstream frag(fragment_text);
  while (std::getline(frag, line)) {
    auto eq = line.find('=');
    if (line.rfind("CONFIG_", 0) != 0 || eq == std::string::npos) continue;
    auto it = have.find(line.substr(0, eq));
    if (it == have.end() || it->second != line.substr(eq + 1)) missing.push_back(line);
  }
  return missing;
}

namespace {

// inputs_hash, given the source's id (build_kernel has it already: for a
// tarball it is the sha256 of every byte).
std::string inputs_hash_of(const BuildSpec& spec, const std::string& src_id) {
  Sha256 h;
  h.update(kRecipeVersion);
  h.update(src_id);
  for (const auto& p : spec.patches) h.update(sha256_hex(p.content));
  h.update("config");
  h.update(read_file(find_base_fragment(spec), "config", "config fragment"));
  for (const auto& f : spec.config_fragments) h.update(f.content);
  h.update(compiler_id());
  return h.hex();
}

}  // namespace

std::string inputs_hash(const BuildSpec& spec) { return inputs_hash_of(spec, source_id(spec.source)); }

BuildResult build_kernel(const BuildSpec& spec, const Progress& progress) {
  if (spec.cache_dir.empty()) throw BuildError("source", "no cache folder given", "");
  for (const auto& p : spec.patches)
    if (auto why = file_name_problem(p.name); !why.empty()) throw BuildError("patch", "patch: " + why, "");
  for (const auto& f : spec.config_fragments)
    if (auto why = file_name_problem(f.name); !why.empty())
      throw BuildError("config", "config fragment: " + why, "");
  const BuildSandbox sandbox(spec.sandbox, spec.cache_dir);
  const std::string src_id = source_id(spec.source);
  const std::string hash = inputs_hash_of(spec, src_id);
  const sfs::path kb = sfs::path(spec.cache_dir) / "kbuild";
  const sfs::path out = kb / "out" / hash;
  sfs::create_directories(kb / "out");
  sfs::permissions(kb / "out", sfs::perms::owner_all | sfs::perms::group_read | sfs::perms::group_exec);

  BuildResult r;
  r.label = spec.label;
  r.inputs_hash = hash;
  r.dir = out.string();
  r.vmlinux = (out / "vmlinux").string();
  r.bzimage = (out / "bzImage").string();
  r.build_log = (out / "build.log").string();
  for (const auto& p : spec.patches)
    r.patches.push_back({p.name, sha256_hex(p.content), patch_subject(p.content)});

  SourceTree st;
  st.root = kb / "src" / src_id;
  st.tree = st.root / "tree";
  st.obj = st.root / "obj";
  st.patches = st.root / "patches";
  st.applied = st.root / "applied";
  sfs::create_directories(st.patches);
  // The build user may pass through to its tree and objects, and read the
  // patch copies; the rest of the cache is root's.
  sandbox.let_through(kb.string());
  sandbox.let_through((kb / "src").string());
  sandbox.let_through(st.root.string());
  FileLock lock((st.root / "lock").string());

  if (sfs::exists(out / "meta.json")) {
    auto meta =
        nlohmann::json::parse(read_file((out / "meta.json").string(), "source", "build record"));
    r.release = meta.value("release", "");
    r.cached = true;
    if (progress) progress("cached: these inputs were built before (" + hash.substr(0, 12) + ")");
    return r;
  }

  if (sfs::exists(out / "failed") && !spec.retry_failed) {
    const auto why = read_file((out / "failed").string(), "source", "build record");
    const auto colon = why.find(": ");
    throw BuildError(why.substr(0, colon),
                     "these inputs failed before (" + hash.substr(0, 12) +
                         "): " + why.substr(colon + 2, why.size() - colon - 3),
                     tail_of_file(r.build_log), r.build_log);
  }
  std::error_code ec;
  sfs::remove_all(out, ec);
  sfs::create_directories(out);
  sfs::permissions(out, sfs::perms::owner_all | sfs::perms::group_read | sfs::perms::group_exec);
  const Log log(r.build_log);
  if (sandbox.enabled()) log.line("# tools run in the build sandbox as " + sandbox.user());
  const auto started = std::chrono::steady_clock::now();

  // What an older Leapfrog or a build without the sandbox left is the build
  // user's from now on.
  sandbox.hand_over(st.tree.string());
  sandbox.hand_over(st.obj.string());
  // The patches as the tools read them: root's, readable by the build user's
  // group only, so no build can change a later build's series.
  sandbox.let_through(st.patches.string(), true);
  for (size_t i = 0; i < spec.patches.size(); ++i) {
    const auto copy = st.patches / (r.patches[i].sha256 + ".patch");
    if (!sfs::exists(copy)) write_file(copy.string(), spec.patches[i].content);
    if (sandbox.enabled() && ::chown(copy.c_str(), 0, sandbox.gid()) != 0)
      throw BuildError("sandbox", "cannot hand the patch copies to the build user", "");
  }
  // A sandbox that cannot start fails this build, and is not recorded as
  // these inputs' failure.
  if (sandbox.enabled() && log.run(sandbox, {"true"}, {}) != 0)
    throw BuildError("sandbox", "the build sandbox does not start (as " + sandbox.user() + ")",
                     tail_of_file(log.path()), log.path());
  if (!sfs::exists(st.tree)) unpack(spec, sandbox, st, log, progress);
  try {
    apply_series(spec, sandbox, st, r.patches, log, progress);

    // A tree Leapfrog's fragment and points are written for, before any
    // configuration: an older one would build a kernel without what the
    // scenarios need, or fail somewhere less clear.
    const TreeVersion version =
        version_named_by(read_file((st.tree / "Makefile").string(), "source", "Makefile"), spec.source);
    if (version.older_than(kOldestVersion, kOldestPatchlevel))
      throw BuildError("source",
                       "Linux " + version.str() + " is older than " + std::to_string(kOldestVersion) + "." +
                           std::to_string(kOldestPatchlevel) +
                           ", the oldest line Leapfrog's config fragment and delay points are written for",
                       "");
    log.line("# Linux " + version.str());

    // allnoconfig + our fragment + the user's, with a version suffix naming the inputs.
    std::string fragment = read_file(find_base_fragment(spec), "config", "config fragment");
    for (const auto& f : spec.config_fragments) fragment += "\n" + f.content;
    const std::string all = fragment + "\nCONFIG_LOCALVERSION=\"-lf" + hash.substr(0, 8) +
                            "\"\n# CONFIG_LOCALVERSION_AUTO is not set\n";
    if (!sfs::exists(st.obj)) make_build_folder(sandbox, st.obj);
    write_file((st.obj / "leapfrog.fragment").string(), all);
    sandbox.hand_over((st.obj / "leapfrog.fragment").string());
    if (progress) progress("configuring");
    const std::vector<Bind> binds = {{st.tree.string(), true}, {st.obj.string(), true}};
    const std::vector<std::string> make = {"make", "-C", st.tree.string(), "O=" + st.obj.string(),
                                           "ARCH=x86_64"};
    auto cmd = make;
    cmd.push_back("KCONFIG_ALLCONFIG=" + (st.obj / "leapfrog.fragment").string());
    cmd.push_back("allnoconfig");
    if (log.run(sandbox, cmd, binds) != 0)
      throw BuildError("config", "kernel configuration failed", tail_of_file(log.path()), log.path());
    const auto missing =
        missing_options(all, read_file((st.obj / ".config").string(), "config", ".config"));
    if (!missing.empty()) {
      std::string list;
      for (const auto& m : missing) list += (list.empty() ? "" : ", ") + m;
      throw BuildError(
          "config",
          "the configuration of Linux " + version.str() +
              " lost options (missing dependencies, misspelt names, or options this version renamed or"
              " does not have): " + list,
          tail_of_file(log.path()), log.path());
    }

    const unsigned jobs = spec.jobs ? spec.jobs : std::max(1u, std::thread::hardware_concurrency());
    if (progress) progress("building with " + std::to_string(jobs) + " jobs (log: " + log.path() + ")");
    cmd = make;
    cmd.push_back("-j" + std::to_string(jobs));
    cmd.push_back("bzImage");
    if (log.run(sandbox, cmd, binds) != 0)
      throw BuildError("build", "the kernel build failed", tail_of_file(log.path()), log.path());

    r.release =
        read_file((st.obj / "include/config/kernel.release").string(), "build", "kernel release");
    while (!r.release.empty() && (r.release.back() == '\n' || r.release.back() == ' '))
      r.release.pop_back();
    sfs::copy_file(st.obj / "vmlinux", r.vmlinux, sfs::copy_options::overwrite_existing);
    sfs::copy_file(st.obj / "arch/x86/boot/bzImage", r.bzimage,
                   sfs::copy_options::overwrite_existing);
    sfs::copy_file(st.obj / ".config", out / "config", sfs::copy_options::overwrite_existing);
  } catch (const BuildError& e) {
    write_file((out / "failed").string(), std::string(e.stage()) + ": " + e.what() + "\n");
    throw;
  }
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();

  nlohmann::json meta;
  meta["label"] = spec.label;
  meta["release"] = r.release;
  meta["inputs_hash"] = hash;
  meta["source"] = spec.source;
  meta["seconds"] = r.seconds;
  auto& pj = meta["patches"] = nlohmann::json::array();
  for (const auto& p : r.patches)
    pj.push_back({{"name", p.name}, {"sha256", p.sha256}, {"subject", p.subject}});
  write_file((out / "meta.json").string(), meta.dump(2));
  return r;
}

}  // namespace leapfrog::kbuild
