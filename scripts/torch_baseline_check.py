#!/usr/bin/env python3
"""Times a handful of convolution problems two ways on one GPU and reports the ratio.

  scripts/torch_baseline_check.py [--rounds R] [--gpu N] [--cpu N|none] [--out DIR]
                                  [--max-ratio X] [--max-mean-ratio Y]
                                  [--tool LABEL=PATH]... [--problem "OP ARGS"]...
  scripts/torch_baseline_check.py --from-json torch-baseline.json   (table and verdict again)

Way 1: tools/torch-conv-profiler (or each --tool), run as ckprofd runs a profiler: a fresh
process, pinned with CUDA_VISIBLE_DEVICES=N, stdin /dev/null, stdout and stderr to pipes, its own
session. Its avg_time is read, and the device time of its "note: device time" line.
Way 2: plain PyTorch in a fresh process, as a user would time it: random (torch.randn) tensors of
the same shapes, dtype and memory format, torch.backends.cudnn.benchmark = True, 5 warm-up calls,
50 timed between two CUDA events. Forward calls torch.nn.functional.conv<nd>d; backward calls
torch.ops.aten.convolution_backward.default with grad mode off (what autograd's engine runs;
torch.nn.grad passes a dummy expanded tensor and can take another path). TF32 follows CK's data
type (fp32 off, tf32 on), as the tool does.

Each round runs every way once per problem, in rotating order; the table gives each way's median
over the rounds (and min-max), the ratio of the medians (tool / plain) and each way's device
time (the same call replayed from a CUDA graph: the kernels alone, without launch gaps).

Two criteria, with a reason each (figures: docs/gpu-validation.md):
- each problem's device-time ratio within [1/X, X] (--max-ratio, default 1.25): the tool runs
  the kernels PyTorch's call runs, and nothing else;
- the geometric mean of the per-call ratios over all problems within [1/Y, Y] (--max-mean-ratio,
  default 1.15): the tool's timed call costs the host what PyTorch's costs. Not per problem: a
  launch-bound problem's time is the host's cost per call, and on the H200 machine that varied
  by up to 1.6x between fresh processes of the same loop (and by 1.8x between CPUs, the fast
  ones changing within seconds), so one problem's ratio can leave any useful band by chance;
  it is printed, marked "host noise" beyond X. Pinning every run to one CPU (--cpu) did not
  help there: the same CPU was fast in one sweep and slow in the next.
Exit 0 PASS, 1 FAIL, 2 a run that printed no time.

  scripts/torch_baseline_check.py --reference OP ARGS   (internal: way 2, prints "ms <avg> ...")
"""

import argparse
import json
import math
import os
import re
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# CK arguments, operation first (docs/ck-profiler.md). The first is issue 23's problem.
PROBLEMS = [
    "grouped_conv_fwd 1 3 0 0 1 0 1 2 1 16 128 16 3 3 14 56 2 2 2 2 2 2 2 2",
    "grouped_conv_fwd 2 3 0 0 1 0 1 2 1 10 64 64 3 3 56 56 1 1 1 1 1 1 1 1",
    "grouped_conv_fwd 1 1 0 0 1 0 1 2 1 32 128 128 3 3 56 56 1 1 1 1 1 1 1 1",
    "grouped_conv_fwd 0 3 0 0 1 0 1 2 1 10 256 128 1 1 28 28 1 1 1 1 0 0 0 0",
    "grouped_conv_fwd 2 1 0 0 1 0 1 2 4 8 32 32 3 3 28 28 1 1 1 1 1 1 1 1",
    "grouped_conv_bwd_data 1 3 0 1 0 1 2 1 16 128 16 3 3 14 56 2 2 2 2 2 2 2 2 1",
    "grouped_conv_bwd_weight 5 4 0 1 0 1 2 1 10 64 64 3 3 56 56 1 1 1 1 1 1 1 1 1",
]

