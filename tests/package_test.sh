#!/usr/bin/env bash
# The Debian package and the deployment files (issue 21 §4), checked by
# their real tools:
#   1. `deploy/debian/build-deb.sh` builds the package from the build tree;
#   2. lintian finds no error in it;
#   3. it installs into a fresh root with `dpkg --root`, and every file the
#      binaries look for beside themselves is where they look;
#   4. `systemd-analyze verify` accepts the units as installed there;
#   5. the Kubernetes manifests parse and agree (tests/check_kubernetes.py),
#      and the checker fires on a manifest broken on purpose.
#   package_test.sh SOURCE_DIR BUILD_DIR
set -euo pipefail
src="$1"
build="$2"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
fail() { echo "package test: $*" >&2; exit 1; }

deb="$(LEAPFROG_VERSION=1.0~test bash "$src/deploy/debian/build-deb.sh" "$build" "$work/dist")"
[ -f "$deb" ] || fail "build-deb.sh made no package"
echo "built $(basename "$deb") ($(du -k "$deb" | cut -f1) KiB)"

# lintian: errors fail the test; warnings are printed. Run as root here, so
# it must be told that is fine.
lintian --allow-root --tag-display-limit 0 \
  "$deb" > "$work/lintian.out" 2>&1 || true
cat "$work/lintian.out"
if grep -q '^E: ' "$work/lintian.out"; then fail "lintian reports errors"; fi
# Its positive control: a package with a bogus maintainer address.
bad="$(LEAPFROG_VERSION=1.0~bad LEAPFROG_MAINTAINER='Nobody <nobody@localhost>' \
  bash "$src/deploy/debian/build-deb.sh" "$build" "$work/bad")"
lintian --allow-root "$bad" > "$work/lintian-bad.out" 2>&1 || true
grep -q '^E: leapfrog: bogus-mail-host' "$work/lintian-bad.out" ||
  { cat "$work/lintian-bad.out"; fail "lintian did not refuse a package maintained at localhost"; }

# A fresh root with an empty dpkg database.
root="$work/root"
mkdir -p "$root/var/lib/dpkg/info" "$root/var/lib/dpkg/updates"
: > "$root/var/lib/dpkg/status"
: > "$root/var/lib/dpkg/available"
dpkg --root="$root" --force-depends --force-script-chrootless --log=/dev/null -i "$deb" > "$work/dpkg.out" 2>&1 ||
  { cat "$work/dpkg.out"; fail "dpkg --root -i failed"; }
dpkg --root="$root" -s leapfrog | grep -q '^Status: install ok installed' || fail "dpkg does not list leapfrog as installed"
for f in usr/bin/leapfrog usr/bin/leapfrog-agent usr/lib/leapfrog/bin/leapfrog-agent-static \
  usr/lib/leapfrog/bin/vm/build-initramfs.sh usr/lib/leapfrog/bin/vm/init \
  usr/lib/leapfrog/dashboard/dist/index.html usr/lib/leapfrog/share/leapfrog/leapfrog.config \
  usr/lib/leapfrog/share/leapfrog/kprobe-widen/build.sh \
  lib/systemd/system/leapfrog-coordinator.service lib/systemd/system/leapfrog-agent@.service \
  lib/systemd/system/leapfrog-vm@.service etc/leapfrog/coordinator.conf etc/leapfrog/agent.conf \
  etc/leapfrog/vm.conf usr/lib/sysusers.d/leapfrog.conf usr/share/doc/leapfrog/copyright usr/share/doc/leapfrog/deploy.md; do
  [ -e "$root/$f" ] || fail "the package did not install /$f"
done
# The widening series is the one in the tree, patch for patch.
diff -r "$src/deploy/kernel/widen" "$root/usr/lib/leapfrog/share/leapfrog/widen" || fail "widen/ differs from deploy/kernel/widen"
# The installed CLI runs, and finds its config fragment through the symlink.
"$root/usr/bin/leapfrog" --help | grep -q "coordinator and command line" || fail "the installed leapfrog does not run"
"$root/usr/bin/leapfrog-agent" --help > /dev/null || fail "the installed leapfrog-agent does not run"
[ "$(readlink -f "$root/usr/bin/leapfrog")" = "$root/usr/lib/leapfrog/bin/leapfrog" ] || fail "/usr/bin/leapfrog points elsewhere"
dpkg-query --admindir="$root/var/lib/dpkg" -W -f='${Conffiles}\n' leapfrog | grep -q /etc/leapfrog/agent.conf ||
  fail "the settings are not conffiles"

# The units as installed: instance units are verified through an instance.
units="$root/lib/systemd/system"
mkdir -p "$work/units"
cp "$units/leapfrog-coordinator.service" "$work/units/"
cp "$units/leapfrog-agent@.service" "$work/units/leapfrog-agent@1.service"
cp "$units/leapfrog-vm@.service" "$work/units/leapfrog-vm@debian.service"
# verify checks that each ExecStart binary exists: point them into the root.
sed -i "s|/usr/bin/|$root/usr/bin/|g; s|/etc/leapfrog/|$root/etc/leapfrog/|g" "$work"/units/*.service
SYSTEMD_LOG_LEVEL=warning systemd-analyze verify --man=no "$work"/units/leapfrog-*.service > "$work/verify.out" 2>&1 ||
  { cat "$work/verify.out"; fail "systemd-analyze verify refused the units"; }
if grep -v "Failed to .*bus" "$work/verify.out" | grep -q .; then
  cat "$work/verify.out"
  fail "systemd-analyze verify complains"
fi
# Its positive control: a unit with a typo in a key must be refused.
sed 's/^ExecStart=/ExecStrat=/' "$work/units/leapfrog-coordinator.service" > "$work/units/broken.service"
if SYSTEMD_LOG_LEVEL=warning systemd-analyze verify --man=no "$work/units/broken.service" > "$work/broken.out" 2>&1 &&
  ! grep -q "ExecStrat\|Unknown key" "$work/broken.out"; then
  fail "systemd-analyze verify accepted a unit without ExecStart"
fi

# Kubernetes manifests, and the checker's positive control.
python3 "$src/tests/check_kubernetes.py" "$src/deploy/kubernetes" || fail "the Kubernetes manifests disagree"
cp -r "$src/deploy/kubernetes" "$work/k8s"
sed -i 's/--coordinator=leapfrog-coordinator:7070/--coordinator=leapfrog-coordinator:7071/' "$work/k8s/agents.yaml"
if python3 "$src/tests/check_kubernetes.py" "$work/k8s" > "$work/k8s.out"; then
  fail "the manifest checker missed an agent dialling a port no Service offers"
fi
grep -q "dials leapfrog-coordinator:7071" "$work/k8s.out" || { cat "$work/k8s.out"; fail "wrong complaint"; }
echo "package test: ok"
