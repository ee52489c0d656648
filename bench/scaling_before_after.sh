#!/usr/bin/env bash
# A before/after scaling table of two kernels, replicated over fresh boots
# (docs/scaling.md, "A before/after table").
#
#   bench/scaling_before_after.sh [options] LABEL_A IMAGE_A LABEL_B IMAGE_B
#
# Starts its own coordinator (`leapfrog up --agents 0`, embedded PostgreSQL,
# in a fresh data folder), registers both kernel images, then for each of
# --repeats rounds boots ONE fresh VM per kernel (--no-snapshot: a saved VM
# would restore the same boot every time), A then B (B then A on even rounds,
# so that drift of the host falls on both), and runs in it ONE lookup-scale
# job that measures every chosen testcase. A VM agent runs jobs back to back
# in one boot, so each round's VM is stopped once its job is done. Last, it
# prints `leapfrog scaling compare A B --test T --last R` for each testcase:
# R runs per kernel, each from its own boot.
#
# Options (defaults in brackets):
#   --tests T1,T2,..    testcases by name (docs/scaling.md) [lseek1,readseek1]
#   --repeats R         boots per kernel [5]
#   --cpus N            vCPUs per VM; measures 1..N tasks [2]
#   --samples S         timed samples per point [5]
#   --point-ms MS       length of a sample [1000]
#   --warmup-ms MS      warm-up per point [1000]
#   --mode M            0 processes, 1 threads, 2 both [2]
#   --fs FS             file system under test [tmpfs]
#   --widen W           the jobs' window points (campaign run --widen): "off"
#                       for a --widen build measured with its points off [the
#                       agent's per-seed choice; none on a kernel without them]
#   --leapfrog PATH     the leapfrog binary [build/bin/leapfrog]
#   --data-dir DIR      coordinator data folder [a new one under /tmp]
#   --cache-dir DIR     kernel/VM cache [/var/cache/leapfrog]
#   --keep              leave the coordinator running (its data folder is printed)
# The same image under two labels is the null experiment: every testcase
# should be "within noise".
set -euo pipefail

tests=lseek1,readseek1
repeats=5
cpus=2
samples=5
point_ms=1000
widen=
warmup_ms=1000
mode=2
fs=tmpfs
leapfrog=build/bin/leapfrog
data_dir=
cache_dir=/var/cache/leapfrog
keep=0
usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit "${1:-2}"; }
args=()
while (($#)); do
  case $1 in
    --tests) tests=$2; shift 2 ;;
    --repeats) repeats=$2; shift 2 ;;
    --cpus) cpus=$2; shift 2 ;;
    --samples) samples=$2; shift 2 ;;
    --point-ms) point_ms=$2; shift 2 ;;
    --warmup-ms) warmup_ms=$2; shift 2 ;;
    --mode) mode=$2; shift 2 ;;
    --fs) fs=$2; shift 2 ;;
    --widen) widen=$2; shift 2 ;;
    --leapfrog) leapfrog=$2; shift 2 ;;
    --data-dir) data_dir=$2; shift 2 ;;
    --cache-dir) cache_dir=$2; shift 2 ;;
    --keep) keep=1; shift ;;
    -h|--help) usage 0 ;;
    --*) echo "unknown option $1" >&2; usage ;;
    *) args+=("$1"); shift ;;
  esac
done
((${#args[@]} == 4)) || usage
label_a=${args[0]} image_a=${args[1]} label_b=${args[2]} image_b=${args[3]}
[[ $label_a != "$label_b" ]] || { echo "the two labels must differ" >&2; exit 2; }
for img in "$image_a" "$image_b"; do
  [[ -r $img ]] || { echo "cannot read kernel image $img" >&2; exit 2; }
done
[[ -x $leapfrog ]] || { echo "no leapfrog binary at $leapfrog (--leapfrog)" >&2; exit 2; }
[[ $repeats =~ ^[0-9]+$ ]] && ((repeats >= 1)) || { echo "--repeats must be a positive number" >&2; exit 2; }

# Testcase names to lookup-scale's `tests` bit mask (docs/scaling.md's indices).
names=(access-same access-separate stat-same stat-separate lseek1 lseek2 readseek1 readseek2
       readseek3 open1 open2 open3 unlink1 unlink2 pread1 pread2 pread3)
mask=0
IFS=, read -r -a chosen <<<"$tests"
for t in "${chosen[@]}"; do
  found=0
  for i in "${!names[@]}"; do
    if [[ ${names[$i]} == "$t" ]]; then mask=$((mask | (1 << i))); found=1; fi
  done
  ((found)) || { echo "unknown testcase \"$t\" (docs/scaling.md lists them)" >&2; exit 2; }
done

[[ -n $data_dir ]] || data_dir=$(mktemp -d /tmp/leapfrog-before-after-XXXXXX)
mkdir -p "$data_dir"
lf() { "$leapfrog" --data-dir "$data_dir" "$@"; }
up_pid= vm_pid=
cleanup() {
  [[ -n $vm_pid ]] && kill -INT "$vm_pid" 2>/dev/null && wait "$vm_pid" 2>/dev/null || true
  if [[ -n $up_pid ]] && ((!keep)); then kill -INT "$up_pid" 2>/dev/null; wait "$up_pid" 2>/dev/null || true; fi
}
trap cleanup EXIT

echo "data folder: $data_dir"
rm -f "$data_dir/address"
"$leapfrog" --data-dir "$data_dir" up --agents 0 >"$data_dir/up.log" 2>&1 &
up_pid=$!
for _ in $(seq 600); do
  [[ -s $data_dir/address ]] && break
  kill -0 "$up_pid" 2>/dev/null || { echo "leapfrog up exited:" >&2; tail -20 "$data_dir/up.log" >&2; exit 1; }
  sleep 0.1
done
[[ -s $data_dir/address ]] || { echo "leapfrog up wrote no address" >&2; exit 1; }

lf kernel add "$label_a" "$image_a" --cache-dir "$cache_dir" --no-prepare >/dev/null
lf kernel add "$label_b" "$image_b" --cache-dir "$cache_dir" --no-prepare >/dev/null

# One round on one kernel: a fresh VM, one job of every chosen testcase, the VM stopped.
round() {
  local label=$1 r=$2
  "$leapfrog" --data-dir "$data_dir" vm run --kernel "$label" --count 1 --cpus "$cpus" \
    --cache-dir "$cache_dir" --no-snapshot --die-with-parent >"$data_dir/vm-$label-$r.log" 2>&1 &
  vm_pid=$!
  lf campaign run --name "before-after $label $r" --scenario lookup-scale --kernel "$label" \
    --fs "$fs" --max-attempts 1 --param "tests=$mask" --param "mode=$mode" \
    --param "samples=$samples" --param "point_ms=$point_ms" --param "warmup_ms=$warmup_ms" \
    --param "max_tasks=$cpus" ${widen:+--widen "$widen"} --wait --timeout 60m >/dev/null
  kill -INT "$vm_pid" 2>/dev/null || true
  wait "$vm_pid" 2>/dev/null || true
  vm_pid=
}

for r in $(seq "$repeats"); do
  if ((r % 2)); then order=("$label_a" "$label_b"); else order=("$label_b" "$label_a"); fi
  for label in "${order[@]}"; do
    echo "round $r/$repeats: $label"
    round "$label" "$r"
  done
done

for t in "${chosen[@]}"; do
  echo
  echo "== $t: $label_b against $label_a, $repeats boots each =="
  lf scaling compare "$label_a" "$label_b" --test "$t" --last "$repeats"
done
((keep)) && echo "coordinator left running (pid $up_pid), data folder $data_dir"
exit 0
