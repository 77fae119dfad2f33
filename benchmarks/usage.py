"""Usage from accounting records: time to compute raw usage from 1,000,000 job records.

Prints one JSON line per measurement:
    {"what", "records", "associations", "models", "seconds"}
* ``compute``: :func:`fairshared.usage.compute_usage` on a list of ``JobRecord``
  (columns built from the records, billing per partition, both decay models or
  one, charging up the tree) — best of ``--repeat`` runs;
* ``parse`` (with ``--parse``): the sacct parser on the same number of lines.

Workload: a tree of 100 accounts x 20 users, jobs over the last 30 days (10 %
still running), 1-64 CPUs, memory and GPUs, in partitions ``debug`` (no
weights) and ``high`` (TRESBillingWeights=CPU=1.0,Mem=0.25G,GRES/gpu=4.0),
three QOS usage factors, PriorityDecayHalfLife 7 days, PriorityCalcPeriod 5 min,
PriorityUsageResetPeriod MONTHLY, limits enforced.

Target (issue #4): <= 2 s for 1,000,000 records.

    python benchmarks/usage.py [--records 1000000] [--repeat 3] [--parse]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from fairshared.model import Association  # noqa: E402
from fairshared.sources.sacct import parse_sacct  # noqa: E402
from fairshared.usage import JobRecord, UsagePolicy  # noqa: E402
from fairshared.usage_charge import compute_usage  # noqa: E402


def tree(accounts: int = 100, users: int = 20) -> list[Association]:
    out = [Association("root"), Association("root", "root", "root")]
    for i in range(accounts):
        out.append(Association(f"acct{i}", None, "root", 10))
        out += [Association(f"acct{i}", f"user{j}", f"acct{i}", 1) for j in range(users)]
    return out


def workload(n: int, assocs: list[Association], now: float, seed: int = 0) -> list[JobRecord]:
    rng = np.random.default_rng(seed)
    users = [a.key for a in assocs if a.user is not None and a.account != "root"]
    who = rng.integers(0, len(users), n).tolist()
    start = (now - rng.uniform(0, 30 * 86400, n)).round().tolist()
    length = rng.exponential(3600, n).round()
    running = rng.random(n) < 0.10
    end = [None if r else s + ln for s, ln, r in zip(start, length.tolist(), running.tolist())]
    cpus = rng.integers(1, 65, n).tolist()
    mem = rng.integers(100, 256_000, n).tolist()
    gpus = rng.integers(0, 5, n).tolist()
    part = np.where(rng.random(n) < 0.3, "high", "debug").tolist()
    qos = rng.choice([1.0, 0.5, 2.0], n).tolist()
    return [JobRecord(i, users[u], s, e, {"cpu": float(c), "mem": float(m), "node": 1.0, "gres/gpu": float(g),
                                          "billing": float(c)}, p, q)
            for i, (u, s, e, c, m, g, p, q) in enumerate(zip(who, start, end, cpus, mem, gpus, part, qos))]


def best_of(fn, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--parse", action="store_true", help="also time the sacct parser on as many lines")
    args = ap.parse_args()
    now = 1_795_000_000.0
    assocs = tree()
    records = workload(args.records, assocs, now)
    policy = UsagePolicy(half_life=7 * 86400, calc_period=300, reset_period="MONTHLY",
                         timezone="Europe/Berlin", enforce_limits=True,
                         billing_weights={"high": "CPU=1.0,Mem=0.25G,GRES/gpu=4.0"},
                         iteration_anchor=now - 17)
    for models in (["slurm", "exact"], ["slurm"], ["exact"]):
        secs = best_of(lambda: compute_usage(records, assocs, policy, now, models), args.repeat)
        print(json.dumps({"what": "compute", "records": len(records), "associations": len(assocs),
                          "models": ",".join(models), "seconds": round(secs, 4)}), flush=True)
    if args.parse:
        lines = "".join(
            f"{r.job_id}|{r.assoc[0]}|{r.assoc[1]}|{r.partition}|normal|{r.start:.0f}|"
            f"{'Unknown' if r.end is None else f'{r.end:.0f}'}|COMPLETED|"
            f"billing={r.tres['cpu']:.0f},cpu={r.tres['cpu']:.0f},mem={r.tres['mem']:.0f}M,node=1\n"
            for r in records)
        secs = best_of(lambda: parse_sacct(lines), 1)
        print(json.dumps({"what": "parse", "records": len(records), "associations": len(assocs),
                          "models": None, "seconds": round(secs, 4)}), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
