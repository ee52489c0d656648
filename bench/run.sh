#!/usr/bin/env bash
# make bench: harness overhead (recorded vs bare lookup loop), lookup-scale vs bare syscall loops,
# oracle throughput, and the
# coordinator's lease and ingest throughput against raw SQL, and the dashboard HTTP server under
# 200 concurrent GETs, and the dashboard's read routes over a year of nightlies (needs root: it
# starts PostgreSQL).
set -euo pipefail
build=${1:-build}
echo "== harness overhead =="
"$build/bin/leapfrog_harness_bench" 2>/dev/null
echo
echo "== lookup-scale vs a bare loop of the same syscalls, per testcase =="
"$build/bin/leapfrog_scale_bench" 2>/dev/null
echo
echo "== oracle throughput (one core) =="
"$build/bin/leapfrog_oracle_bench" --benchmark_counters_tabular=true 2>/dev/null
echo
echo "== leapfrog-agent check end to end vs judging alone (one history, side by side) =="
"$build/bin/leapfrog_check_bench"
echo
echo "== coordinator: lease throughput and ingest =="
"$build/bin/leapfrog_coordinator_bench"
echo
echo "== dashboard HTTP: 200 concurrent GETs of /api/overview =="
"$build/bin/leapfrog_http_bench"
echo
echo "== a year of nightlies: dashboard read routes at 10^5 outcomes (--max-outcomes for more) =="
"$build/bin/leapfrog_growth_bench" --plans "$build/growth-plans.txt"
echo
echo "== VMs: boot to agent registered vs bare boot; guest vs host throughput =="
"$build/bin/leapfrog_vm_bench"
echo
echo "== planted kernel bug: time and lookups to the first violation =="
"$build/bin/leapfrog_detect_bench"
