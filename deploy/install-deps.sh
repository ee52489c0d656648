#!/usr/bin/env bash
# Installs the Debian 12 packages Leapfrog needs to build, test and demo.
# Idempotent: it only calls apt-get when a package is missing.
set -euo pipefail

packages=(
  # toolchain
  build-essential cmake ninja-build pkg-config clang-format ccache
  # libraries
  libgtest-dev libgmock-dev libbenchmark-dev libcli11-dev nlohmann-json3-dev libspdlog-dev libfmt-dev
  libsimdjson-dev
  libfuse3-dev libacl1-dev
  libgrpc++-dev libprotobuf-dev protobuf-compiler protobuf-compiler-grpc
  # libboost-dev: Boost.Process, and Boost.Beast on Asio for the HTTP server
  libpqxx-dev libpq-dev libboost-dev libboost-filesystem-dev
  # the embedded database server
  postgresql
  # runtime tools used by the scenarios and tests
  fuse3 acl e2fsprogs xfsprogs btrfs-progs util-linux
  # VMs
  qemu-system-x86 busybox-static linux-image-amd64 cpio xz-utils zstd libssl-dev
  # the current long-term line's stock kernel beside 6.1's, with the headers
  # the kprobe delay-point module is built against (issue 48)
  linux-image-6.12-amd64 linux-headers-6.12-amd64
  # dashboard: the HTTP handlers' request and response types (cpp-httplib),
  # front-end build (Node; npm below), browser tests
  libcpp-httplib-dev nodejs chromium
  # kernel builds (leapfrog kernel build; issue 7), run as the build user in
  # bubblewrap's namespaces (common/kernel/build_sandbox.h)
  linux-source-6.1 linux-source-6.12 bc bison flex libelf-dev bubblewrap
  # exports (issue 21): the JSON Schema, XSD and KTAP checks of the export tests
  python3-jsonschema libxml2-utils python3
  # fuzz targets (make fuzz; issue 19): clang with libFuzzer, ASan and UBSan
  clang libfuzzer-14-dev
  # metrics (issue 21): prometheus-cpp's registry and text format for GET
  # /metrics; promtool (in prometheus) checks the expositions in the tests
  prometheus-cpp-dev prometheus
  # packaging (make deb; issue 21): dpkg-shlibdeps and lintian check the
  # package, systemd-analyze its units, python3-yaml reads deploy/kubernetes/
  dpkg-dev lintian systemd python3-yaml
  # notifications (issue 21): mails through libcurl's SMTP; the tests' SMTP sink
  libcurl4-openssl-dev python3-aiosmtpd
)

# The headers of each installed Debian kernel (linux-image-6.1.0-57-amd64 ->
# linux-headers-6.1.0-57-amd64), which the kprobe delay-point module is built
# against (deploy/kernel/kprobe-widen/); before any is installed, those of the
# one linux-image-amd64 brings. Headers the archive no longer has are skipped.
images="$(dpkg-query -W -f='${Package} ${Status}\n' 'linux-image-[0-9]*' 2>/dev/null |
  awk '$NF == "installed" && $1 !~ /-(dbg|unsigned)$/ { sub(/^linux-image-/, "", $1); print $1 }' || true)"
if [ -z "$images" ]; then
  packages+=(linux-headers-amd64)
fi
for abi in $images; do
  if apt-cache show "linux-headers-$abi" >/dev/null 2>&1; then
    packages+=("linux-headers-$abi")
  else
    echo "install-deps: no linux-headers-$abi in the archive: the kprobe widening module is not built for that kernel" >&2
  fi
done

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

# A Node.js from elsewhere (NodeSource) brings its own npm; Debian's nodejs needs the npm package.
command -v npm >/dev/null 2>&1 || missing+=(npm)

# The system user kernel builds run as (common/kernel/build_sandbox.h): no
# home, no shell, no group but its own.
ensure_build_user() {
  getent passwd leapfrog-build >/dev/null && return 0
  if [ "$(id -u)" -ne 0 ]; then
    echo "install-deps: no user leapfrog-build for the kernel build sandbox (run as root to create it)" >&2
    return 0
  fi
  useradd --system --user-group --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin \
    leapfrog-build
}

if [ ${#missing[@]} -eq 0 ]; then
  ensure_build_user
  exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
  echo "install-deps: missing packages: ${missing[*]} (run as root to install them)" >&2
  exit 2
fi

echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
ensure_build_user
