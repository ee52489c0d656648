#!/usr/bin/env bash
# Builds leapfrog_widen_kprobe.ko (Leapfrog's delay points on kprobes, for
# stock kernels) against each kernel's headers, outside the source tree:
#
#   build.sh --out DIR [RELEASE...]
#     RELEASE defaults to every kernel in /lib/modules. For each one it leaves
#     DIR/RELEASE/leapfrog_widen_kprobe.ko, or DIR/RELEASE/reason: one line
#     saying why there is no module (build-initramfs.sh puts it in the VM
#     image, and the agent reports it as the reason widening is off).
# Exits 0 when every release has one or the other: a kernel without headers
# is not a build failure.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
die() { echo "kprobe-widen: $*" >&2; exit 2; }

out=""
releases=()
while [ $# -gt 0 ]; do
  case "$1" in
    --out) out="$2"; shift 2 ;;
    -*) die "unknown argument \"$1\"" ;;
    *) releases+=("$1"); shift ;;
  esac
done
[ -n "$out" ] || die "usage: build.sh --out DIR [RELEASE...]"
if [ ${#releases[@]} -eq 0 ]; then
  for d in /lib/modules/*/; do
    [ -d "$d" ] && releases+=("$(basename "$d")")
  done
fi

sources=("$here/Kbuild" "$here/leapfrog_widen_kprobe.c")

build_one() {
  local release="$1" dest="$out/$1" kdir="/lib/modules/$1/build" key log
  mkdir -p "$dest"
  if [ ! -f "$kdir/Makefile" ] || [ ! -f "$kdir/Module.symvers" ]; then
    rm -f "$dest/leapfrog_widen_kprobe.ko" "$dest/key"
    echo "no headers for kernel $release ($kdir is missing: Debian: linux-headers-$release, see deploy/install-deps.sh)" \
      > "$dest/reason"
    return 0
  fi
  if ! grep -qs '^CONFIG_KPROBES=y' "$kdir/.config" || ! grep -qs '^CONFIG_KRETPROBES=y' "$kdir/.config"; then
    rm -f "$dest/leapfrog_widen_kprobe.ko" "$dest/key"
    echo "kernel $release has no kprobes (CONFIG_KPROBES and CONFIG_KRETPROBES must be y)" > "$dest/reason"
    return 0
  fi
  # Rebuild when the sources or the headers change (an updated headers
  # package rewrites Module.symvers).
  key="$( {
    sha256sum "${sources[@]}" | cut -d' ' -f1
    stat -L -c '%n %s %.9Y' "$kdir/Module.symvers" "$kdir/.config"
  } | sha256sum | cut -c1-32)"
  if [ -f "$dest/leapfrog_widen_kprobe.ko" ] && [ "$(cat "$dest/key" 2>/dev/null)" = "$key" ]; then
    return 0
  fi
  rm -rf "$dest/src"
  mkdir -p "$dest/src"
  cp "${sources[@]}" "$dest/src/"
  log="$dest/build.log"
  if make -C "$kdir" M="$dest/src" modules > "$log" 2>&1; then
    cp "$dest/src/leapfrog_widen_kprobe.ko" "$dest/leapfrog_widen_kprobe.ko"
    echo "$key" > "$dest/key"
    rm -f "$dest/reason"
  else
    rm -f "$dest/leapfrog_widen_kprobe.ko" "$dest/key"
    echo "the module did not build against $kdir: $(grep -m1 -E 'error|Error' "$log" || tail -n1 "$log")" \
      > "$dest/reason"
    echo "kprobe-widen: $release: $(cat "$dest/reason") (log: $log)" >&2
  fi
}

for r in "${releases[@]}"; do
  build_one "$r"
  if [ -f "$out/$r/leapfrog_widen_kprobe.ko" ]; then
    echo "kprobe-widen: $r: $out/$r/leapfrog_widen_kprobe.ko"
  else
    echo "kprobe-widen: $r: no module: $(cat "$out/$r/reason")"
  fi
done
