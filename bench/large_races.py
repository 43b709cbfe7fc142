#!/usr/bin/env python3
"""Races on one user's large job, each while another user (nobody, where this runs as root)
polls `status` every 20 ms: what the other user waits. Issue 34's goal: p99 <= 100 ms.

  bench/large_races.py [BIN_DIR...]    (default: build/bin; several: side by side, in turn)

On a job of LARGE_CONFIGS ranked configs (default 1,000,000), held by --not-before +1d:
  a. `retry` of it cancelled, and at once `cancel` (the retry's steps under way);
  b. `cancel`, and at once `retry` (the cancel's forgetting under way);
  c. `retry`, and at once `retry` again;
  d. `retry` naming 4,096 of its tasks, the job cancelled;
  e. `cancel J#5000,...` naming 4,096 queued tasks;
  f. 32 clients of that user at once, each `cancel J#...` naming 4,096 other queued tasks;
  g. 32 clients of that user asking `status` without pause for 3 s (every job's status, the
     million queued tasks among them);
  h. 32 clients of that user at once, each submitting LARGE_RACES_SUBMIT_CONFIGS (30,000)
     configs, held.
The status probe (status_probe), the emulator and the inputs come from the build in build/bin;
each BIN_DIR gives ckprofd and ckprof. LARGE_RACES_ONLY=fh runs only those races;
LARGE_RACES_PROBE_NICE=-10 runs the probe at that nice value."""
import json
import os
import re
import select
import shutil
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "bench"))
import bench  # noqa: E402  (real_configs, write_cycled_fast)

N = int(os.environ.get("LARGE_CONFIGS", "1000000"))
SMALL = int(os.environ.get("LARGE_RACES_SUBMIT_CONFIGS", "30000"))
ONLY = os.environ.get("LARGE_RACES_ONLY", "")  # e.g. "fh": only those races
PROBE_NICE = os.environ.get("LARGE_RACES_PROBE_NICE", "")


def want(race):
    return not ONLY or race in ONLY
TOOLS = os.path.join(REPO, "build", "bin")


