#!/usr/bin/env bash
# Builds the initramfs a Leapfrog VM boots: busybox-static, the static
# leapfrog-agent, the kernel's virtio modules (when they are modules), /init,
# and Leapfrog's kprobe delay-point module when one was built for the kernel.
# Images are cached by content hash; nothing is downloaded.
#
#   build-initramfs.sh image --agent PATH --release KERNEL_RELEASE [--modules DIR]
#                            [--cache DIR] [--busybox PATH] [--kprobe-dir DIR]
#     prints the path of the cached image (uncompressed newc cpio).
#     --kprobe-dir: where deploy/kernel/kprobe-widen/build.sh left
#     <release>/leapfrog_widen_kprobe.ko or <release>/reason (default: the
#     kprobe-widen folder beside this script, which the build fills).
# The launcher appends the coordinator's token to a copy of the image for each
# run (vm::write_initrd_with_token), so the cached image holds no secret.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
die() { echo "build-initramfs: $*" >&2; exit 2; }

# Dependency order of the virtio network stack (PITFALLS.md).
modules=(virtio_ring virtio virtio_pci_legacy_dev virtio_pci_modern_dev virtio_pci failover net_failover virtio_net)
# The file systems under test and loop devices. Their dependencies (and the
# crypto modules they ask for by alias) are read from the kernel's
# modules.dep, modules.softdep and modules.alias, and loaded first. A file
# system whose module is neither there nor built in is left out: the agent
# then does not offer it (agent/connect.cc).
fs_modules=(loop ext4 xfs btrfs fuse overlay)
# The programs the agent runs to make a fresh file system per job, with the
# shared libraries they need (the rest of the image is static).
fs_programs=(mkfs.ext4 mkfs.xfs mkfs.btrfs)

mode="${1:-}"
[ -n "$mode" ] || die "usage: build-initramfs.sh image ..."
shift
agent="" release="" moddir="" busybox="/bin/busybox" kprobe_dir="$here/kprobe-widen"
cache="${LEAPFROG_CACHE:-/var/cache/leapfrog}/images"
while [ $# -gt 0 ]; do
  case "$1" in
    --agent) agent="$2"; shift 2 ;;
    --release) release="$2"; shift 2 ;;
    --modules) moddir="$2"; shift 2 ;;
    --cache) cache="$2"; shift 2 ;;
    --busybox) busybox="$2"; shift 2 ;;
    --kprobe-dir) kprobe_dir="$2"; shift 2 ;;
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
find_program() {
  local d
  for d in /usr/sbin /sbin /usr/bin /bin; do
    if [ -x "$d/$1" ]; then echo "$d/$1"; return 0; fi
  done
  return 1
}
program_files=()
program_names=()
for p in "${fs_programs[@]}"; do
  if f="$(find_program "$p")"; then
    program_files+=("$(readlink -f "$f")")
    program_names+=("$p")
    stat_files+=("$f")
  fi
done
if [ -n "$moddir" ]; then stat_files+=("$moddir" "$moddir/modules.dep" "$moddir/modules.builtin"); fi
kprobe_ko="$kprobe_dir/$release/leapfrog_widen_kprobe.ko"
stat_files+=("$kprobe_ko" "$kprobe_dir/$release/reason")
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
declare -A module_seen=()
# A module's path (relative to $moddir) from modules.dep, or nothing.
module_path() {
  awk -F: -v m="$1" '{ n = $1; sub(/.*\//, "", n); sub(/\.ko(\.(xz|zst|gz))?$/, "", n);
    gsub(/-/, "_", n); if (n == m) { print $1; exit } }' "$moddir/modules.dep"
}
module_name() { local n="${1##*/}"; n="${n%%.ko*}"; echo "${n//-/_}"; }
# Adds module $1 after its soft and hard dependencies (depth first), once.
add_module() {
  local m="${1//-/_}" path dep soft alias
  [ -z "${module_seen[$m]:-}" ] || return 0
  module_seen[$m]=1
  if [ ! -f "$moddir/modules.dep" ]; then
    # A folder of loose modules: take each by name, in the listed order,
    # with no dependencies to resolve.
    path="$(cd "$moddir" && find . -name "$m.ko" -o -name "$m.ko.xz" -o -name "$m.ko.zst" -o -name "$m.ko.gz" | head -n 1)"
    if [ -n "$path" ]; then
      module_files+=("$moddir/${path#./}")
      module_names+=("$m")
    fi
    return 0
  fi
  path="$(module_path "$m")"
  if [ -z "$path" ]; then
    if ! grep -qsE "/${m//_/[-_]}\.ko\$" "$moddir/modules.builtin"; then
      echo "build-initramfs: module $m is neither in \"$moddir\" nor built in" >&2
    fi
    return 0
  fi
  # "softdep M pre: A B": modules (or aliases) M asks for at run time, such as
  # ext4's crypto-crc32c, which no modprobe in the image could load later.
  for soft in $(awk -v m="$m" '$1 == "softdep" && $2 == m { pre = 0
      for (i = 3; i <= NF; i++) { if ($i == "pre:") pre = 1; else if ($i == "post:") pre = 0; else if (pre) print $i } }' \
      "$moddir/modules.softdep" 2>/dev/null); do
    if [ -n "$(module_path "$soft")" ]; then add_module "$soft"; continue; fi
    # An alias: the generic implementation when there is one (it needs no CPU feature).
    alias="$(awk -v a="$soft" '$1 == "alias" && $2 == a { print $3 }' "$moddir/modules.alias" 2>/dev/null |
      awk '/_generic$/ { g = $0 } NR == 1 { f = $0 } END { print (g != "" ? g : f) }')"
    [ -n "$alias" ] && add_module "$alias"
  done
  # modules.dep lists every module this one needs, transitively.
  for dep in $(awk -F: -v p="$path" '$1 == p { print $2; exit }' "$moddir/modules.dep"); do
    add_module "$(module_name "$dep")"
  done
  module_files+=("$moddir/$path")
  module_names+=("$m")
}
if [ -n "$moddir" ]; then
  [ -d "$moddir" ] || die "no modules folder \"$moddir\""
  [ -f "$moddir/modules.dep" ] ||
    echo "build-initramfs: no modules.dep in \"$moddir\": its modules are taken by name, without their dependencies" >&2
  for m in "${modules[@]}" "${fs_modules[@]}"; do add_module "$m"; done
