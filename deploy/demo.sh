#!/usr/bin/env bash
# make demo: start `leapfrog up` (embedded PostgreSQL, coordinator, 2 local
# agents) in a temp data folder, run a campaign of every scenario on tmpfs and
# one of the positive control (FUSE with kernel caching, where stale results
# really happen; without caching, where they must not), print the summary and
# shut everything down. Exits 0 only if the control fires and tmpfs is clean.
set -uo pipefail
build=${1:-build}
bin="$(cd "$build/bin" && pwd)"
if [ "$(id -u)" -ne 0 ]; then
  echo "make demo needs root: scenarios mount file systems in private mount namespaces" >&2
  exit 2
fi

data=$(mktemp -d /var/tmp/leapfrog-demo-XXXXXX)
chmod 755 "$data"
up_pid=""
cleanup() {
  if [ -n "$up_pid" ] && kill -0 "$up_pid" 2>/dev/null; then
    kill -TERM "$up_pid"
    wait "$up_pid" 2>/dev/null
  fi
  rm -rf "$data"
}
trap cleanup EXIT

"$bin/leapfrog" --data-dir "$data" up --agents 2 >"$data/up.log" 2>&1 &
up_pid=$!
for _ in $(seq 1 300); do
  [ -s "$data/address" ] && break
  kill -0 "$up_pid" 2>/dev/null || break
  sleep 0.1
done
if [ ! -s "$data/address" ]; then
  echo "demo: leapfrog up did not start:" >&2
  tail -20 "$data/up.log" >&2
  exit 2
fi
lf() { "$bin/leapfrog" --data-dir "$data" "$@"; }
echo "leapfrog up: coordinator $(cat "$data/address"), 2 agents, data in $data"
echo

all=(setattr-lookup chown-lookup acl-exec-deny rename-lookup mount-lookup dotdot-lookup symlink-lookup dirfd-lookup foffset lookup-scale)
args=()
for s in "${all[@]}"; do args+=(--scenario "$s"); done
echo "campaign 1: every scenario on tmpfs"
tmpfs_json=$(lf campaign run --name demo-tmpfs "${args[@]}" --fs tmpfs --duration 1s \
  --param point_ms=50 --param warmup_ms=50 --param samples=3 --param mode=0 --param test=0 --wait --json) || exit 2
echo "campaign 2: the positive control (fuse-cached) and its negative (fuse-direct)"
control_json=$(lf campaign run --name demo-control --scenario setattr-lookup --scenario rename-lookup \
  --fs fuse-cached --fs fuse-direct --duration 5s --wait --json) || exit 2
echo

tmpfs_id=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["campaign"])' "$tmpfs_json")
control_id=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["campaign"])' "$control_json")
lf outcomes --campaign "$tmpfs_id"
lf outcomes --campaign "$control_id"
echo

lf outcomes --campaign "$tmpfs_id" --json >"$data/tmpfs.json"
lf outcomes --campaign "$control_id" --json >"$data/control.json"
python3 - "$data/tmpfs.json" "$data/control.json" <<'PY'
import json, sys
tmpfs, control = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
def verdict(o): return o["outcome"]["verdict"]
ok = True
bad = [o["spec"]["scenario"] for o in tmpfs if verdict(o) != "VERDICT_PASS"]
if len(tmpfs) != 10 or bad:
    print(f"tmpfs: want 10 clean outcomes, got {len(tmpfs)}; not clean: {bad}"); ok = False
for o in control:
    fs, v = o["spec"]["fs"], verdict(o)
    want = "VERDICT_VIOLATION" if fs == "fuse-cached" else "VERDICT_PASS"
    if v != want:
        print(f'{o["spec"]["scenario"]} on {fs}: {v}, want {want}'); ok = False
if len(control) != 4:
    print(f"control: want 4 outcomes, got {len(control)}"); ok = False
print("demo: OK (tmpfs clean, the positive control fired, fuse-direct clean)" if ok else "demo: FAILED")
sys.exit(0 if ok else 1)
PY
rc=$?
kill -TERM "$up_pid"
wait "$up_pid"
up_pid=""
exit $rc
