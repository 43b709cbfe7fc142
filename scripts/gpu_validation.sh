#!/usr/bin/env bash
# The real-GPU proof (docs/gpu-validation.md), two checks:
#
# 1. The PyTorch baseline against PyTorch itself (issue 23), needs only python3 with torch:
#    scripts/torch_baseline_check.py times a handful of problems with tools/torch-conv-profiler
#    (GPU pinned as ckprofd pins it) and with a plain PyTorch loop, fresh processes, alternating,
#    and prints each problem's per-call and device-time ratios. FAIL when a device-time ratio
#    leaves [0.8, 1.25] or the geometric mean of the per-call ratios leaves [0.87, 1.15].
# 2. ckprofd on two NVIDIA GPUs, pinned with CUDA_VISIBLE_DEVICES, runs the ResNet replay IR of
#    examples/ with the PyTorch baseline profiler while nvidia-smi samples which process runs on
#    which GPU. It then checks: every run saw exactly one GPU, both GPUs were used, no GPU ran two
#    profilers at once (daemon records and nvidia-smi samples), TFlops below the H200's peak.
#
#   scripts/gpu_validation.sh BIN_DIR [OUT_DIR]        both checks
#   scripts/gpu_validation.sh --torch-only [OUT_DIR]   check 1 alone (no ckprofd build needed)
# BIN_DIR holds ckprofd and ckprof (built elsewhere; set LD_LIBRARY_PATH for their libraries).
# TORCH_BASELINE_ARGS adds options to check 1 (e.g. "--rounds 5 --tool old=/path/to/old-tool").
# Exit status: non-zero when either check failed.
set -euo pipefail
cd "$(dirname "$0")/.."
arg=${1:?usage: scripts/gpu_validation.sh BIN_DIR|--torch-only [OUT_DIR]}
out=${2:-$(mktemp -d /tmp/ckprof-gpu-XXXXXX)}
mkdir -p "$out"
out=$(cd "$out" && pwd)

# ---- 1. the baseline against plain PyTorch -----------------------------------------------------
baseline_status=0
# shellcheck disable=SC2086  # TORCH_BASELINE_ARGS is a list of options
python3 scripts/torch_baseline_check.py --out "$out" ${TORCH_BASELINE_ARGS:-} \
  | tee "$out/torch-baseline.txt" || baseline_status=$?
if [ "$arg" = --torch-only ]; then
  exit "$baseline_status"
fi

# ---- 2. ckprofd on two GPUs --------------------------------------------------------------------
bin=$(cd "$arg" && pwd)
work=$(mktemp -d /tmp/ckprof-gpuval-XXXXXX)
sock=$work/ckprofd.sock
ck() { "$bin/ckprof" --socket "$sock" "$@"; }

nvidia-smi -L | tee "$out/nvidia-smi-L.txt"
nvidia-smi --query-compute-apps=timestamp,pid,gpu_uuid,used_memory --format=csv,noheader \
  -lms 100 >"$out/nvidia-smi-apps.csv" 2>/dev/null &
smi_pid=$!
"$bin/ckprofd" --socket "$sock" --state-dir "$work/state" --gpus 0,1 \
  --pin-env CUDA_VISIBLE_DEVICES --profiler-path "$PWD/tools/torch-conv-profiler" \
  --timeout 900 --log-level info 2>"$out/ckprofd.log" &
daemon_pid=$!
trap 'kill $smi_pid 2>/dev/null; kill $daemon_pid 2>/dev/null; wait' EXIT
for _ in $(seq 1 100); do ck ping >/dev/null 2>&1 && break; sleep 0.1; done
ck ping

start=$(date +%s.%N)
job=$(ck submit examples/conv_repros_ir.json --name resnet-torch-h200)
ck watch "$job" | tee "$out/watch.txt" || true
end=$(date +%s.%N)
ck results "$job" --format table | tee "$out/results-table.txt"
ck results "$job" --format json --output "$out/results.json"
ck gpus | tee "$out/gpus.txt"
kill -TERM "$daemon_pid"; wait "$daemon_pid" || true
kill "$smi_pid" 2>/dev/null || true
cp "$work/state/ckprofd.db" "$out/ckprofd.db"
echo "wall time: $(python3 -c "print(f'{$end - $start:.1f}')") s" | tee "$out/wall.txt"

daemon_status=0
python3 - "$out" <<'PY' | tee "$out/checks.txt" || daemon_status=$?
import collections, json, re, sqlite3, sys
out = sys.argv[1]
res = json.load(open(f"{out}/results.json"))["results"]
uuids = dict(re.findall(r"GPU (\d+): .*\(UUID: (GPU-[0-9a-f-]+)\)", open(f"{out}/nvidia-smi-L.txt").read()))
ok = True
def check(cond, what):
    global ok
    ok &= bool(cond)
    print(("PASS " if cond else "FAIL ") + what)
seen = collections.Counter()
for r in res:
    m = re.search(r"CUDA_VISIBLE_DEVICES=(\d+) .*uuid (GPU-[0-9a-f-]+) visible_gpus (\d+)", r["stdout"])
    check(m is not None, f"task {r['task_id']}: the profiler printed its GPU")
    if not m:
        continue
    pin, uuid, visible = m.group(1), m.group(2), int(m.group(3))
    check(visible == 1, f"task {r['task_id']}: exactly one GPU visible (saw {visible})")
    check(int(pin) == r["gpu"] and uuids.get(pin) == uuid,
          f"task {r['task_id']}: ran on GPU {r['gpu']} = {uuid}")
    seen[r["gpu"]] += 1
check(len(seen) == 2, f"both GPUs used: {dict(seen)}")
db = sqlite3.connect(f"{out}/ckprofd.db")
by_gpu = collections.defaultdict(list)
for gpu, s, e in db.execute("SELECT gpu, started_at, ended_at FROM attempts WHERE gpu >= 0"):
    by_gpu[gpu].append((s, e))
overlaps = sum(1 for iv in by_gpu.values() for a, b in zip(sorted(iv), sorted(iv)[1:]) if b[0] < a[1])
check(overlaps == 0, f"daemon records: no GPU ran two profilers at once ({sum(map(len, by_gpu.values()))} runs)")
samples = collections.defaultdict(set)
for line in open(f"{out}/nvidia-smi-apps.csv"):
    f = [x.strip() for x in line.split(",")]
    if len(f) >= 3 and f[2].startswith("GPU-"):
        samples[(f[0], f[2])].add(f[1])
double = [k for k, pids in samples.items() if len(pids) > 1]
check(not double, f"nvidia-smi: never two processes on one GPU ({len(samples)} samples with a process)")
tf = [r["tflops"] for r in res if r["success"]]
check(len(tf) == len(res), f"all {len(res)} configs succeeded")
check(max(tf) < 990, f"TFlops plausible: max {max(tf):.1f} < 990 (H200 dense bf16 peak)")
print(f"TFlops: min {min(tf):.1f}, median {sorted(tf)[len(tf)//2]:.1f}, max {max(tf):.1f}")
sys.exit(0 if ok else 1)
PY
[ "$baseline_status" -eq 0 ] && [ "$daemon_status" -eq 0 ]
