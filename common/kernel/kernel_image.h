#pragma once
// Kernel images for VMs: what an image is (bzImage or ELF vmlinux), its
// version string and sha256, the ELF vmlinux inside a bzImage (booted
// directly, PVH, it starts about twice as fast under TCG), and the local
// kernel store: <cache>/kernels/<sha256>/ with the image, the extracted
// vmlinux and meta.json (release, version, modules folder).

#include <optional>
#include <stdexcept>
#include <string>

namespace leapfrog::vm {

// A kernel image or the kernel store is unusable; the message says why.
class ImageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

enum class ImageFormat { BzImage, Elf };

struct ImageInfo {
  ImageFormat format = ImageFormat::BzImage;
  // The version string the image carries, e.g. "6.1.0-57-amd64 (debian-kernel@...) #1 SMP ...".
  std::string version;
  // Its first word: the release (`uname -r`), which names /lib/modules/<release>.
  std::string release;
  std::string sha256;
};

// Reads the image's format and version and hashes it. Throws ImageError if it
// is neither a bzImage nor an ELF vmlinux.
ImageInfo inspect_image(const std::string& path);

// Lowercase hex sha256 of a file's bytes. Throws ImageError.
std::string sha256_file(const std::string& path);
// The same of a string.
std::string sha256_text(const std::string& text);

// Decompresses the payload of a bzImage (gzip, xz, lzma, zstd, bzip2 or lz4,
// with the system's tools) into `out`. False (and `why` set) if the payload
// is not found, does not decompress, or is not an ELF file.
bool extract_vmlinux(const std::string& bzimage, const std::string& out, std::string& why);

// A kernel in the local store.
struct StoredKernel {
  std::string dir;
  std::string image;    // the registered image, as given
  std::string vmlinux;  // extracted ELF vmlinux; empty if none
  std::string release;
  std::string version;
  std::string modules;  // modules folder; empty if none
  std::string sha256;
};

// The default cache root: $LEAPFROG_CACHE, else /var/cache/leapfrog.
std::string default_cache_dir();

// Copies `image` into <cache>/kernels/<sha256>/, extracts its vmlinux when it
// is a bzImage, and records `modules` (default /lib/modules/<release> if it
// exists). Idempotent. Throws ImageError.
StoredKernel store_kernel(const std::string& cache_dir, const std::string& image,
                          const std::string& modules);

// The stored kernel with this sha256. Throws ImageError if it is not in this
// host's store.
StoredKernel load_kernel(const std::string& cache_dir, const std::string& sha256);

// Writes `out` (mode 0600): the cached VM image followed by a second newc
// cpio archive holding /etc/leapfrog/token (mode 0600) with `token` and a
// newline. The kernel unpacks both archives, so the token stays out of the
// cache and off QEMU's command line. Done here rather than by the image
// script: a VM launch waits for it, and the script's seven processes cost
// ~0.1 s of a ~3 s boot. Throws ImageError.
void write_initrd_with_token(const std::string& image, const std::string& token,
                             const std::string& out);

}  // namespace leapfrog::vm
