#!/usr/bin/env bash
# The real-GPU proof of the GPU watch (issue 19, docs/gpu-validation.md), on one NVIDIA GPU:
# ckprofd (CUDA_VISIBLE_DEVICES pins, so the nvidia-smi probe; foreign_gpu_use "wait", a look
# every 200 ms) runs ResNet configs with the PyTorch baseline profiler on GPU 0. Once two tasks
# have ended, a separate PyTorch process (a colleague's job: matmuls for 12 s) starts on GPU 0.
# Checks: `ckprof gpus` names it while it runs; no task starts on the GPU while it lives (after
# the daemon's first look could see it); a task that ran while it was there is contended, with
# its pid; every result carries the GPU's name, architecture and real clocks, temperature and
# power, before and after. Prints what it saw and PASS/FAIL lines.
#
#   scripts/gpu_watch_check.sh BIN_DIR [OUT_DIR]
# BIN_DIR holds ckprofd and ckprof (built elsewhere; set LD_LIBRARY_PATH for their libraries).
# Exit status: non-zero when a check failed.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=$(cd "${1:?usage: scripts/gpu_watch_check.sh BIN_DIR [OUT_DIR]}" && pwd)
out=${2:-$(mktemp -d /tmp/ckprof-gpuwatch-XXXXXX)}
mkdir -p "$out"
out=$(cd "$out" && pwd)
work=$(mktemp -d /tmp/ckprof-gpuwatch-run-XXXXXX)
sock=$work/ckprofd.sock
ck() { "$bin/ckprof" --socket "$sock" "$@"; }

cat >"$work/ckprofd.json" <<'JSON'
{"foreign_gpu_use": "wait", "foreign_poll_ms": 200}
JSON
"$bin/ckprofd" --config "$work/ckprofd.json" --socket "$sock" --state-dir "$work/state" \
  --gpus 0 --pin-env CUDA_VISIBLE_DEVICES --profiler-path "$PWD/tools/torch-conv-profiler" \
  --timeout 900 --log-level info 2>"$out/ckprofd.log" &
daemon_pid=$!
foreign_pid=
trap 'kill $daemon_pid 2>/dev/null; [ -n "$foreign_pid" ] && kill $foreign_pid 2>/dev/null; wait' EXIT
for _ in $(seq 1 100); do ck ping >/dev/null 2>&1 && break; sleep 0.1; done
ck ping

ck convert examples/conv_repros_ir.json "$work/configs.json" --quiet >/dev/null
job=$(ck submit "$work/configs.json" --max-ops 10 --name gpu-watch)
# Two tasks done, then the colleague's job starts.
for _ in $(seq 1 600); do
  done_n=$(ck status "$job" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["jobs"][0]["done"])')
  [ "$done_n" -ge 2 ] && break
  sleep 0.2
done
CUDA_VISIBLE_DEVICES=0 python3 - "$out/foreign.json" <<'PY' &
import json, sys, time, torch
a = torch.randn(8192, 8192, device="cuda")
torch.cuda.synchronize()
start = time.time()  # on the GPU from here: nvidia-smi lists it
while time.time() - start < 12:
    b = a @ a
    torch.cuda.synchronize()
json.dump({"start": start, "end": time.time()}, open(sys.argv[1], "w"))
PY
foreign_pid=$!
echo "foreign PyTorch process: pid $foreign_pid"
seen=""
for _ in $(seq 1 100); do
  ck gpus >"$out/gpus-during.txt"
  if grep -q "busy: pid" "$out/gpus-during.txt"; then seen=yes; break; fi
  sleep 0.2
done
cat "$out/gpus-during.txt"
wait "$foreign_pid" || true
foreign_pid=
ck wait "$job" || true
ck gpus | tee "$out/gpus-after.txt"
ck results "$job" --format table | tee "$out/results-table.txt"
ck results "$job" --format json --output "$out/results.json"
kill -TERM "$daemon_pid"; wait "$daemon_pid" || true
cp "$work/state/ckprofd.db" "$out/ckprofd.db"

python3 - "$out" "$seen" <<'PY' | tee "$out/checks.txt"
import json, sqlite3, sys
out, seen = sys.argv[1], sys.argv[2] == "yes"
res = json.load(open(f"{out}/results.json"))["results"]
foreign = json.load(open(f"{out}/foreign.json"))
ok = True
def check(cond, what):
    global ok
    ok &= bool(cond)
    print(("PASS " if cond else "FAIL ") + what)
db = sqlite3.connect(f"{out}/ckprofd.db")
runs = {t: (s, e) for t, s, e in db.execute("SELECT task_id, started_at, ended_at FROM attempts")}
fs, fe = foreign["start"], foreign["end"]
print(f"foreign process on GPU 0 from {fs:.2f} to {fe:.2f} ({fe - fs:.1f} s)")
# A look every 200 ms, and nvidia-smi's own time: a start within 1 s of the foreign start may
# not have seen it yet (that run is then contended).
late = [t for t, (s, e) in runs.items() if fs + 1.0 < s < fe]
check(seen, "ckprof gpus named the foreign process while it ran")
check(not late, f"no task started while the foreign process was on the GPU (late starts: {late})")
overlapping = [r for r in res if runs.get(r["task_id"], (0, 0))[0] < fe - 0.5
               and runs.get(r["task_id"], (0, 0))[1] > fs + 0.5]
check(overlapping, f"{len(overlapping)} task(s) ran while the foreign process was there")
for r in overlapping:
    check(r["contended"], f"task #{r['position']} is contended: {r['contended_by']}")
for r in res:
    if r not in overlapping and r["contended"]:
        print(f"note: task #{r['position']} contended too: {r['contended_by']}")
states = [r["gpu_state"] for r in res]
check(all(s and s["name"] and s["arch"] for s in states),
      f"every result names its GPU: {states[0]['name']}, {states[0]['arch']}, {states[0]['driver']}")
for key in ("sclk_mhz", "mclk_mhz", "temperature_c", "power_w"):
    before = [s["before"][key] for s in states if s["before"]]
    after = [s["after"][key] for s in states if s and s["after"]]
    check(len(before) == len(res) and all(v is not None for v in before),
          f"{key} before every run: {min(before)} .. {max(before)}")
    print(f"     {key} after: {len(after)} of {len(res)} runs, "
          f"{min(after) if after else '-'} .. {max(after) if after else '-'}")
check(all(r["success"] for r in res), f"all {len(res)} configs succeeded")
sys.exit(0 if ok else 1)
PY
