#include "common/kernel/kernel_image.h"

#include <fcntl.h>
#include <openssl/evp.h>
#include <sys/wait.h>
#include <unistd.h>

#include <spdlog/spdlog.h>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <vector>

#include "common/hex.h"
#include "common/process.h"

namespace leapfrog::vm {
namespace {

namespace stdfs = std::filesystem;

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw ImageError("cannot read \"" + path + "\"");
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

uint32_t le32(const std::string& b, size_t off) {
  if (off + 4 > b.size()) return 0;
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | static_cast<uint8_t>(b[off + i]);
  return v;
}

uint16_t le16(const std::string& b, size_t off) {
  if (off + 2 > b.size()) return 0;
  return static_cast<uint16_t>(static_cast<uint8_t>(b[off]) | static_cast<uint8_t>(b[off + 1])
                                                                  << 8);
}

bool is_elf(const std::string& b) {
  return b.size() > 4 && b.compare(0, 4,
                                   "\x7f"
                                   "ELF") == 0;
}
bool is_bzimage(const std::string& b) {
  return b.size() > 0x260 && b.compare(0x202, 4, "HdrS") == 0;
}

// The printable string at `off`, up to `max` bytes.
std::string cstring_at(const std::string& b, size_t off, size_t max) {
  std::string out;
  for (size_t i = off; i < b.size() && out.size() < max; ++i) {
    const char c = b[i];
    if (c == '\0' || c == '\n') break;
    out.push_back(c);
  }
  return out;
}

std::string first_word(const std::string& s) {
  return s.substr(0, s.find(' '));
}

// Runs argv with stdin from `in` and stdout to `out`; returns the exit status
// (-1 if it could not start).
int run_filter(const std::vector<std::string>& argv, const std::string& in,
               const std::string& out) {
  SpawnOptions opts;
  opts.stdin_path = in;
  opts.stdout_path = out;
  opts.stderr_path = "/dev/null";
  opts.search_path = true;
  return run_process(argv, opts);
}

struct Codec {
  const char* name;
  std::string magic;
  std::vector<std::string> argv;
  // A failure status that still means "decompressed": gzip warns (2) about
  // the size word the kernel appends to the payload, zstd fails (1) on it.
  int tolerated_status = 0;
};

// A whole ELF file: its section header table ends inside the file (a stream
// that broke off midway leaves a truncated one).
bool is_complete_elf(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::string h(64, '\0');
  if (!f.read(h.data(), 64) || !is_elf(h) || h[4] != 2) return false;  // ELFCLASS64
  uint64_t shoff = 0;
  for (int i = 7; i >= 0; --i) shoff = (shoff << 8) | static_cast<uint8_t>(h[0x28 + i]);
  const uint64_t end = shoff + uint64_t{le16(h, 0x3a)} * le16(h, 0x3c);
  std::error_code ec;
  const auto size = stdfs::file_size(path, ec);
  return !ec && shoff > 0 && end <= size;
}

const std::vector<Codec>& codecs() {
  static const std::vector<Codec> all = {
      {"gzip", std::string("\x1f\x8b\x08", 3), {"gzip", "-dc"}, 2},
      {"xz",
       std::string("\xfd"
                   "7zXZ\0",
                   6),
       {"xz", "-dc", "--single-stream"}},
      {"zstd", std::string("\x28\xb5\x2f\xfd", 4), {"zstd", "-qdc"}, 1},
      {"lzma", std::string("\x5d\x00\x00", 3), {"xz", "-dc", "--format=lzma"}},
      {"bzip2", "BZh", {"bzip2", "-dc"}},
      {"lz4", std::string("\x02\x21\x4c\x18", 4), {"lz4", "-dc"}},
  };
  return all;
}

}  // namespace

namespace {

// Lowercase hex of the digest `ctx` has taken in.
std::string hex_digest(EVP_MD_CTX* ctx) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_DigestFinal_ex(ctx, md, &len);
  return hex_encode(md, len);
}

using DigestCtx = std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)>;

}  // namespace

std::string sha256_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw ImageError("cannot read \"" + path + "\"");
  DigestCtx ctx(EVP_MD_CTX_new(), EVP_MD_CTX_free);
  EVP_DigestInit_ex(ctx.get(), EVP_sha256(), nullptr);
  std::vector<char> buf(1 << 20);
  while (in) {
    in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
    EVP_DigestUpdate(ctx.get(), buf.data(), static_cast<size_t>(in.gcount()));
  }
  return hex_digest(ctx.get());
}

std::string sha256_text(const std::string& text) {
  DigestCtx ctx(EVP_MD_CTX_new(), EVP_MD_CTX_free);
  EVP_DigestInit_ex(ctx.get(), EVP_sha256(), nullptr);
  EVP_DigestUpdate(ctx.get(), text.data(), text.size());
  return hex_digest(ctx.get());
}

