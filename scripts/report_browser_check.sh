#!/usr/bin/env bash
# The report's browser test: installs what it needs where missing (Debian's chromium with
# apt-get, the pinned playwright-core with npm ci in tests/report/), builds ckprof, ckprofd and
# the emulator if needed, and runs ctest's Report.Browser test script. With --update-screenshot
# it saves the example report's screenshot to docs/report-example.png (the README's picture).
# CI's "report in a browser" stage.
set -euo pipefail
cd "$(dirname "$0")/.."
sudo_cmd=()
[ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
missing=()
[ -x /usr/bin/chromium ] || missing+=(chromium)
command -v node >/dev/null || missing+=(nodejs)
command -v npm >/dev/null || missing+=(npm)
if ((${#missing[@]})); then
  echo "report_browser_check: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  "${sudo_cmd[@]}" apt-get update -qq
  "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
if [ ! -d tests/report/node_modules/playwright-core ]; then
  (cd tests/report && npm ci --no-audit --no-fund --silent)
fi
build_dir=${CKPROF_BUILD_DIR:-build}
if [ ! -x "$build_dir/bin/ckprof" ] || [ ! -x "$build_dir/bin/ckprofd" ] ||
   [ ! -x "$build_dir/bin/ckprofiler-emu" ]; then
  CKPROF_BUILD_TARGETS="ckprof ckprofd ckprofiler-emu" scripts/setup.sh
fi
shot=$(mktemp /tmp/ckprof-report-example-XXXXXX.png)
status=0
bash tests/report/browser_test.sh "$build_dir/bin" "$shot" || status=$?
if [ "$status" -eq 0 ] && [ "${1:-}" = --update-screenshot ]; then
  cp "$shot" docs/report-example.png
  echo "report_browser_check: docs/report-example.png updated"
fi
rm -f "$shot"
exit "$status"
