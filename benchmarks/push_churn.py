"""How many pending jobs each cycle re-pushes, by push.levels: the measurement behind its default.

A synthetic cluster (benchmarks/synthetic.py) of --assocs associations and --jobs pending jobs
spread over its users (Zipf-like: a few users hold most jobs) lives through --cycles calc periods
of --period seconds: every user's usage decays with PriorityDecayHalfLife (--half-life), and the
users who run jobs (a fifth, fixed) add usage each period.  Each cycle computes F with each
algorithm and plans the contributions c = round(W · F) (W = 10000) or, with levels L,
c = round(W · round(F·L)/L) (plan.contribution), and counts the jobs whose c changed since the
previous cycle: the updates a cycle would send.  It also checks that no level setting inverts
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
    rng = np.random.default_rng(7)
    tree = build_tree(make_associations(a.assocs, seed=3))
    users = np.flatnonzero(tree.is_user)
    # jobs per user: Zipf-like over a random order of the users, summing to --jobs
    weights = 1.0 / np.arange(1, len(users) + 1) ** 1.1
    rng.shuffle(weights)
    per_user = rng.multinomial(a.jobs, weights / weights.sum())
    running = rng.random(len(users)) < 0.2
    burn = np.where(running, rng.lognormal(8, 1.5, len(users)), 0.0)  # cpu-seconds per period
    decay = 2.0 ** (-a.period / a.half_life)
    for algorithm in ("classic", "fair_tree", "level_based"):
        usage = tree.usage.copy()
        prev = {L: None for L in levels}
        changed = {L: [] for L in levels}
        worst = {L: 0.0 for L in levels}
        inversions = {L: 0 for L in levels}
        for _ in range(a.cycles + 1):
            usage[users] = usage[users] * decay + burn
            t = build_tree_with_usage(tree, usage)
            f = compute(t, algorithm).fairshare[users]
            order = np.argsort(f, kind="stable")
            for L in levels:
                c = np.array([contribution(W, x, L) for x in f])
                worst[L] = max(worst[L], float(np.nanmax(np.abs(c - W * np.nan_to_num(f)))))
                inversions[L] += int(np.sum(np.diff(c[order]) < 0))
                if prev[L] is not None:
                    changed[L].append(int(per_user[c != prev[L]].sum()))
                prev[L] = c
        for L in levels:
            ch = np.array(changed[L])
            print(json.dumps({"algorithm": algorithm, "levels": L, "assocs": a.assocs, "jobs": a.jobs,
                              "updates_per_cycle_mean": round(float(ch.mean())),
                              "updates_per_cycle_max": int(ch.max()),
                              "share_mean": round(float(ch.mean()) / a.jobs, 4),
                              "max_error": round(worst[L], 2), "inversions": inversions[L]}), flush=True)
    return 0


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