fi

# The kprobe delay points (deploy/kernel/kprobe-widen/), only for the kernel
# whose vermagic the module has: the kernel's own modules say what it is.
# Without the module the image says why, in /run/leapfrog-widen-kprobe, for
# the agent to report as the reason widening is off.
vermagic_of() {
  case "$1" in
    *.xz) xz -dc "$1" ;;
    *.zst) zstd -qdc "$1" ;;
    *.gz) gzip -dc "$1" ;;
    *) cat "$1" ;;
  esac | tr '\0' '\n' | sed -n 's/^vermagic=//p' || true
}
kprobe_reason=""
if [ -f "$kprobe_ko" ]; then
  want="$(vermagic_of "$kprobe_ko")"
  if [ ${#module_files[@]} -gt 0 ]; then
    have="$(vermagic_of "${module_files[0]}")"
    what="its modules' vermagic"
  else
    # No modules to compare with: the release at least must match.
    have="$release"
    want="${want%% *}"
    what="its release"
  fi
  if [ "$want" != "$have" ]; then
    kprobe_reason="the kprobe module's vermagic \"$want\" does not match the kernel's ($what: \"$have\")"
    kprobe_ko=""
  fi
else
  kprobe_reason="$(cat "$kprobe_dir/$release/reason" 2>/dev/null || true)"
  [ -n "$kprobe_reason" ] ||
    kprobe_reason="no kprobe module was built for kernel $release (deploy/kernel/kprobe-widen/build.sh builds one for each kernel in /lib/modules with headers)"
  kprobe_ko=""
fi

key="$( {
  echo "release $release"
  echo "modules ${module_names[*]:-}"
  echo "programs ${program_names[*]:-}"
  sha256sum "$agent" "$busybox" "$here/init" "$here/build-initramfs.sh" | cut -d' ' -f1
  for f in "${program_files[@]}"; do sha256sum "$f" | cut -d' ' -f1; done
  for f in "${module_files[@]}"; do sha256sum "$f" | cut -d' ' -f1; done
  if [ -n "$kprobe_ko" ]; then sha256sum "$kprobe_ko" | cut -d' ' -f1; fi
  echo "kprobe $kprobe_reason"
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
# mkfs programs and the shared libraries they load, at the paths ldd gives
# (the dynamic loader among them).
for i in "${!program_files[@]}"; do
  install -m 0755 "${program_files[$i]}" "$stage/sbin/${program_names[$i]}"
  for lib in $(ldd "${program_files[$i]}" 2>/dev/null | awk '/=> \// { print $3 } /^\t\// { print $1 }'); do
    [ -e "$stage$lib" ] && continue
    mkdir -p "$stage$(dirname "$lib")"
    cp -L "$lib" "$stage$lib"
  done
done
[ -f /etc/mke2fs.conf ] && cp /etc/mke2fs.conf "$stage/etc/mke2fs.conf"
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
# Not in etc/leapfrog/modules: /init loads it last and keeps insmod's error.
if [ -n "$kprobe_ko" ]; then
  cp "$kprobe_ko" "$stage/lib/modules/leapfrog/leapfrog_widen_kprobe.ko"
else
  echo "$kprobe_reason" > "$stage/run/leapfrog-widen-kprobe"
fi
(cd "$stage" && find . -mindepth 1 | sort | cpio --quiet -o -H newc -R 0:0) > "$stage.cpio"
mv "$stage.cpio" "$target"
remember "$key"
echo "$target"
