#include "common/kernel/build_file.h"

#include <openssl/evp.h>

#include <filesystem>

#include "common/bounds.h"
#include "common/hex.h"
#include "common/kernel/kernel_build.h"

namespace leapfrog::kbuild {

namespace sfs = std::filesystem;

std::string sha256_hex(std::string_view bytes) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  EVP_Digest(bytes.data(), bytes.size(), md, &n, EVP_sha256(), nullptr);
  return hex_encode(md, n);
}

namespace {

bool has_control_byte(const std::string& s) {
  for (unsigned char c : s)
    if (c < 0x20 || c == 0x7f) return true;
  return false;
}

}  // namespace

std::string source_name_problem(const std::string& source) {
  if (source.empty()) return "no source (a kernel tarball or folder under a source root)";
  const std::string q = quoted_start(source);
  if (has_control_byte(source)) return "source " + q + " holds a control byte";
  if (source.front() == '/')
    return "source " + q +
           " is an absolute path: name it relative to a source root of the builder"
           " (e.g. \"linux-source-6.1.tar.xz\" under /usr/src)";
  size_t start = 0;
  while (start <= source.size()) {
    const size_t slash = std::min(source.find('/', start), source.size());
    const std::string part = source.substr(start, slash - start);
    if (part.empty() || part == "." || part == "..")
      return "source " + q + " has a \"" + part + "\" component: name it plainly, inside a source root";
    start = slash + 1;
  }
  return "";
}

std::string file_name_problem(const std::string& name) {
  if (name.empty()) return "a file without a name";
  const std::string q = quoted_start(name);
  if (has_control_byte(name)) return "file name " + q + " holds a control byte";
  if (name == "." || name == ".." || name.find('/') != std::string::npos)
    return "file name " + q + " is not a plain file name (its content travels, not its path)";
  return "";
}

std::string resolve_source(const std::string& source, const std::vector<std::string>& roots) {
  if (auto why = source_name_problem(source); !why.empty()) throw BuildError("source", why, "");
  std::string tried;
  for (const auto& root : roots) {
    std::error_code ec;
    const sfs::path candidate = sfs::path(root) / source;
    if (!sfs::exists(sfs::symlink_status(candidate, ec))) {
      tried += (tried.empty() ? "" : ", ") + root;
      continue;
    }
    const sfs::path real_root = sfs::canonical(root, ec);
    if (ec) throw BuildError("source", "source root \"" + root + "\": " + ec.message(), "");
    const sfs::path real = sfs::canonical(candidate, ec);
    if (ec) throw BuildError("source", "source " + quoted_start(source) + ": " + ec.message(), "");
    const std::string r = real_root.string(), s = real.string();
    if (s.size() <= r.size() || s.compare(0, r.size(), r) != 0 || (r != "/" && s[r.size()] != '/'))
      throw BuildError("source",
                       "source " + quoted_start(source) + " resolves outside its source root \"" +
                           root + "\"",
                       "");
    return s;
  }
  throw BuildError("source",
                   "source " + quoted_start(source) + " is in no source root of this builder (" +
                       (tried.empty() ? std::string("none configured") : tried) +
                       "; leapfrog-agent connect --source-root DIR adds one)",
                   "");
}

std::vector<std::string> default_source_roots() { return {"/usr/src"}; }

}  // namespace leapfrog::kbuild
