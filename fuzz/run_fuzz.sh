#!/usr/bin/env bash
# Runs one libFuzzer target for a fixed number of executions over its seed
# corpus; new inputs go to OUT, never into the checked-in seeds.
#   run_fuzz.sh BINARY SEEDS OUT RUNS [extra libFuzzer flags...]
# Exit status: the fuzzer's (0: no crash, leak or UB report).
set -euo pipefail
bin=$1 seeds=$2 out=$3 runs=$4
shift 4
mkdir -p "$out"
exec "$bin" -runs="$runs" -max_len=65536 -timeout=30 -rss_limit_mb=2048 -print_final_stats=1 "$@" "$out" "$seeds"