ImageInfo inspect_image(const std::string& path) {
  const std::string b = read_all(path);
  ImageInfo info;
  if (is_bzimage(b)) {
    info.format = ImageFormat::BzImage;
    const uint16_t ptr = le16(b, 0x20e);
    if (ptr != 0) info.version = cstring_at(b, ptr + 0x200u, 512);
  } else if (is_elf(b)) {
    info.format = ImageFormat::Elf;
    const std::string banner = "Linux version ";
    const size_t at = b.find(banner);
    if (at != std::string::npos) info.version = cstring_at(b, at + banner.size(), 512);
  } else {
    throw ImageError("\"" + path + "\" is neither a bzImage nor an ELF vmlinux");
  }
  if (info.version.empty()) throw ImageError("\"" + path + "\" carries no kernel version string");
  info.release = first_word(info.version);
  info.sha256 = sha256_file(path);
  return info;
}

bool extract_vmlinux(const std::string& bzimage, const std::string& out, std::string& why) {
  const std::string b = read_all(bzimage);
  if (!is_bzimage(b)) {
    why = "not a bzImage";
    return false;
  }
  uint32_t setup_sects = static_cast<uint8_t>(b[0x1f1]);
  if (setup_sects == 0) setup_sects = 4;
  const size_t start = (setup_sects + 1) * 512 + le32(b, 0x248);
  const size_t len = le32(b, 0x24c);
  if (le16(b, 0x206) < 0x208 || len == 0 || start + len > b.size()) {
    why = "the bzImage header names no payload (boot protocol before 2.08)";
    return false;
  }
  const std::string payload = b.substr(start, len);
  const std::string tmp = out + ".payload";
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    f.write(payload.data(), static_cast<std::streamsize>(payload.size()));
  }
  why = "the payload's compression is not one of gzip, xz, lzma, zstd, bzip2, lz4";
  for (const auto& c : codecs()) {
    if (payload.compare(0, c.magic.size(), c.magic) != 0) continue;
    const int rc = run_filter(c.argv, tmp, out + ".tmp");
    std::error_code ec;
    const auto size = stdfs::file_size(out + ".tmp", ec);
    if ((rc == 0 || (rc > 0 && rc == c.tolerated_status)) && is_complete_elf(out + ".tmp")) {
      stdfs::rename(out + ".tmp", out);
      stdfs::remove(tmp);
      spdlog::info("kernel.extracted image={} codec={} size={}", bzimage, c.name, size);
      return true;
    }
    stdfs::remove(out + ".tmp", ec);
    why = std::string("the ") + c.name + " payload did not decompress to an ELF file (status " +
          std::to_string(rc) + "; is " + c.argv[0] + " installed?)";
    break;
  }
  stdfs::remove(tmp);
  return false;
}

std::string default_cache_dir() {
  const char* env = std::getenv("LEAPFROG_CACHE");
  return env && *env ? env : "/var/cache/leapfrog";
}

StoredKernel store_kernel(const std::string& cache_dir, const std::string& image,
                          const std::string& modules) {
  const ImageInfo info = inspect_image(image);
  StoredKernel k;
  k.dir = cache_dir + "/kernels/" + info.sha256;
  k.sha256 = info.sha256;
  k.release = info.release;
  k.version = info.version;
  k.modules = modules;
  if (k.modules.empty() && stdfs::is_directory("/lib/modules/" + info.release))
    k.modules = "/lib/modules/" + info.release;
  if (!k.modules.empty()) {
    if (!stdfs::is_directory(k.modules))
      throw ImageError("no modules folder \"" + k.modules + "\"");
    k.modules = stdfs::absolute(k.modules).string();
  }
  std::error_code ec;
  stdfs::create_directories(k.dir, ec);
  if (ec) throw ImageError("cannot create \"" + k.dir + "\": " + ec.message());
  k.image = k.dir + "/image";
  if (!stdfs::exists(k.image)) {
    stdfs::copy_file(image, k.image + ".tmp", stdfs::copy_options::overwrite_existing, ec);
    if (ec) throw ImageError("cannot copy \"" + image + "\" to \"" + k.dir + "\": " + ec.message());
    stdfs::rename(k.image + ".tmp", k.image);
  }
  if (info.format == ImageFormat::Elf) {
    k.vmlinux = k.image;
  } else if (std::string why; extract_vmlinux(k.image, k.dir + "/vmlinux", why)) {
    k.vmlinux = k.dir + "/vmlinux";
  } else {
    spdlog::warn("kernel.no_vmlinux image={} reason=\"{}\": VMs boot the bzImage (slower)", image,
                 why);
  }
  const nlohmann::json meta = {
      {"release", k.release},
      {"version", k.version},
      {"modules", k.modules},
      {"vmlinux", k.vmlinux.empty() ? "" : stdfs::path(k.vmlinux).filename().string()},
      {"source", image}};
  std::ofstream(k.dir + "/meta.json.tmp") << meta.dump(2) << '\n';
  stdfs::rename(k.dir + "/meta.json.tmp", k.dir + "/meta.json");
  return k;
}

