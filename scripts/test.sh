#!/usr/bin/env bash
# Sets up (scripts/setup.sh), then runs the whole test suite with ctest.
#   CKPROF_TEST_LABEL    run only tests with this ctest label (unit, integration, slurm or slow)
#   CKPROF_TEST_SKIP_LABEL  skip tests with this ctest label (slow: those CI runs only once)
#   CKPROF_TEST_REGEX    run only tests whose name (Suite.Case) matches this regular expression
#   CKPROF_TEST_EXCLUDE  skip tests whose name matches this regular expression
#   CKPROF_TEST_TIMEOUT  seconds one test may take (default 300)
# and scripts/setup.sh's variables (CKPROF_BUILD_DIR, CKPROF_SANITIZE, CKPROF_BUILD_TARGETS, ...).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
build_dir=${CKPROF_BUILD_DIR:-build}
args=(--test-dir "$build_dir" --output-on-failure --no-tests=error -j"$(nproc)"
      --timeout "${CKPROF_TEST_TIMEOUT:-300}")
[ -n "${CKPROF_TEST_LABEL:-}" ] && args+=(-L "$CKPROF_TEST_LABEL")
[ -n "${CKPROF_TEST_SKIP_LABEL:-}" ] && args+=(-LE "$CKPROF_TEST_SKIP_LABEL")
[ -n "${CKPROF_TEST_REGEX:-}" ] && args+=(-R "$CKPROF_TEST_REGEX")
[ -n "${CKPROF_TEST_EXCLUDE:-}" ] && args+=(-E "$CKPROF_TEST_EXCLUDE")
ctest "${args[@]}"
