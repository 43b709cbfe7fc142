#!/usr/bin/env bash
# The main job on the bundled example data: set up, convert the ResNet convolutions of
# examples/conv_repros_ir.json to CK configs, start a private ckprofd on a temporary socket,
# submit them, watch the progress, print the results table, and stop the daemon.
#
#   CKPROF_PROFILER=PATH   a real CK build (ckProfiler or its build/bin); default: the emulator
#   CKPROF_DEMO_GPUS=LIST  GPUs to use (default 0-3: simulated GPUs with the emulator)
#   CKPROF_PIN_ENV=VAR     pin variable (default HIP_VISIBLE_DEVICES)
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
bin=$PWD/build/bin
input=examples/conv_repros_ir.json

profiler=${CKPROF_PROFILER:-}
if [ -z "$profiler" ]; then
  profiler=$bin/ckprofiler-emu
  echo "No CK profiler given (CKPROF_PROFILER): using the CK emulator $profiler."
  echo "It prints ckProfiler's output with simulated timings; no GPU is used."
  export CKEMU_TIME_SCALE=${CKEMU_TIME_SCALE:-1}
fi
gpus=${CKPROF_DEMO_GPUS:-0-3}

work=$(mktemp -d /tmp/ckprof-demo-XXXXXX)
daemon_pid=
cleanup() {
  if [ -n "$daemon_pid" ] && kill -0 "$daemon_pid" 2>/dev/null; then
    kill -TERM "$daemon_pid"; wait "$daemon_pid" || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT

echo
echo "== 1. Convert $input to CK profiler configs"
"$bin/ckprof" convert "$input" "$work/ck_profiler_configs.json" --quiet

echo
echo "== 2. Start a private ckprofd on $work/ckprofd.sock (GPUs $gpus)"
"$bin/ckprofd" --socket "$work/ckprofd.sock" --state-dir "$work/state" --gpus "$gpus" \
  --pin-env "${CKPROF_PIN_ENV:-HIP_VISIBLE_DEVICES}" --profiler-path "$profiler" \
  --log-level warn 2>"$work/ckprofd.log" &
daemon_pid=$!
export CKPROF_SOCKET=$work/ckprofd.sock
for _ in $(seq 1 100); do
  "$bin/ckprof" ping >/dev/null 2>&1 && break
  kill -0 "$daemon_pid" 2>/dev/null || { cat "$work/ckprofd.log"; exit 1; }
  sleep 0.1
done
"$bin/ckprof" ping

echo
echo "== 3. Submit the configs and watch the job"
job=$("$bin/ckprof" submit "$work/ck_profiler_configs.json" --name resnet-mi300-demo)
"$bin/ckprof" watch "$job" || true

echo
echo "== 4. Results of job $job, ranked by the time PyTorch spent in each convolution"
"$bin/ckprof" results "$job" --format table
"$bin/ckprof" results "$job" --output "$work/profiler_results.json"
echo
"$bin/ckprof" gpus

echo
echo "== 5. Stop ckprofd"
kill -TERM "$daemon_pid"; wait "$daemon_pid"; daemon_pid=
echo "ckprofd stopped cleanly. (The demo's files in $work are removed on exit.)"