DTYPES = {  # op -> CK data_type -> (torch dtype, tf32)
    "grouped_conv_fwd": {0: ("float32", False), 1: ("float16", False), 2: ("bfloat16", False),
                         8: ("float32", True)},
    "grouped_conv_bwd_data": {0: ("float32", False), 1: ("float16", False),
                              2: ("bfloat16", False), 3: ("float32", True)},
    "grouped_conv_bwd_weight": {0: ("float32", False), 1: ("float16", False),
                                2: ("bfloat16", False), 5: ("bfloat16", False),
                                6: ("float32", True)},
}
CHANNELS_LAST = {"grouped_conv_fwd": {1: True, 3: False},
                 "grouped_conv_bwd_data": {1: True, 3: False},
                 "grouped_conv_bwd_weight": {2: True, 4: False}}


def parse(op, args):
    """CK's positional arguments -> a dict (fwd has index_type; backward ends with split_k)."""
    v = [int(a) for a in args[:-1]] + ([int(args[-1])] if op == "grouped_conv_fwd" else [])
    d = {"data_type": v[0], "layout": v[1]}
    i = 3 if op == "grouped_conv_fwd" else 2
    i += 4  # verify init log time
    nd = v[i]
    G, N, K, C = v[i + 1:i + 5]
    lists = [v[i + 5 + k * nd:i + 5 + (k + 1) * nd] for k in range(6)]
    d.update(nd=nd, G=G, N=N, K=K, C=C, filter=lists[0], input=lists[1], strides=lists[2],
             dilations=lists[3], lpads=lists[4], rpads=lists[5])
    return d


def short(op, d):
    kind = {"grouped_conv_fwd": "fwd", "grouped_conv_bwd_data": "bwd_data",
            "grouped_conv_bwd_weight": "bwd_weight"}[op]
    dt = DTYPES[op][d["data_type"]]
    t = {"float32": "fp32", "float16": "fp16", "bfloat16": "bf16"}[dt[0]]
    t += "/tf32" if dt[1] else ""
    lay = "NHWC" if CHANNELS_LAST[op][d["layout"]] else "NCHW"
    x = "x".join(map(str, d["filter"]))
    inp = "x".join(map(str, d["input"]))
    s = ",".join(map(str, d["strides"]))
    dil = f" d{','.join(map(str, d['dilations']))}" if any(v != 1 for v in d["dilations"]) else ""
    return f"{kind} {t} {lay} G{d['G']} N{d['N']} K{d['K']} C{d['C']} {x} {inp} s{s}{dil}"


# ---- way 2: plain PyTorch, in this (fresh) process ------------------------------------------

def reference(op, args):
    import torch
    import torch.nn.functional as F
    d = parse(op, args)
    dtype_name, tf32 = DTYPES[op][d["data_type"]]
    dtype = getattr(torch, dtype_name)
    nd, G = d["nd"], d["G"]
    cl = CHANNELS_LAST[op][d["layout"]] and nd > 1
    mf = (torch.channels_last if nd == 2 else torch.channels_last_3d) if cl else None
    pad = [min(a, b) for a, b in zip(d["lpads"], d["rpads"])]
    out_sp = [(i + l + r - (dl * (f - 1) + 1)) // s + 1 for i, l, r, dl, f, s in
              zip(d["input"], d["lpads"], d["rpads"], d["dilations"], d["filter"], d["strides"])]
    dev = "cuda"
    torch.backends.cudnn.benchmark = True
    torch.backends.cudnn.allow_tf32 = tf32

    def rand(shape):
        t = torch.randn(shape, device=dev, dtype=dtype)
        return t.contiguous(memory_format=mf) if mf is not None else t

    x = rand([d["N"], G * d["C"]] + d["input"])
    extra = [(l - m, r - m) for l, r, m in zip(d["lpads"], d["rpads"], pad)]
    if any(e != (0, 0) for e in extra):  # unequal pads: the user pads first, outside the loop
        flat = [v for lo_hi in reversed(extra) for v in lo_hi]
        x = F.pad(x, flat)
        x = x.contiguous(memory_format=mf) if mf is not None else x.contiguous()
    w = rand([G * d["K"], d["C"]] + d["filter"])
    if op == "grouped_conv_fwd":
        conv = (F.conv1d, F.conv2d, F.conv3d)[nd - 1]

        def run():
            return conv(x, w, None, d["strides"], pad, d["dilations"], G)
    else:
        go = rand([d["N"], G * d["K"]] + out_sp)
        bwd = torch.ops.aten.convolution_backward.default
        mask = [True, False, False] if op == "grouped_conv_bwd_data" else [False, True, False]
        idx = 0 if mask[0] else 1

        def run():
            return bwd(go, x, w, None, d["strides"], pad, d["dilations"], False, [0] * nd, G,
                       mask)[idx]
    # A backward op runs as autograd's engine runs it: grad mode off.
    with torch.set_grad_enabled(op == "grouped_conv_fwd"):
        for _ in range(5):
            y = run()
        torch.cuda.synchronize()
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(50):
            y = run()
        end.record()
        end.synchronize()
        ms = start.elapsed_time(end) / 50
        try:  # the device time of the same call, replayed from a CUDA graph: no launch gaps
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                for _ in range(10):
                    z = run()
            graph.replay()
            torch.cuda.synchronize()
            start.record()
            graph.replay()
            end.record()
            end.synchronize()
            device = f" device {start.elapsed_time(end) / 10:.6f}"
            del z, graph
        except Exception as e:
            device = f" (device time not measured: {type(e).__name__})"
    del y
    print(f"ms {ms:.6f}{device}")


