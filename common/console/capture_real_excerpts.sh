#!/usr/bin/env bash
# Captures the real console logs behind testdata/real_*.txt: boots the Debian
# kernel in QEMU (TCG, -cpu max; KVM is not usable on these machines) with a
# busybox initramfs whose /init provokes one kind of kernel report, and writes
# the whole serial console to OUTDIR/SCENARIO.log. The golden files are these
# logs trimmed by hand to the boot's end and the report.
#
# Usage: capture_real_excerpts.sh OUTDIR [SCENARIO...]
# Scenarios: sysrq (echo c > /proc/sysrq-trigger), hung (a writer on a frozen
# ext4), and, built from provoke/ against linux-headers-$KVER: warn, oops, bug,
# spin (soft lockup + RCU stall), deadlock (hung task on a mutex), list (list
# corruption caught by CONFIG_DEBUG_LIST). SCENARIO-panic
# runs SCENARIO with oops=panic panic_on_warn=1 hung_task_panic=1
# softlockup_panic=1, so the report ends in a follow-on panic.
# Needs linux-image-amd64, busybox-static, qemu-system-x86, cpio (and
# linux-headers-$KVER, gcc, make for the module scenarios).
set -euo pipefail

if [ $# -lt 1 ]; then
  echo "usage: $0 OUTDIR [SCENARIO...]" >&2
  exit 2
fi
out=$(realpath "$1")
shift
scenarios=("$@")
[ ${#scenarios[@]} -gt 0 ] || scenarios=(sysrq hung warn oops bug spin deadlock list)

here=$(dirname "$(realpath "$0")")
kver=${KVER:-$(basename "$(ls -d /lib/modules/*-amd64 | sort -V | tail -1)")}
kernel=/boot/vmlinuz-$kver
mods=/lib/modules/$kver/kernel
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$out"

module_built=false
build_module() {
  $module_built && return
  cp "$here"/provoke/leapfrog_provoke.c "$here"/provoke/Kbuild "$work"/
  make -s -C "/lib/modules/$kver/build" M="$work" modules >/dev/null
  module_built=true
}

# Writes the initramfs that runs scenario $1 to $work/$2.cpio.gz.
make_initramfs() {
  local scenario=$1 root=$work/root-$2
  mkdir -p "$root"/{bin,proc,sys,dev,mnt,lib/modules}
  chmod 755 "$root"
  cp /usr/bin/busybox "$root"/bin/
  {
    echo '#!/bin/busybox sh'
    echo '/bin/busybox --install -s /bin'
    echo 'mount -t proc proc /proc; mount -t sysfs sysfs /sys; mount -t devtmpfs dev /dev'
    echo 'echo 1 > /proc/sys/kernel/sysrq'
    echo "echo leapfrog-console: scenario $scenario"
  } >"$root"/init
  case $scenario in
    sysrq)
      echo 'echo c > /proc/sysrq-trigger' >>"$root"/init
      ;;
    hung)
      for m in lib/crc16 fs/mbcache fs/jbd2/jbd2 crypto/crc32c_generic fs/ext4/ext4 drivers/block/brd; do
        cp "$mods/$m.ko" "$root"/lib/modules/
      done
      cat >>"$root"/init <<'EOF'
for m in crc16 mbcache jbd2 crc32c_generic ext4; do insmod /lib/modules/$m.ko; done
insmod /lib/modules/brd.ko rd_nr=1 rd_size=8192
mke2fs -q /dev/ram0 && mount -t ext4 /dev/ram0 /mnt
echo 2 > /proc/sys/kernel/hung_task_timeout_secs
fsfreeze --freeze /mnt
touch /mnt/blocked &
sleep 12
fsfreeze --unfreeze /mnt
wait
EOF
      ;;
    warn | oops | bug | spin | deadlock | list)
      build_module
      cp "$work"/leapfrog_provoke.ko "$root"/lib/modules/
      {
        echo 'echo 1 > /proc/sys/kernel/watchdog_thresh'
        echo 'echo 2 > /proc/sys/kernel/hung_task_timeout_secs'
        echo 'echo 3 > /sys/module/rcupdate/parameters/rcu_cpu_stall_timeout'
        if [ "$scenario" = deadlock ]; then
          echo "insmod /lib/modules/leapfrog_provoke.ko what=deadlock &"
          echo 'sleep 10'
        else
          echo "insmod /lib/modules/leapfrog_provoke.ko what=$scenario"
        fi
      } >>"$root"/init
      ;;
    *)
      echo "unknown scenario $scenario" >&2
      exit 2
      ;;
  esac
  echo 'echo leapfrog-console: done; poweroff -f' >>"$root"/init
  chmod 755 "$root"/init
  (cd "$root" && find . | cpio -o -H newc 2>/dev/null | gzip -1) >"$work/$2.cpio.gz"
}

for scenario in "${scenarios[@]}"; do
  args="console=ttyS0 panic=-1"
  base=${scenario%-panic}
  [ "$base" = "$scenario" ] || args="$args oops=panic panic_on_warn=1 hung_task_panic=1 softlockup_panic=1"
  make_initramfs "$base" "$scenario"
  # panic=-1 reboots at once on a panic, and -no-reboot turns that into an exit.
  timeout 180 qemu-system-x86_64 -accel tcg -cpu max -m 512 -smp 2 -nographic -no-reboot \
    -monitor none -display none -kernel "$kernel" -initrd "$work/$scenario.cpio.gz" \
    -append "$args" -serial "file:$out/$scenario.log" || true
  echo "capture: scenario=$scenario log=$out/$scenario.log lines=$(wc -l <"$out/$scenario.log")"
done
