#!/usr/bin/env bash
# `make deb`: the Debian package of a built tree, with dpkg-deb.
#   deploy/debian/build-deb.sh BUILD_DIR OUT_DIR
# Leaves OUT_DIR/leapfrog_<version>_<arch>.deb and prints its path.
#
# Layout (the binaries find what they need beside themselves, as in BUILD_DIR):
#   /usr/lib/leapfrog/bin/        leapfrog, leapfrog-agent, leapfrog-agent-static,
#                                 vm/ (the VM image builder and its /init)
#   /usr/lib/leapfrog/dashboard/dist/    the dashboard's assets
#   /usr/lib/leapfrog/share/leapfrog/    leapfrog.config, widen/ (kernel builds),
#                                        kprobe-widen/ (the stock-kernel module's source)
#   /usr/bin/leapfrog, /usr/bin/leapfrog-agent   symlinks to the above
#   /lib/systemd/system/          the coordinator, agent@ and vm@ units
#   /etc/leapfrog/                their settings (conffiles)
# Version: $LEAPFROG_VERSION, else 0.<commit count>+g<commit>; maintainer:
# $LEAPFROG_MAINTAINER (a placeholder address by default: set it for a real
# archive).
set -euo pipefail
src="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
die() { echo "build-deb: $*" >&2; exit 2; }
[ $# -eq 2 ] || die "usage: build-deb.sh BUILD_DIR OUT_DIR"
build="$(cd "$1" && pwd)" || die "no build folder \"$1\""
out="$2"
for f in bin/leapfrog bin/leapfrog-agent bin/leapfrog-agent-static bin/vm/build-initramfs.sh bin/vm/init \
  dashboard/dist/index.html; do
  [ -e "$build/$f" ] || die "$build/$f is missing: build first (make build)"
done

version="${LEAPFROG_VERSION:-}"
if [ -z "$version" ]; then
  count="$(git -C "$src" rev-list --count HEAD 2>/dev/null || echo 0)"
  commit="$(git -C "$src" rev-parse --short=8 HEAD 2>/dev/null || echo unknown)"
  version="0.$count+g$commit"
fi
arch="$(dpkg --print-architecture)"
maintainer="${LEAPFROG_MAINTAINER:-Leapfrog developers <leapfrog@example.org>}"

stage="$(mktemp -d)"
trap 'rm -rf "$stage"' EXIT
root="$stage/root"
lib="$root/usr/lib/leapfrog"
share="$lib/share/leapfrog"
install -d "$lib/bin/vm" "$lib/dashboard" "$share" "$root/usr/bin" "$root/lib/systemd/system" \
  "$root/etc/leapfrog" "$root/usr/share/doc/leapfrog" "$root/DEBIAN"

install -m 0755 "$build/bin/leapfrog" "$build/bin/leapfrog-agent" "$lib/bin/"
# The agent the VM images carry: static on purpose (the guest has no libc).
install -m 0755 "$build/bin/leapfrog-agent-static" "$lib/bin/"
install -m 0755 "$build/bin/vm/build-initramfs.sh" "$build/bin/vm/init" "$lib/bin/vm/"
cp -r "$build/dashboard/dist" "$lib/dashboard/"
install -m 0644 "$src/deploy/kernel/leapfrog.config" "$share/"
install -d "$share/kprobe-widen"
# The delay-point series, one folder per kernel line (widen/6.1/, widen/6.12/).
for line in "$src"/deploy/kernel/widen/*/; do
  install -d "$share/widen/$(basename "$line")"
  install -m 0644 "$line"*.patch "$share/widen/$(basename "$line")/"
done
install -m 0644 "$src/deploy/kernel/kprobe-widen/Kbuild" "$src/deploy/kernel/kprobe-widen/leapfrog_widen_kprobe.c" \
  "$share/kprobe-widen/"
install -m 0755 "$src/deploy/kernel/kprobe-widen/build.sh" "$share/kprobe-widen/"
ln -s ../lib/leapfrog/bin/leapfrog "$root/usr/bin/leapfrog"
ln -s ../lib/leapfrog/bin/leapfrog-agent "$root/usr/bin/leapfrog-agent"
install -m 0644 "$src"/deploy/systemd/*.service "$root/lib/systemd/system/"
install -m 0644 "$src"/deploy/debian/etc/*.conf "$root/etc/leapfrog/"
install -d "$root/usr/lib/sysusers.d"
install -m 0644 "$src/deploy/debian/sysusers/leapfrog.conf" "$root/usr/lib/sysusers.d/leapfrog.conf"

# Debug symbols stay in the build tree; the package carries stripped binaries.
strip --strip-unneeded --remove-section=.comment --remove-section=.note "$lib/bin/leapfrog" \
  "$lib/bin/leapfrog-agent" "$lib/bin/leapfrog-agent-static"

doc="$root/usr/share/doc/leapfrog"
install -m 0644 "$src/docs/deploy.md" "$doc/deploy.md"
install -m 0644 "$src/deploy/debian/copyright" "$doc/copyright"
printf 'leapfrog (%s) unstable; urgency=medium\n\n  * Built from commit %s.\n\n -- %s  %s\n' \
  "$version" "$(git -C "$src" rev-parse HEAD 2>/dev/null || echo unknown)" "$maintainer" "$(date -R)" |
  gzip -9n > "$doc/changelog.gz"
chmod 0644 "$doc/changelog.gz"
# The VM agent is static on purpose (the guest image has no libc to share).
install -d "$root/usr/share/lintian/overrides"
install -m 0644 "$src/deploy/debian/lintian-overrides" "$root/usr/share/lintian/overrides/leapfrog"

# Shared-library dependencies from the binaries (dpkg-shlibdeps needs a
# debian/control to read; the static agent has none).
mkdir -p "$stage/debian"
printf 'Source: leapfrog\n\nPackage: leapfrog\nArchitecture: any\n' > "$stage/debian/control"
shlibs="$(cd "$stage" && dpkg-shlibdeps -O -e"root/usr/lib/leapfrog/bin/leapfrog" \
  -e"root/usr/lib/leapfrog/bin/leapfrog-agent" 2>/dev/null | sed -n 's/^shlibs:Depends=//p')"
[ -n "$shlibs" ] || die "dpkg-shlibdeps found no shared libraries"

size="$(du -sk --exclude=DEBIAN "$root" | cut -f1)"
cat > "$root/DEBIAN/control" <<CONTROL
Package: leapfrog
Version: $version
Architecture: $arch
Maintainer: $maintainer
Installed-Size: $size
Depends: $shlibs, postgresql, qemu-system-x86, busybox-static, cpio, e2fsprogs, xfsprogs, btrfs-progs, fuse3, acl
Recommends: linux-source-6.1, bubblewrap, bc, bison, flex, libelf-dev, libssl-dev, build-essential
Section: devel
Priority: optional
Homepage: https://localhost/leapfrog
Description: race tester for lockless path lookup in Linux kernels
 Leapfrog races permission, rename and mount changes against path
 lookups, in QEMU VMs booted with the kernel under test or on the host,
 and judges every lookup against the states its window allowed. A
 coordinator turns campaigns into jobs, stores every outcome in
 PostgreSQL and serves a dashboard; agents run the jobs.
CONTROL
printf '/etc/leapfrog/coordinator.conf\n/etc/leapfrog/agent.conf\n/etc/leapfrog/vm.conf\n' > "$root/DEBIAN/conffiles"

mkdir -p "$out"
deb="$out/leapfrog_${version}_${arch}.deb"
dpkg-deb --root-owner-group -Zxz --build "$root" "$deb" >/dev/null
echo "$deb"