def measure(bin_dir, work, big, small):
    d = os.path.join(work, "d")
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    os.chmod(d, 0o755)
    sock, state, log = os.path.join(d, "s.sock"), os.path.join(d, "state"), os.path.join(d, "log")
    cfg = os.path.join(d, "c.json")
    with open(cfg, "w") as f:
        json.dump({"socket_mode": "0666"}, f)
    daemon = subprocess.Popen(
        [os.path.join(bin_dir, "ckprofd"), "--config", cfg, "--socket", sock, "--state-dir", state,
         "--lock-dir", os.path.join(d, "locks"), "--gpus", "0-7", "--profiler-path",
         os.path.join(TOOLS, "ckprofiler-emu"), "--log-level", "info"],
        env=dict(os.environ, CKEMU_TIME_SCALE="0"), stderr=open(log, "a"))
    ck = [os.path.join(bin_dir, "ckprof"), "--socket", sock]
    as_other = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"] \
        if os.geteuid() == 0 and shutil.which("setpriv") else []
    for _ in range(200):
        if subprocess.run(ck + ["ping"], capture_output=True).returncode == 0:
            break
        time.sleep(0.05)

    def run(*args):
        p = subprocess.run(ck + list(args), capture_output=True, text=True)
        return p.returncode, (p.stdout + p.stderr).strip()

    def logged(pattern, after, timeout=300):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with open(log) as f:
                if re.search(pattern, f.read()[after:]):
                    return True
            time.sleep(0.05)
        raise RuntimeError(f"not logged within {timeout} s: {pattern}")

    def at():
        return os.path.getsize(log)

    # LARGE_RACES_PROBE_NICE=-10: the probe ahead of the race's clients for a core, so that
    # what it waits for is the daemon, not the two cores the 32 clients start on.
    niced = ["nice", "-n", PROBE_NICE] if PROBE_NICE else []

    def probed(fn):
        probe = subprocess.Popen(niced + as_other + [os.path.join(TOOLS, "status_probe"), sock,
                                             "--interval-ms", "20"],
                                 stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True)
        if not select.select([probe.stderr], [], [], 60)[0] or \
                "ready" not in probe.stderr.readline():
            probe.kill()
            raise RuntimeError("the status probe was not answered within 60 s")
        note = fn()
        time.sleep(0.3)
        probe.stdin.close()
        figures = json.loads(probe.stdout.read().strip().splitlines()[-1])
        probe.wait()
        return f"{figures['p99_ms']:.0f} / {figures['max_ms']:.0f} ms", note

    queued = r"queued again in"
    forgotten = r"cancelled task\(s\) forgotten"
    out = {}
    try:
        p = subprocess.run(ck + ["submit", big, "--not-before", "+1d", "--json"],
                           capture_output=True, text=True, check=True)
        job = str(json.loads(p.stdout)["job_id"])
        def settled(args, pattern):
            """`ckprof ARGS`, then until the daemon logs PATTERN (its steps done)."""
            pos = at()
            run(*args)
            logged(pattern, pos)

        def race(first, second, until):
            """`ckprof FIRST`, at once `ckprof SECOND`, then until the daemon logs UNTIL (if
            given); the second's exit status."""
            def go():
                pos = at()
                if first:
                    run(*first)
                rc, _ = run(*second)
                if until:
                    logged(until, pos)
                return f"exit {rc}" + (" (refused)" if rc else "")
            return probed(go)

        cancel, retry = ["cancel", job], ["retry", job]
        if any(want(k) for k in "abcde"):
            settled(cancel, forgotten)
            out["a"] = race(retry, cancel, forgotten + "|" + r"cancelled \(")
            time.sleep(1)
            settled(retry, queued)
            out["b"] = race(cancel, retry, queued)
            settled(cancel, forgotten)
            out["c"] = race(retry, retry, queued)
            settled(cancel, forgotten)
            out["d"] = race(None, retry + [str(i) for i in range(1, 4097)], queued)
            settled(retry, queued)
            out["e"] = race(None, ["cancel", job + "#" + ",".join(str(i) for i in range(5000, 9096))],
                            None)

        def many_cancels():
            first = 10000
            clients = [subprocess.Popen(
                ck + ["cancel", job + "#" + ",".join(
                    str(i) for i in range(first + k * 4096, first + (k + 1) * 4096))],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) for k in range(32)]
            failed = sum(c.wait() != 0 for c in clients)
            return f"{32 - failed} of 32 answered"
        if want("f"):
            out["f"] = probed(many_cancels)

        def status_flood():
            flood = subprocess.Popen([os.path.join(TOOLS, "status_probe"), sock, "--interval-ms",
                                      "0", "--clients", "32"], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
            time.sleep(3)
            flood.stdin.close()
            figures = json.loads(flood.stdout.read().strip().splitlines()[-1])
            flood.wait()
            return f"{figures['requests']} requests of its own, p50 {figures['p50_ms']:.0f} ms"
        if want("g"):
            out["g"] = probed(status_flood)

        def many_submits():
            clients = [subprocess.Popen(ck + ["submit", small, "--not-before", "+1d"],
                                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                       for _ in range(32)]
            failed = sum(c.wait() != 0 for c in clients)
            return f"{32 - failed} of 32 stored"
        if want("h"):
            out["h"] = probed(many_submits)
    finally:
        daemon.terminate()
        daemon.wait(timeout=120)
    return out


def main():
    bins = [os.path.abspath(b) for b in sys.argv[1:]] or [os.path.join(REPO, "build", "bin")]
    work = os.environ.get("LARGE_RACES_DIR", "/tmp/ckprof-large-races")
    os.makedirs(work, exist_ok=True)
    os.chmod(work, 0o755)  # (the other user reaches the socket)
    big = os.path.join(work, f"ranked_{N}.json")
    if not os.path.exists(big):
        bench.write_cycled_fast(big, bench.real_configs(work), N, rank=lambda i: i % 997 + 1)
        os.sync()
    small = os.path.join(work, f"ranked_{SMALL}.json")
    if not os.path.exists(small):
        bench.write_cycled_fast(small, bench.real_configs(work), SMALL, rank=lambda i: i % 997 + 1)
    results = [measure(b, work, big, small) for b in bins]
    names = {"a": "retry, then at once cancel", "b": "cancel, then at once retry",
             "c": "retry, then at once retry again", "d": "retry naming 4,096 tasks",
             "e": "cancel naming 4,096 queued tasks",
             "f": "32 such cancels at once", "g": "32 clients asking status without pause",
             "h": f"32 submits of {SMALL} configs at once"}
    print(f"# another user's status p99 / max while one user races on a job of {N} configs")
    print("| race | " + " | ".join(bins) + " |")
    print("|---|" + "---|" * len(bins))
    for k, name in names.items():
        if want(k):
            print(f"| {k}. {name} | " + " | ".join(f"{r[k][0]} ({r[k][1]})" for r in results) +
                  " |")


if __name__ == "__main__":
    main()
