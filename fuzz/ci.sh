#!/usr/bin/env bash
# `make test`'s fuzz step: builds the libFuzzer targets in their own clang
# build (LEAPFROG_FUZZ=ON, ASan + UBSan) and runs each for the short, fixed
# number of executions ctest gives it (LEAPFROG_FUZZ_CI_RUNS). `make fuzz`
# runs them long.
#   fuzz/ci.sh [BUILD_DIR]
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$src/build-fuzz}
cmake -S "$src" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DLEAPFROG_FUZZ=ON \
  -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_C_COMPILER=clang >/dev/null
cmake --build "$build" -j "$(nproc)" --target fuzz_targets
cd "$build" && ctest --output-on-failure --timeout 600 -L fuzz
