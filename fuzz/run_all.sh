#!/usr/bin/env bash
# `make fuzz`: builds the libFuzzer targets in their own clang build
# (LEAPFROG_FUZZ=ON, ASan + UBSan) and runs each for FUZZ_RUNS executions
# (default 10^7) or FUZZ_SECONDS seconds, whichever ends first, then prints
# executions and crashes per target. Exit 1 if any target crashed.
#   fuzz/run_all.sh [BUILD_DIR] [TARGET...]
set -uo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$src/build-fuzz}
shift || true
targets=("$@")
[ ${#targets[@]} -eq 0 ] && targets=(history_fuzz differential_fuzz console_fuzz campaign_fuzz http_request_fuzz report_outcome_fuzz)
runs=${FUZZ_RUNS:-10000000}
seconds=${FUZZ_SECONDS:-0}
jobs=${FUZZ_JOBS:-$(nproc)}

cmake -S "$src" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DLEAPFROG_FUZZ=ON \
  -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_C_COMPILER=clang >/dev/null || exit 2
cmake --build "$build" -j "$jobs" --target "${targets[@]}" || exit 2

failed=0
printf '%-20s %12s %8s %8s %6s  %s\n' target executions seconds crashes slow log
for t in "${targets[@]}"; do
  out=$build/fuzz/long-corpus/$t
  log=$build/fuzz/$t.log
  artifacts=$build/fuzz/artifacts/$t/
  mkdir -p "$artifacts"
  start=$(date +%s)
  "$src/fuzz/run_fuzz.sh" "$build/bin/$t" "$src/testdata/fuzz/$t" "$out" "$runs" \
    -max_total_time="$seconds" -artifact_prefix="$artifacts" >"$log" 2>&1
  rc=$?
  secs=$(($(date +%s) - start))
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  # libFuzzer also writes inputs slower than -report_slow_units (10 s) there:
  # worth a look, but not failures.
  crashes=$(find "$artifacts" -type f ! -name 'slow-unit-*' | wc -l)
  slow=$(find "$artifacts" -type f -name 'slow-unit-*' | wc -l)
  [ $rc -ne 0 ] && crashes=$((crashes > 0 ? crashes : 1))
  [ "$crashes" -ne 0 ] && failed=1
  printf '%-20s %12s %8s %8s %6s  %s\n' "$t" "${execs:-?}" "$secs" "$crashes" "$slow" "$log"
done
exit $failed
