#!/usr/bin/env bash
# Runs every benchmark of bench/README.md in one go and prints one table per section: ckprofd
# beside the machine's limit and the tools users would use instead, measured in the same run on
# simulated GPUs (the CK emulator). Builds Release into build/ first (scripts/setup.sh) and
# installs GNU parallel, task-spooler and python3 from Debian when missing.
#
#   bench/run.sh                    the full run (about 5 minutes on 2 cores, plus the build)
#   BENCH_QUICK=1 bench/run.sh      a smoke run with small sizes (about 1-2 minutes)
#   BENCH_SECTIONS=1,2 bench/run.sh only some sections; more settings in bench/README.md
set -euo pipefail
cd "$(dirname "$0")/.."

need=()
command -v parallel >/dev/null || need+=(parallel)
command -v tsp >/dev/null || need+=(task-spooler)
command -v python3 >/dev/null || need+=(python3)
if ((${#need[@]})); then
  echo "bench: installing ${need[*]}" >&2
  sudo_cmd=()
  [ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
  export DEBIAN_FRONTEND=noninteractive
  install() {
    "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null 2>&1
  }
  install || { "${sudo_cmd[@]}" apt-get update -qq >/dev/null && install; }
fi

echo "bench: building (scripts/setup.sh)" >&2
scripts/setup.sh >&2
export BENCH_BIN=${BENCH_BIN:-$PWD/${CKPROF_BUILD_DIR:-build}/bin}
exec python3 bench/bench.py
