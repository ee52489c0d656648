#!/usr/bin/env bash
# make demo: every scenario once on tmpfs, plus the positive control (FUSE with
# kernel caching, where stale results really happen) and its negative (FUSE
# without caching). Exits 0 only if the control fires and tmpfs stays clean.
set -uo pipefail
build=${1:-build}
agent="$build/bin/leapfrog-agent"
if [ "$(id -u)" -ne 0 ]; then
  echo "make demo needs root: scenarios mount file systems in private mount namespaces" >&2
  exit 2
fi

printf '%-16s %-12s %-10s %10s %10s %10s  %s\n' scenario fs verdict checked hits "ops/s" violations
fail=0
run() {
  local scenario=$1 fs=$2 want=$3 duration=$4
  local out rc
  out=$("$agent" run --scenario "$scenario" --fs "$fs" --duration "$duration" --json 2>/tmp/leapfrog-demo.err)
  rc=$?
  if [ $rc -eq 2 ] || [ -z "$out" ]; then
    printf '%-16s %-12s %-10s %s\n' "$scenario" "$fs" error "$(head -c 200 /tmp/leapfrog-demo.err)"
    fail=1
    return
  fi
  python3 - "$out" <<'PY'
import json, sys
o = json.loads(sys.argv[1])
checked = o["lookups_checked"] + o["offsets_checked"]
kinds = ", ".join(f"{k}={v}" for k, v in o["violations_by_kind"].items()) or "-"
print(f'{o["scenario"]:<16} {o["fs"]:<12} {o["verdict"]:<10} {checked:>10} {o["race_window_hits"]:>10} {o["ops_per_sec"]:>10.0f}  {kinds}')
PY
  case "$want" in
    clean) [ $rc -eq 0 ] || fail=1 ;;
    violation) [ $rc -eq 1 ] || fail=1 ;;
  esac
}

for s in setattr-lookup chown-lookup acl-exec-deny rename-lookup mount-lookup dotdot-lookup symlink-lookup dirfd-lookup foffset; do
  run "$s" tmpfs clean 1s
done
"$agent" run --scenario lookup-scale --param point_ms=50 --param mode=0 --param test=0 --json >/dev/null || fail=1
echo "lookup-scale     tmpfs        (ops/s per task count: leapfrog-agent run --scenario lookup-scale)"
echo
echo "positive control: FUSE passthrough with kernel attribute/entry caching, mutations underneath"
run setattr-lookup fuse-cached violation 2s
run rename-lookup fuse-cached violation 2s
echo "negative control: the same without caching"
run setattr-lookup fuse-direct clean 2s
run rename-lookup fuse-direct clean 2s
rm -f /tmp/leapfrog-demo.err
echo
if [ $fail -eq 0 ]; then
  echo "demo: OK (tmpfs and fuse-direct clean, the positive control fired)"
else
  echo "demo: FAILED (see the table above)"
fi
exit $fail
