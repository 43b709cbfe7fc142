#!/usr/bin/env bash
# Sets up (scripts/setup.sh), then runs the whole test suite with ctest.
#   CKPROF_TEST_LABEL  run only tests with this ctest label (unit or integration)
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
build_dir=${CKPROF_BUILD_DIR:-build}
args=(--test-dir "$build_dir" --output-on-failure --no-tests=error -j"$(nproc)" --timeout 300)
[ -n "${CKPROF_TEST_LABEL:-}" ] && args+=(-L "$CKPROF_TEST_LABEL")
ctest "${args[@]}"
