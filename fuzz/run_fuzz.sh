#!/usr/bin/env bash
# Runs one libFuzzer target for a fixed number of executions over its seed
# corpus; new inputs go to OUT, never into the checked-in seeds.
#   run_fuzz.sh BINARY SEEDS OUT RUNS [extra libFuzzer flags...]
# Exit status: the fuzzer's (0: no crash, leak or UB report).
set -euo pipefail
bin=$1 seeds=$2 out=$3 runs=$4
shift 4
# The longest input each target may grow to (docs/fuzzing.md). The cost of
# an execution grows with its input, and libFuzzer lets inputs grow to
# -max_len over a long run: at 64 KiB for all, the slow targets ran at a
# tenth of their speed. Each limit is a few times the longest seed and over
# every bound the target's code checks, so every refusal stays reachable.
case $(basename "$bin") in
  # Seeds up to 6.7 KB; the line limit the target sets is 8 KiB.
  history_fuzz) max_len=16384 ;;
  # The naive judge's model takes at most 8 nodes, 8 mutations and 32
  # lookups (about 6 KB of JSON); a larger history is skipped unjudged.
  differential_fuzz) max_len=8192 ;;
  # Seeds up to 4.6 KB; a report's 600-line cap and the 300-line follow-on
  # window are reached with short lines.
  console_fuzz) max_len=8192 ;;
  # Specs' longest bound is a 4 KiB path (common/bounds.h).
  http_request_fuzz | campaign_fuzz) max_len=8192 ;;
  # report_outcome_fuzz: fast at this length already. Its 1 MiB outcome
  # cap (kMaxOutcomeBytes) is past any length worth fuzzing at.
  *) max_len=65536 ;;
esac
mkdir -p "$out"
# libFuzzer's -timeout is wall-clock: a run at `nice -n 19` beside a build
# can be starved for tens of seconds on one input that takes a second
# alone, so long runs beside other work set FUZZ_TIMEOUT higher.
exec "$bin" -runs="$runs" -max_len="$max_len" -timeout="${FUZZ_TIMEOUT:-30}" -rss_limit_mb=2048 -print_final_stats=1 "$@" "$out" "$seeds"
