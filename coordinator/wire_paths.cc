#include "coordinator/wire_paths.h"

#include <filesystem>

namespace leapfrog::coord {

namespace {

constexpr size_t kMaxPath = 4096;

bool lower_hex(const std::string& s) {
  for (char c : s)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  return !s.empty();
}

}  // namespace

std::string quote_prefix(const std::string& s, size_t max) {
  std::string out = s.size() > max ? s.substr(0, max) + "..." : s;
  for (char& c : out)
    if (static_cast<unsigned char>(c) < 0x20) c = '?';
  return "\"" + out + "\"";
}

std::string build_log_path_problem(const std::string& path) {
  if (path.empty()) return "";
  const std::string want = ", want <cache>/kbuild/out/<inputs-hash>/build.log";
  if (path.size() > kMaxPath) return "build log path is longer than 4096 bytes";
  if (path.find('\0') != std::string::npos) return "build log path holds a NUL byte";
  const std::filesystem::path p(path);
  if (!p.is_absolute() || p.lexically_normal().string() != path)
    return "build log path " + quote_prefix(path) + " is not an absolute, normal path" + want;
  const auto hash = p.parent_path();
  const auto out = hash.parent_path();
  if (p.filename() != "build.log" || !lower_hex(hash.filename().string()) ||
      out.filename() != "out" || out.parent_path().filename() != "kbuild")
    return "build log path " + quote_prefix(path) + " is not a builder's log" + want;
  return "";
}

std::string sha256_problem(const std::string& field, const std::string& value) {
  if (value.empty() || (value.size() == 64 && lower_hex(value))) return "";
  return field + " " + quote_prefix(value) + " is not 64 lowercase hex digits";
}

std::string kernel_problem(const v1::Kernel& k) {
  if (auto p = build_log_path_problem(k.build_log_path()); !p.empty()) return p;
  if (auto p = sha256_problem("kernel.sha256", k.sha256()); !p.empty()) return p;
  if (!k.inputs_hash().empty() && !lower_hex(k.inputs_hash()))
    return "kernel.inputs_hash " + quote_prefix(k.inputs_hash()) + " is not lowercase hex";
  return "";
}

std::string build_result_problem(const v1::KernelBuildResult& r) {
  if (auto p = build_log_path_problem(r.log_path()); !p.empty()) return p;
  if (auto p = sha256_problem("build.vmlinux_sha256", r.vmlinux_sha256()); !p.empty()) return p;
  if (!r.inputs_hash().empty() && !lower_hex(r.inputs_hash()))
    return "build.inputs_hash " + quote_prefix(r.inputs_hash()) + " is not lowercase hex";
  return "";
}

}  // namespace leapfrog::coord