StoredKernel load_kernel(const std::string& cache_dir, const std::string& sha256) {
  StoredKernel k;
  k.dir = cache_dir + "/kernels/" + sha256;
  k.sha256 = sha256;
  std::ifstream in(k.dir + "/meta.json");
  if (!in)
    throw ImageError("kernel " + sha256.substr(0, 12) + " is not in this host's store \"" +
                     cache_dir + "/kernels\": run `leapfrog kernel add` here");
  nlohmann::json meta;
  try {
    meta = nlohmann::json::parse(in);
    k.release = meta.at("release").get<std::string>();
    k.version = meta.at("version").get<std::string>();
    k.modules = meta.at("modules").get<std::string>();
    const std::string v = meta.at("vmlinux").get<std::string>();
    k.image = k.dir + "/image";
    if (!v.empty()) k.vmlinux = k.dir + "/" + v;
  } catch (const nlohmann::json::exception& e) {
    throw ImageError("\"" + k.dir + "/meta.json\" is malformed: " + e.what());
  }
  return k;
}

}  // namespace leapfrog::vm

namespace leapfrog::vm {
namespace {

// One entry of a newc ("070701") cpio archive: header, name, data, each
// padded to 4 bytes.
std::string newc_entry(const std::string& name, unsigned mode, const std::string& data) {
  char header[111];
  std::snprintf(header, sizeof header, "070701%08X%08X%08X%08X%08X%08X%08zX%08X%08X%08X%08X%08zX%08X", 1u,
                mode, 0u, 0u, 1u, 0u, data.size(), 0u, 0u, 0u, 0u, name.size() + 1, 0u);
  std::string e(header, 110);
  e += name;
  e += '\0';
  e.resize((e.size() + 3) & ~size_t{3}, '\0');
  e += data;
  e.resize((e.size() + 3) & ~size_t{3}, '\0');
  return e;
}

}  // namespace

void write_initrd_with_token(const std::string& image, const std::string& token, const std::string& out) {
  const std::string tmp = out + ".tmp";
  const int in = ::open(image.c_str(), O_RDONLY | O_CLOEXEC);
  if (in < 0) throw ImageError("cannot read the VM image \"" + image + "\": " + std::strerror(errno));
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) {
    const int e = errno;
    ::close(in);
    throw ImageError("cannot write \"" + tmp + "\": " + std::strerror(e));
  }
  std::string error;
  // The image, copied in the kernel; between file systems of different
  // kinds (a cache on ext4, a data folder on tmpfs) the kernel refuses
  // (EXDEV) and the bytes go through here.
  bool by_hand = false;
  for (;;) {
    if (!by_hand) {
      const ssize_t n = copy_file_range(in, nullptr, fd, nullptr, size_t{1} << 30, 0);
      if (n == 0) break;
      if (n > 0) continue;
      if (errno == EXDEV || errno == ENOSYS || errno == EINVAL || errno == EOPNOTSUPP) {
        by_hand = true;
        continue;
      }
      error = std::string("copy: ") + std::strerror(errno);
      break;
    }
    char buf[1 << 16];
    const ssize_t n = ::read(in, buf, sizeof buf);
    if (n == 0) break;
    if (n < 0 || ::write(fd, buf, static_cast<size_t>(n)) != n) {
      error = std::string("copy: ") + std::strerror(errno);
      break;
    }
  }
  if (error.empty()) {
    const std::string archive = newc_entry("etc/leapfrog/token", 0100600, token + "\n") + newc_entry("TRAILER!!!", 0, "");
    if (::write(fd, archive.data(), archive.size()) != static_cast<ssize_t>(archive.size()))
      error = std::string("write: ") + std::strerror(errno);
  }
  ::close(in);
  if (::close(fd) != 0 && error.empty()) error = std::string("close: ") + std::strerror(errno);
  if (error.empty() && ::rename(tmp.c_str(), out.c_str()) != 0) error = std::string("rename: ") + std::strerror(errno);
  if (!error.empty()) {
    ::unlink(tmp.c_str());
    throw ImageError("cannot write the VM initrd \"" + out + "\": " + error);
  }
}

}  // namespace leapfrog::vm