# ---- the comparison -----------------------------------------------------------------------

def spawn(argv, gpu):
    env = dict(os.environ, CUDA_VISIBLE_DEVICES=str(gpu), PYTHONUNBUFFERED="1")
    env.pop("TORCH_CONV_FAKE_MS", None)
    return subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True, env=env, start_new_session=True,
                          timeout=600)


def run_tool(path, problem, gpu, log):
    r = spawn([path] + problem.split(), gpu)
    log.write(f"$ CUDA_VISIBLE_DEVICES={gpu} {path} {problem}\n{r.stdout}{r.stderr}"
              f"(exit {r.returncode})\n\n")
    ms = dev = None
    for line in r.stdout.splitlines():
        if line.startswith("avg_time:"):
            ms = float(line.split()[1])
        m = re.match(r"note: device time ([0-9.e+-]+) ms", line)
        if m:
            dev = float(m.group(1))
    return ms, dev


def run_reference(problem, gpu, log):
    r = spawn([sys.executable, os.path.abspath(__file__), "--reference"] + problem.split(), gpu)
    log.write(f"$ reference {problem}\n{r.stdout}{r.stderr}(exit {r.returncode})\n\n")
    m = re.search(r"^ms ([0-9.e+-]+)(?: device ([0-9.e+-]+))?", r.stdout, re.M)
    if not m:
        return None, None
    return float(m.group(1)), (float(m.group(2)) if m.group(2) else None)


def med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def span(xs):
    xs = [x for x in xs if x is not None]
    return f"{min(xs):.4f}-{max(xs):.4f}" if xs else "-"


def print_problem(f, ways):
    times, device = f["times"], f["device"]
    print(f"{f['label']}", flush=True)
    p = med(times["plain"])
    for way in ways:
        m, dv = med(times[way]), med(device.get(way, []))
        ratio = m / p if m and p else float("nan")
        print(f"  {way:8} {m or float('nan'):.4f} ms ({span(times[way])})"
              f"  {'ratio ' + format(ratio, '.2f') if way != 'plain' else '          '}"
              f"  device {format(dv, '.4f') + ' ms' if dv else '-'}", flush=True)


