#!/usr/bin/env bash
# Report.Browser: makes reports with the built ckprof and checks them in headless Chromium.
#   1. a private ckprofd with the CK emulator profiles the bundled example data
#      (examples/conv_repros_ir.json, 32 configs with the trace's GPU times) plus two configs
#      the emulator fails on purpose (batch size 9003: a HIP error; 9004: no instance supports
#      it), so that the report has failures and unsupported problems to show;
#   2. `ckprof report JOB` writes its HTML page; `--format json` its data, from which a report
#      of 500 problems is made (tests/report/make_big.mjs) and written by `ckprof report FILE`;
#   3. browser_test.mjs loads both in Chromium: no errors, every chart drew, 500 in under 2 s.
#
#   tests/report/browser_test.sh BIN_DIR [SCREENSHOT.png]
# Exit 0 passed, 1 failed, 77 skipped (no node, no chromium, or no node_modules: see
# scripts/report_browser_check.sh, which installs them).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
bin=$(cd "${1:?usage: browser_test.sh BIN_DIR [SCREENSHOT.png]}" && pwd)
screenshot=${2:-}

command -v node >/dev/null || { echo "SKIP: no node"; exit 77; }
[ -x "${CHROMIUM:-/usr/bin/chromium}" ] || { echo "SKIP: no chromium (apt-get install chromium)"; exit 77; }
[ -d "$here/node_modules/playwright-core" ] ||
  { echo "SKIP: no $here/node_modules (cd tests/report && npm ci)"; exit 77; }

work=$(mktemp -d /tmp/ckprof-report-test-XXXXXX)
daemon_pid=
cleanup() {
  if [ -n "$daemon_pid" ] && kill -0 "$daemon_pid" 2>/dev/null; then
    kill -TERM "$daemon_pid"
    wait "$daemon_pid" || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT

"$bin/ckprof" convert "$root/examples/conv_repros_ir.json" "$work/configs.json" --quiet >/dev/null
node "$here/make_big.mjs" --add-faults "$work/configs.json"

# The emulator sleeps for the simulated GPU time (about 2 s in all on 4 GPUs), so that the
# timeline has some length.
export CKEMU_TIME_SCALE=1
"$bin/ckprofd" --socket "$work/ckprofd.sock" --state-dir "$work/state" --gpus 0-3 \
  --pin-env HIP_VISIBLE_DEVICES --profiler-path "$bin/ckprofiler-emu" --log-level warn \
  2>"$work/ckprofd.log" &
daemon_pid=$!
export CKPROF_SOCKET=$work/ckprofd.sock
for _ in $(seq 1 100); do
  "$bin/ckprof" ping >/dev/null 2>&1 && break
  kill -0 "$daemon_pid" 2>/dev/null || { cat "$work/ckprofd.log"; exit 1; }
  sleep 0.1
done
job=$("$bin/ckprof" submit "$work/configs.json" --name resnet-example)
"$bin/ckprof" wait "$job" >/dev/null || true  # two tasks fail on purpose

# The trace was recorded on an MI300X; the emulator simulates one but reports no GPU model.
"$bin/ckprof" report "$job" --peak-tflops 1307.4 --peak-gbps 5300 -o "$work/example.html"
"$bin/ckprof" report "$job" --format json -o "$work/example-data.json"
"$bin/ckprof" report "$job" --format md -o "$work/example.md"
grep -q '^## Verdict' "$work/example.md" || { echo "FAIL: the Markdown report has no verdict"; exit 1; }
kill -TERM "$daemon_pid"
wait "$daemon_pid" || true
daemon_pid=

node "$here/make_big.mjs" --problems 500 "$work/example-data.json" "$work/big-data.json"
start=$(date +%s%N)
"$bin/ckprof" report "$work/big-data.json" --peak-tflops 1307.4 --peak-gbps 5300 \
  -o "$work/big.html"
echo "ckprof report of 500 problems: $((($(date +%s%N) - start) / 1000000)) ms to write," \
  "$(stat -c %s "$work/big.html") bytes; example report: $(stat -c %s "$work/example.html") bytes"

args=(--report "$work/example.html" --big "$work/big.html")
[ -n "$screenshot" ] && args+=(--screenshot "$screenshot")
if [ -n "${CKPROF_REPORT_KEEP:-}" ]; then
  mkdir -p "$CKPROF_REPORT_KEEP"
  cp "$work"/example.html "$work"/example.md "$work"/big.html "$CKPROF_REPORT_KEEP"/
fi
cd "$here"
node browser_test.mjs "${args[@]}"
