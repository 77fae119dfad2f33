"""Soak: the daemon for many cycles, its memory and its cycle times.

Runs ``fairshared run`` as a process (JSON log lines on a pipe, its own listen port, push
state in a temporary directory) until it has logged ``--cycles`` cycles, then stops it with
SIGTERM.  It prints:

* RSS (VmRSS from /proc/PID/status) after the first ``--warmup`` cycles, at every tenth of
  the run, and at the end, with the growth from the warm-up sample to the end;
* cycle-time percentiles p50 / p90 / p99 / max, from each ``cycle`` log line's ``seconds``
  (the sum of its stages: pull, compute, push, publish), and how many cycles did not succeed;
* one JSON line with all of it (last line of stdout).

It exits 1 when RSS grew by more than ``--max-growth-mb`` (default 8 MiB) between the warm-up
sample and the end, or when the daemon died or a cycle did not succeed (``--allow-failures``
to accept failed cycles).

* default: the built-in demo cluster (``--demo``: 22 associations, a queue that fills and
  drains, pushes into the simulated queue), period ``--period`` (default 0.2 s);
* ``--slurm``: the real cluster of the current ``SLURM_CONF`` through the command-line
  source, in dry run (computes and plans, writes nothing to the jobs) unless ``--push``.

    python benchmarks/soak.py                          # demo, 2000 cycles, 0.2 s apart
    python benchmarks/soak.py --slurm --cycles 100 --period 1
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def fairshared_argv() -> list[str]:
    exe = shutil.which("fairshared")
    return [exe] if exe else [sys.executable, "-m", "fairshared"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError(f"no VmRSS for pid {pid}")


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100)."""
    v = sorted(values)
    k = max(0, min(len(v) - 1, int(-(-q * len(v) // 100)) - 1))
    return v[k]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cycles", type=int, default=2000, help="cycles to run (default 2000)")
    ap.add_argument("--period", type=float, default=0.2, help="seconds between cycles (default 0.2)")
    ap.add_argument("--warmup", type=int, default=None,
                    help="cycles before the first RSS sample (default: 50, or 5 with --slurm)")
    ap.add_argument("--max-growth-mb", type=float, default=8.0,
                    help="RSS growth allowed from the warm-up sample to the end, MiB (default 8)")
    ap.add_argument("--slurm", action="store_true", help="the real cluster of $SLURM_CONF instead of the demo")
    ap.add_argument("--push", action="store_true", help="with --slurm: really push (default: dry run)")
    ap.add_argument("--timeout", type=float, default=60.0, help="with --slurm: each Slurm command's timeout")
    ap.add_argument("--allow-failures", action="store_true", help="failed cycles do not fail the soak")
    args = ap.parse_args(argv)
    warmup = args.warmup if args.warmup is not None else (5 if args.slurm else 50)
    if not 0 < warmup < args.cycles:
        ap.error("--warmup must be between 0 and --cycles")

    tmp = Path(tempfile.mkdtemp(prefix="fairshared-soak-"))
    cfg = tmp / "soak.toml"
    lines = [f'[state]\ndirectory = "{tmp}/state"\n', '[logging]\nformat = "json"\n']
    if args.slurm:
        lines.append(f'[source]\nkind = "cli"\ntimeout = {args.timeout}\n')
        if not args.push:
            lines.append("[push]\ndry_run = true\n")
    cfg.write_text("".join(lines))
    cmd = fairshared_argv() + ["run", "--config", str(cfg), "--period", str(args.period),
                               "--listen", f"127.0.0.1:{free_port()}"] + ([] if args.slurm else ["--demo"])
    what = (f"slurm ({os.environ.get('SLURM_CONF', 'default slurm.conf')}, "
            f"{'pushing' if args.push else 'dry run'})") if args.slurm else "demo"
    print(f"soak: {what}, {args.cycles} cycles, period {args.period:g} s, warm-up {warmup} cycles", flush=True)

    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                            text=True, env=os.environ.copy())
    seconds: list[float] = []
    outcomes: dict[str, int] = {}
    samples: list[tuple[int, int]] = []  # (cycle, RSS KiB)
    marks = {warmup} | {max(warmup, round(args.cycles * k / 10)) for k in range(1, 11)}
    other: list[str] = []
    done = threading.Event()

    def read():
        for line in proc.stdout:
            try:
                d = json.loads(line)
            except ValueError:
                other.append(line.rstrip())
                continue
            if d.get("event") != "cycle":
                if d.get("level") in ("warning", "error"):
                    other.append(line.rstrip())
                continue
            seconds.append(sum(float(v) for k, v in d.items() if k.endswith("_s")))  # pull_s, compute_s, ...
            outcomes[d.get("outcome")] = outcomes.get(d.get("outcome"), 0) + 1
            n = len(seconds)
            if n in marks:
                try:
                    samples.append((n, rss_kib(proc.pid)))
                except (OSError, RuntimeError):
                    pass
            if n >= args.cycles:
                done.set()
        done.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    t0 = time.monotonic()
    budget = args.cycles * args.period * 3 + 120 + (args.cycles * args.timeout if args.slurm else 0)
    done.wait(budget)
    wall = time.monotonic() - t0
    alive = proc.poll() is None
    if alive:
        proc.send_signal(signal.SIGTERM)
    try:
        code = proc.wait(30)
    except subprocess.TimeoutExpired:
        proc.kill()
        code = proc.wait()
    reader.join(5)
    shutil.rmtree(tmp, ignore_errors=True)

    n = len(seconds)
    ok = True
    print(f"cycles: {n} in {wall:.1f} s, outcomes {outcomes}; daemon exit status {code}"
          + ("" if alive else " (it had died)"), flush=True)
    if not alive or n < args.cycles:
        print("FAIL: the daemon stopped before the last cycle", *other[-20:], sep="\n", flush=True)
        ok = False
    fails = n - outcomes.get("success", 0)
    if fails and not args.allow_failures:
        print(f"FAIL: {fails} cycle(s) did not succeed", *other[-10:], sep="\n", flush=True)
        ok = False
    result: dict = {"mode": "slurm" if args.slurm else "demo", "cycles": n, "period": args.period,
                    "wall_seconds": round(wall, 1), "outcomes": outcomes}
    if seconds:
        pct = {k: percentile(seconds, q) for k, q in (("p50", 50), ("p90", 90), ("p99", 99))}
        pct["max"] = max(seconds)
        print("cycle seconds: " + "  ".join(f"{k} {v * 1000:.1f} ms" for k, v in pct.items()), flush=True)
        result["cycle_seconds"] = {k: round(v, 5) for k, v in pct.items()}
    if samples:
        print("RSS: " + ", ".join(f"cycle {c}: {kib / 1024:.1f} MiB" for c, kib in samples), flush=True)
        start, end = samples[0], samples[-1]
        growth = (end[1] - start[1]) / 1024
        print(f"RSS after warm-up (cycle {start[0]}) {start[1] / 1024:.1f} MiB, at the end (cycle {end[0]}) "
              f"{end[1] / 1024:.1f} MiB: growth {growth:+.2f} MiB (tolerance {args.max_growth_mb:g} MiB)",
              flush=True)
        result.update(rss_start_kib=start[1], rss_end_kib=end[1], rss_start_cycle=start[0], rss_end_cycle=end[0],
                      rss_growth_mib=round(growth, 3), max_growth_mib=args.max_growth_mb,
                      rss_samples=[list(s) for s in samples])
        if growth > args.max_growth_mb:
            print("FAIL: RSS grew more than the tolerance", flush=True)
            ok = False
    else:
        ok = False
    result["ok"] = ok
    print(json.dumps(result), flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
