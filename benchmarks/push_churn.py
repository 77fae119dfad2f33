"""How many pending jobs each cycle re-pushes, by push.levels: the measurement behind its default.

A synthetic cluster (benchmarks/synthetic.py) of --assocs associations and --jobs pending jobs
spread over its users (Zipf-like: a few users hold most jobs) lives through --cycles calc periods
of --period seconds: every user's usage decays with PriorityDecayHalfLife (--half-life), and the
users who run jobs (a fifth, fixed) add usage each period.  Each cycle computes F with each
algorithm and plans the contributions c = round(W · F) (W = 10000) or, with levels L,
c = round(W · round(F·L)/L) (plan.contribution), and counts the jobs whose c changed since the
previous cycle: the updates a cycle would send, and the user associations whose c changed: the
writes of push.mode assoc_priority (and its sacctmgr requests, one per distinct value).  It also checks that no level setting inverts
two users' order (a user with the higher exact F never gets a lower c) and prints the largest
|c − W·F|.

    python benchmarks/push_churn.py [--assocs 10000] [--jobs 100000] [--cycles 12] [--levels 0,10000,1000,100]

Prints one JSON line per (algorithm, levels): mean and max updates per cycle (after the first),
as a share of the jobs too, the largest error, and the inversions found (must be 0).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "benchmarks"))

from fairshared.engine import build_tree, compute  # noqa: E402
from fairshared.plan import contribution  # noqa: E402
from fairshared.sinks.assoc_cli import IDS_PER_REQUEST  # noqa: E402
from synthetic import make_associations  # noqa: E402

W = 10000


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--assocs", type=int, default=10000)
    ap.add_argument("--jobs", type=int, default=100000)
    ap.add_argument("--cycles", type=int, default=12)
    ap.add_argument("--period", type=float, default=300.0)
    ap.add_argument("--half-life", type=float, default=7 * 86400.0)
    ap.add_argument("--levels", default="0,10000,1000,100")
    a = ap.parse_args(argv)
    levels = [int(x) for x in a.levels.split(",")]
    for row in churn(a.assocs, a.jobs, a.cycles, levels, period=a.period, half_life=a.half_life):
        print(json.dumps(row), flush=True)
    return 0


def churn(assocs: int, jobs: int, cycles: int, levels: list[int], *, period: float = 300.0,
          half_life: float = 7 * 86400.0, algorithms=("classic", "fair_tree", "level_based")) -> list[dict]:
    """One row per (algorithm, levels): job updates and association writes per cycle (after the first).

    An association write is a user association whose c moved (push.mode assoc_priority); its
    requests are one per distinct new value, cut at 2,000 ids (sinks/assoc_cli.py)."""
    rng = np.random.default_rng(7)
    tree = build_tree(make_associations(assocs, seed=3))
    users = np.flatnonzero(tree.is_user)
    # jobs per user: Zipf-like over a random order of the users, summing to `jobs`
    weights = 1.0 / np.arange(1, len(users) + 1) ** 1.1
    rng.shuffle(weights)
    per_user = rng.multinomial(jobs, weights / weights.sum())
    running = rng.random(len(users)) < 0.2
    burn = np.where(running, rng.lognormal(8, 1.5, len(users)), 0.0)  # cpu-seconds per period
    decay = 2.0 ** (-period / half_life)
    rows = []
    for algorithm in algorithms:
        usage = tree.usage.copy()
        prev = {L: None for L in levels}
        changed = {L: [] for L in levels}
        assoc_changed = {L: [] for L in levels}
        requests = {L: [] for L in levels}
        worst = {L: 0.0 for L in levels}
        inversions = {L: 0 for L in levels}
        for _ in range(cycles + 1):
            usage[users] = usage[users] * decay + burn
            t = build_tree_with_usage(tree, usage)
            f = compute(t, algorithm).fairshare[users]
            order = np.argsort(f, kind="stable")
            for L in levels:
                c = np.array([contribution(W, x, L) for x in f])
                worst[L] = max(worst[L], float(np.nanmax(np.abs(c - W * np.nan_to_num(f)))))
                inversions[L] += int(np.sum(np.diff(c[order]) < 0))
                if prev[L] is not None:
                    moved = c != prev[L]
                    changed[L].append(int(per_user[moved].sum()))
                    assoc_changed[L].append(int(moved.sum()))
                    _, counts = np.unique(c[moved], return_counts=True)
                    requests[L].append(int(np.sum(-(-counts // IDS_PER_REQUEST))))
                prev[L] = c
        for L in levels:
            ch = np.array(changed[L])
            rows.append({"algorithm": algorithm, "levels": L, "assocs": assocs, "jobs": jobs,
                         "updates_per_cycle_mean": round(float(ch.mean())),
                         "updates_per_cycle_max": int(ch.max()),
                         "share_mean": round(float(ch.mean()) / jobs, 4),
                         "assoc_writes_per_cycle_mean": round(float(np.mean(assoc_changed[L]))),
                         "assoc_share_mean": round(float(np.mean(assoc_changed[L])) / len(users), 4),
                         "assoc_requests_per_cycle_mean": round(float(np.mean(requests[L])), 1),
                         "assoc_requests_per_cycle_max": int(np.max(requests[L])),
                         "max_error": round(worst[L], 2), "inversions": inversions[L]})
    return rows


def build_tree_with_usage(tree, usage):
    """The same tree with new user usage; accounts' usage summed up again (as Slurm rolls it up)."""
    from dataclasses import replace
    u = usage.copy()
    u[~tree.is_user] = 0
    for idx in reversed(tree.levels[1:]):
        np.add.at(u, tree.parent[idx], u[idx])
    return replace(tree, usage=u)


if __name__ == "__main__":
    sys.exit(main())