def verdict(figures, first, max_ratio, max_mean_ratio):
    """0 PASS, 1 FAIL, 2 a run printed no time. Prints one line per problem and the summary."""
    status, logs = 0, []
    for f in figures:
        m, p = med(f["times"][first]), med(f["times"]["plain"])
        dm, dp = med(f["device"].get(first, [])), med(f["device"].get("plain", []))
        if m is None or p is None:
            status = 2
            print(f"FAIL {f['label']}: a run printed no time (see torch-baseline-log.txt)")
            continue
        ratio = m / p
        logs.append(math.log(ratio))
        if dm is None or dp is None:
            status = max(status, 1)
            print(f"FAIL {f['label']}: no device time ({first} {dm}, plain {dp})")
            continue
        dratio = dm / dp
        ok = 1 / max_ratio <= dratio <= max_ratio
        status = status if ok else max(status, 1)
        noisy = "" if 1 / max_ratio <= ratio <= max_ratio else " (outside the band: host noise)"
        print(f"{'PASS' if ok else 'FAIL'} {f['label']}: device {first}/plain = {dratio:.2f}; "
              f"per call {first}/plain = {ratio:.2f}{noisy}")
    if logs:
        mean = math.exp(sum(logs) / len(logs))
        ok = 1 / max_mean_ratio <= mean <= max_mean_ratio
        status = status if ok else max(status, 1)
        print(f"{'PASS' if ok else 'FAIL'} per call, all problems: geometric mean {first}/plain = "
              f"{mean:.2f} (band {1 / max_mean_ratio:.2f}-{max_mean_ratio:.2f})")
    return status


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--gpu", default="0")
    ap.add_argument("--max-ratio", type=float, default=1.25,
                    help="band for each problem's device-time ratio (default 1.25)")
    ap.add_argument("--max-mean-ratio", type=float, default=1.15,
                    help="band for the geometric mean of the per-call ratios (default 1.15)")
    ap.add_argument("--out", default=None, help="folder for the log and a JSON of the figures")
    ap.add_argument("--tool", action="append", default=[],
                    help="LABEL=PATH of a profiler to time (default: this tree's tool)")
    ap.add_argument("--problem", action="append", default=[], help="'OP ARGS' (replaces the set)")
    ap.add_argument("--cpu", default="none",
                    help="pin every run to this CPU (a number), or none (default)")
    ap.add_argument("--from-json", default=None,
                    help="no runs: the table and verdict of a torch-baseline.json written before")
    a = ap.parse_args()
    if a.from_json:
        with open(a.from_json) as fh:
            saved = json.load(fh)
        ways = ["plain"] + [label for label, _ in saved["tools"]]
        for f in saved["figures"]:
            print_problem(f, ways)
        return verdict(saved["figures"], saved["tools"][0][0], a.max_ratio, a.max_mean_ratio)
    if a.cpu != "none":  # inherited by every run: both ways on the same CPU
        os.sched_setaffinity(0, {int(a.cpu)})
    tools = [t.split("=", 1) for t in a.tool] or [
        ["tool", os.path.join(ROOT, "tools", "torch-conv-profiler")]]
    problems = a.problem or PROBLEMS
    out = a.out or "."
    os.makedirs(out, exist_ok=True)
    log = open(os.path.join(out, "torch-baseline-log.txt"), "w")
    figures = []
    ways = ["plain"] + [label for label, _ in tools]
    pin = "not pinned to a CPU" if a.cpu == "none" else f"every run on CPU {a.cpu}"
    print(f"{len(problems)} problems, {a.rounds} rounds, fresh processes, "
          f"CUDA_VISIBLE_DEVICES={a.gpu}, {pin}; ms = median over rounds", flush=True)
    for problem in problems:
        op, *args = problem.split()
        times = {w: [] for w in ways}
        device = {w: [] for w in ways}
        for r in range(a.rounds):
            order = ways[r % len(ways):] + ways[:r % len(ways)]
            for way in order:
                if way == "plain":
                    ms, dev = run_reference(problem, a.gpu, log)
                else:
                    ms, dev = run_tool(dict(tools)[way], problem, a.gpu, log)
                times[way].append(ms)
                device[way].append(dev)
        log.flush()
        figures.append({"problem": problem, "label": short(op, parse(op, args)),
                        "times": times, "device": device})
        print_problem(figures[-1], ways)
    log.close()
    with open(os.path.join(out, "torch-baseline.json"), "w") as fh:
        json.dump({"tools": tools, "rounds": a.rounds, "cpu": a.cpu, "figures": figures}, fh,
                  indent=1)
    return verdict(figures, tools[0][0], a.max_ratio, a.max_mean_ratio)


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--reference":
        reference(sys.argv[2], sys.argv[3:])
    else:
        sys.exit(main())
