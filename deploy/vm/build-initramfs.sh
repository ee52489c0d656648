#!/usr/bin/env bash
# Builds the initramfs a Leapfrog VM boots: busybox-static, the static
# leapfrog-agent, the kernel's virtio modules (when they are modules) and /init.
# Images are cached by content hash; nothing is downloaded.
#
#   build-initramfs.sh image --agent PATH --release KERNEL_RELEASE [--modules DIR]
#                            [--cache DIR] [--busybox PATH]
#     prints the path of the cached image (uncompressed newc cpio).
# The launcher appends the coordinator's token to a copy of the image for each
# run (vm::write_initrd_with_token), so the cached image holds no secret.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
die() { echo "build-initramfs: $*" >&2; exit 2; }

# Dependency order of the virtio network stack (PITFALLS.md).
modules=(virtio_ring virtio virtio_pci_legacy_dev virtio_pci_modern_dev virtio_pci failover net_failover virtio_net)

mode="${1:-}"
[ -n "$mode" ] || die "usage: build-initramfs.sh image ..."
shift
agent="" release="" moddir="" busybox="/bin/busybox"
cache="${LEAPFROG_CACHE:-/var/cache/leapfrog}/images"
while [ $# -gt 0 ]; do
  case "$1" in
    --agent) agent="$2"; shift 2 ;;
    --release) release="$2"; shift 2 ;;
    --modules) moddir="$2"; shift 2 ;;
    --cache) cache="$2"; shift 2 ;;
    --busybox) busybox="$2"; shift 2 ;;
    *) die "unknown argument \"$1\"" ;;
  esac
done

[ "$mode" = image ] || die "unknown mode \"$mode\""
[ -x "$agent" ] || die "no agent binary \"$agent\""
[ -n "$release" ] || die "--release is required"

# Fast path, taken by every VM launch after the first: the inputs' stat
# (size, inode, mtime, ctime) names the content key of an image built from
# them. Hashing the 50 MB agent and searching the modules tree take ~0.8 s,
# which is a fifth of a VM's whole boot under TCG. A module package updated
# in place reruns depmod, which changes modules.dep.
stat_files=("$agent" "$busybox" "$here/init" "$here/build-initramfs.sh")
if [ -n "$moddir" ]; then stat_files+=("$moddir" "$moddir/modules.dep" "$moddir/modules.builtin"); fi
fingerprint="$( {
  echo "release $release modules $moddir"
  # A missing file (a modules folder without modules.dep) is part of the
  # fingerprint too, as stat's message.
  stat -L -c '%n %s %i %.9Y %.9Z' "${stat_files[@]}" 2>&1 || true
} | sha256sum | cut -c1-32)"
if [ -f "$cache/by-stat/$fingerprint" ]; then
  known="$(cat "$cache/by-stat/$fingerprint")"
  if [ -f "$cache/$known.cpio" ]; then
    echo "$cache/$known.cpio"
    exit 0
  fi
fi
remember() {
  mkdir -p "$cache/by-stat"
  echo "$1" > "$cache/by-stat/$fingerprint.tmp.$$"
  mv "$cache/by-stat/$fingerprint.tmp.$$" "$cache/by-stat/$fingerprint"
}
[ -x "$busybox" ] || die "no busybox \"$busybox\" (install busybox-static)"
if ldd "$busybox" >/dev/null 2>&1; then die "\"$busybox\" is not static (install busybox-static)"; fi
if ldd "$agent" >/dev/null 2>&1; then die "\"$agent\" is not static (build leapfrog-agent-static)"; fi
command -v cpio >/dev/null || die "cpio is missing (install cpio)"

# The module files to ship, in load order; built-in ones are skipped.
module_files=()
module_names=()
if [ -n "$moddir" ]; then
  [ -d "$moddir" ] || die "no modules folder \"$moddir\""
  for m in "${modules[@]}"; do
    f="$(find "$moddir" -name "$m.ko" -o -name "$m.ko.xz" -o -name "$m.ko.zst" -o -name "$m.ko.gz" | head -n 1)"
    if [ -n "$f" ]; then
      module_files+=("$f")
      module_names+=("$m")
    elif ! grep -qs "/$m.ko\$" "$moddir/modules.builtin"; then
      echo "build-initramfs: module $m is neither in \"$moddir\" nor built in" >&2
    fi
  done
fi

key="$( {
  echo "release $release"
  echo "modules ${module_names[*]:-}"
  sha256sum "$agent" "$busybox" "$here/init" "$here/build-initramfs.sh" | cut -d' ' -f1
  for f in "${module_files[@]}"; do sha256sum "$f" | cut -d' ' -f1; done
} | sha256sum | cut -c1-32)"
target="$cache/$key.cpio"
if [ -f "$target" ]; then
  remember "$key"
  echo "$target"
  exit 0
fi

mkdir -p "$cache"
stage="$(mktemp -d "$cache/.stage.XXXXXX")"
trap 'rm -rf "$stage"' EXIT
chmod 0755 "$stage"
mkdir -p "$stage"/{bin,sbin,dev,proc,sys,tmp,etc/leapfrog,lib/modules/leapfrog,var/tmp,run}
# What /init mounts with one `mount -a` (proc and dev come first).
cat > "$stage/etc/fstab" <<'FSTAB'
sys /sys sysfs defaults 0 0
tmp /tmp tmpfs mode=1777 0 0
var /var/tmp tmpfs mode=1777 0 0
FSTAB
install -m 0755 "$busybox" "$stage/bin/busybox"
strip -o "$stage/bin/leapfrog-agent" "$agent" 2>/dev/null || cp "$agent" "$stage/bin/leapfrog-agent"
chmod 0755 "$stage/bin/leapfrog-agent"
install -m 0755 "$here/init" "$stage/init"
# The kernel opens /dev/console for /init before anything is mounted.
mknod -m 0600 "$stage/dev/console" c 5 1 || die "cannot create dev/console (needs root)"
: > "$stage/etc/leapfrog/modules"
for i in "${!module_files[@]}"; do
  f="${module_files[$i]}" m="${module_names[$i]}"
  case "$f" in
    *.xz) xz -dc "$f" > "$stage/lib/modules/leapfrog/$m.ko" ;;
    *.zst) zstd -qdc "$f" > "$stage/lib/modules/leapfrog/$m.ko" ;;
    *.gz) gzip -dc "$f" > "$stage/lib/modules/leapfrog/$m.ko" ;;
    *) cp "$f" "$stage/lib/modules/leapfrog/$m.ko" ;;
  esac
  echo "$m" >> "$stage/etc/leapfrog/modules"
done
(cd "$stage" && find . -mindepth 1 | sort | cpio --quiet -o -H newc -R 0:0) > "$stage.cpio"
mv "$stage.cpio" "$target"
remember "$key"
echo "$target"
