"""``fairshared compare``: users' fair-share factors and ranks under several algorithms side by side.

The biggest movers, Kendall's tau-b between each pair of algorithms and against Slurm's current
order, and the pending jobs' priorities when the input has jobs.  The plot is in
:mod:`.compare_plot`; the rank arithmetic in :mod:`fairshared.engine.ranks`.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from typing import TypedDict

from ..engine import ALGORITHMS, build_tree
from ..engine.ranks import competition_ranks, fairshare_of, kendall_tau_b
from ..engine.result import Result
from ..model import Snapshot
from ..priority import FACTOR_NAMES, job_priority
from ..explain_common import details
from ..priority_sprio import listed_by_sprio
from . import count
from .common import (
    add_at,
    add_source,
    clock_for,
    engine_result,
    evaluation_time,
    live,
    load_inputs,
    save_if_asked,
    warn,
)

UINT32_MAX = 4294967295


def parse_weights(text: str) -> dict[str, float]:
    """``--weights fairshare=20000,age=0,tres:gres/gpu=500`` → overrides for ClusterSettings.with_weights."""
    out: dict[str, float] = {}
    names = set(FACTOR_NAMES)
    for item in text.split(","):
        item = item.strip()
        if not item:
            continue
        if "=" not in item:
            raise argparse.ArgumentTypeError(f"weight {item!r} is not NAME=VALUE")
        k, v = item.rsplit("=", 1)
        k = k.strip().lower()
        k = {"fs": "fairshare", "js": "jobsize", "part": "partition"}.get(k, k)
        if k not in names and not k.startswith("tres:"):
            raise argparse.ArgumentTypeError(
                f"unknown weight {k!r} (age, assoc, fairshare, jobsize, partition, qos, tres:NAME)")
        try:
            val = float(v)
        except ValueError:
            raise argparse.ArgumentTypeError(f"weight {item!r}: {v!r} is not a number") from None
        if val < 0 or not math.isfinite(val) or (not k.startswith("tres:") and val != int(val)):
            raise argparse.ArgumentTypeError(f"weight {item!r} must be a non-negative (integer) number")
        if not k.startswith("tres:") and val > UINT32_MAX:  # slurm.conf reads them as uint32_t
            raise argparse.ArgumentTypeError(f"weight {item!r}: Slurm's PriorityWeight* are 32-bit, "
                                             f"at most {UINT32_MAX}")
        out[k] = val
    return out


def _algorithms(text: str) -> list[str]:
    algs = [a.strip() for a in text.split(",") if a.strip()]
    bad = [a for a in algs if a not in ALGORITHMS]
    if bad or not algs:
        raise argparse.ArgumentTypeError(f"choose from {', '.join(ALGORITHMS)} (got {text!r})")
    return list(dict.fromkeys(algs))


def register(subparsers) -> None:
    c = subparsers.add_parser(
        "compare",
        help="fair-share factors and ranks under several algorithms side by side, with Kendall's tau",
        description="Compute every user association's fair-share factor and rank under each algorithm, "
        "list the biggest movers and Kendall's tau-b between each pair of algorithms and against "
        "Slurm's current order (sshare's FairShare column, when the input has it).  With pending jobs "
        "in the input (live cluster or a snapshot from `fairshared sprio --save-snapshot`) it also "
        "compares their priorities, with the cluster's weights or --weights.",
    )
    add_source(c)
    c.add_argument("--algorithms", type=_algorithms, default=list(ALGORITHMS), metavar="LIST",
                   help="comma-separated (default: classic,fair_tree,level_based)")
    c.add_argument("--weights", type=parse_weights, default={}, metavar="SPEC",
                   help="override priority weights for the job comparison, e.g. fairshare=20000,age=0,"
                   "tres:gres/gpu=500")
    c.add_argument("--format", choices=("table", "json"), default="table")
    c.add_argument("--top", type=count, default=10, metavar="N", help="movers to list (default 10)")
    c.add_argument("--plot", metavar="FILE.png",
                   help="draw fair-share factor against usage/shares per algorithm (needs matplotlib)")
    add_at(c)
    c.set_defaults(func=cmd_compare)


def compare_data(snap: Snapshot, algorithms: list[str], weights: dict, now: int, top: int = 10) -> dict:
    tree = build_tree(snap.associations)
    results = {a: engine_result(snap, a, tree) for a in algorithms}
    users = [i for i in range(tree.n) if tree.is_user[i]]
    rows: list[UserRow] = []
    for i in users:
        key = tree.key(i)
        rows.append({
            "account": key[0], "user": key[1], "partition": key[2],
            "raw_shares": "parent" if tree.use_parent[i] else int(tree.shares[i]),
            "raw_usage": float(tree.usage[i]),
            "factors": {a: _jnum(results[a].fairshare[i]) for a in algorithms},
            "ranks": {},
            "slurm_fairshare": None,
            "slurm_rank": None,
        })
    for a in algorithms:
        for r, rank in zip(rows, competition_ranks([r["factors"][a] or 0.0 for r in rows])):
            r["ranks"][a] = rank
    reported = snap.reported_fairshare or {}
    have_slurm = bool(reported)
    known: list[tuple[UserRow, float]] = []  # the rows sshare gave a FairShare, with it
    if have_slurm:
        for r in rows:
            r["slurm_fairshare"] = reported.get((r["account"], r["user"], r["partition"]))
        known = [(r, f) for r in rows if (f := r["slurm_fairshare"]) is not None]
        for (r, _), rank in zip(known, competition_ranks([f for _, f in known])):
            r["slurm_rank"] = rank
    taus: dict[str, float | None] = {}
    for x in range(len(algorithms)):
        for y in range(x + 1, len(algorithms)):
            a, b = algorithms[x], algorithms[y]
            taus[f"{a}|{b}"] = _jnum(kendall_tau_b([r["factors"][a] or 0 for r in rows],
                                                   [r["factors"][b] or 0 for r in rows]))
    if have_slurm:
        for a in algorithms:
            taus[f"{a}|slurm"] = _jnum(kendall_tau_b([r["factors"][a] or 0 for r, _ in known],
                                                     [f for _, f in known]))
    movers: list[dict] = []
    if len(algorithms) > 1:
        for r in rows:
            ranks = [r["ranks"][a] for a in algorithms]
            spread = max(ranks) - min(ranks)
            if spread:
                movers.append({"account": r["account"], "user": r["user"], "partition": r["partition"],
                               "ranks": dict(r["ranks"]), "spread": spread})
        movers.sort(key=lambda m: (-m["spread"], m["user"], m["account"]))
    data = {"algorithms": algorithms, "users": rows, "movers": movers[:top], "kendall_tau": taus}
    if snap.jobs:
        data.update(_compare_jobs(snap, results, weights, now))
    return data


def _compare_jobs(pi: Snapshot, results: dict[str, Result], weights: dict, now: int) -> dict:
    settings = pi.settings.with_weights(weights) if weights else pi.settings
    cluster = details(pi)
    jobs = [j for j in pi.jobs if listed_by_sprio(j, settings, now)]
    rows: list[JobRow] = []
    per_alg: dict[str, list[int]] = {}
    for a, res in results.items():
        fs = fairshare_of(res)
        per_alg[a] = [job_priority(j, fs(j), cluster, settings, now)[0].priority for j in jobs]
    for k, j in enumerate(jobs):
        rows.append({"job_id": j.job_id, "user": j.user, "account": j.account, "partition": j.partition,
                     "slurm_priority": j.priority,
                     "priorities": {a: per_alg[a][k] for a in results}, "ranks": {}})
    for a in results:
        for r, rank in zip(rows, competition_ranks(per_alg[a])):
            r["ranks"][a] = rank
    slurm_ranks = competition_ranks([j.priority for j in jobs])
    for r, rank in zip(rows, slurm_ranks):
        r["slurm_rank"] = rank
    taus: dict[str, float | None] = {}
    algs = list(results)
    for x in range(len(algs)):
        for y in range(x + 1, len(algs)):
            taus[f"{algs[x]}|{algs[y]}"] = _jnum(kendall_tau_b(per_alg[algs[x]], per_alg[algs[y]]))
    for a in algs:
        taus[f"{a}|slurm"] = _jnum(kendall_tau_b(per_alg[a], [j.priority for j in jobs]))
    return {"weights": {**settings.weights, **{f"tres:{k}": v for k, v in settings.tres_weights.items()}},
            "jobs": rows, "jobs_kendall_tau": taus}


class UserRow(TypedDict):
    """A user association in ``compare --format json``'s ``users``."""

    account: str
    user: str | None
    partition: str | None
    raw_shares: int | str  # "parent" for Fairshare=parent
    raw_usage: float
    factors: dict[str, float | None]  # by algorithm (None: blank)
    ranks: dict[str, int]
    slurm_fairshare: float | None
    slurm_rank: int | None


class JobRow(TypedDict, total=False):
    """A pending job in ``compare --format json``'s ``jobs`` (``slurm_rank`` added last)."""

    job_id: int
    user: str
    account: str
    partition: str
    slurm_priority: int
    priorities: dict[str, int]
    ranks: dict[str, int]
    slurm_rank: int


def _jnum(x) -> float | None:
    v = float(x)
    return None if math.isnan(v) else v


def _tau_text(v: float | None) -> str:
    return "n/a" if v is None else f"{v:.3f}"


def render_compare(data: dict, top: int = 10) -> str:
    algs = data["algorithms"]
    out: list[str] = []
    w = out.append
    users = data["users"]
    slurm = any(r["slurm_fairshare"] is not None for r in users)
    w(f"Fair-share factor and rank (1 = best) of {len(users)} user associations"
      + (", with Slurm's current FairShare (sshare)" if slurm else "") + ":")
    cols = [f"{'account':<12} {'user':<12} {'shares':>7} {'usage':>12}"] + [f"{a:>20}" for a in algs]
    if slurm:
        cols.append(f"{'slurm':>20}")
    w("  ".join(cols))
    order = sorted(users, key=lambda r: (r["ranks"][algs[0]], r["account"], r["user"]))
    for r in order:
        cells = [(f"{r['account'][:12]:<12} {r['user'][:12]:<12} {r['raw_shares']!s:>7} "
                  f"{math.floor(r['raw_usage']):>12}")]
        for a in algs:
            f = r["factors"][a]
            cells.append(f"{'-' if f is None else f'{f:.6f}':>12} {r['ranks'][a]:>7}")
        if slurm:
            f = r["slurm_fairshare"]
            cells.append(f"{'-' if f is None else f'{f:.6f}':>12} {r['slurm_rank'] or '-':>7}")
        w("  ".join(cells))
    w("")
    if len(algs) > 1:
        if data["movers"]:
            w(f"Biggest movers (largest rank change between algorithms, top {top}):")
            for m in data["movers"]:
                ranks = ", ".join(f"{a} {m['ranks'][a]}" for a in algs)
                w(f"  {m['user']} ({m['account']}): {ranks}  (moves {m['spread']})")
        else:
            w("No user changes rank between these algorithms.")
        w("")
    w("Kendall's tau-b between the orders (1 = same order, −1 = reversed, n/a = undefined):")
    names = algs + (["slurm"] if slurm else [])
    w(" " * 14 + "".join(f"{n:>13}" for n in names))
    taus = data["kendall_tau"]
    for a in names:
        cells = []
        for b in names:
            if a == b:
                cells.append(f"{'1.000':>13}")
            else:
                v = taus.get(f"{a}|{b}", taus.get(f"{b}|{a}", "missing"))
                cells.append(f"{'' if v == 'missing' else _tau_text(v):>13}")
        w(f"{a:<14}" + "".join(cells))
    if "jobs" in data:
        w("")
        jobs = data["jobs"]
        wt = ", ".join(f"{k}={v:g}" for k, v in data["weights"].items() if v)
        w(f"Pending jobs: priority and rank (1 = first) under each algorithm, weights {wt or 'all 0'}:")
        w("  ".join([f"{'job':>10} {'user':<10} {'partition':<12}", f"{'slurm now':>17}"]
                    + [f"{a:>17}" for a in algs]))
        for r in sorted(jobs, key=lambda r: (r["ranks"][algs[0]], r["job_id"]))[:max(top, 1) * 5]:
            cells = [f"{r['job_id']:>10} {r['user'][:10]:<10} {r['partition'][:12]:<12}",
                     f"{r['slurm_priority']:>10} {r['slurm_rank']:>6}"]
            cells += [f"{r['priorities'][a]:>10} {r['ranks'][a]:>6}" for a in algs]
            w("  ".join(cells))
        if len(jobs) > max(top, 1) * 5:
            w(f"  ... {len(jobs) - max(top, 1) * 5} more (--format json lists all)")
        w("Kendall's tau-b of the job orders: " + ", ".join(
            f"{k.replace('|', ' vs ')} {_tau_text(v)}" for k, v in data["jobs_kendall_tau"].items()))
    return "\n".join(out) + "\n"


def cmd_compare(args: argparse.Namespace) -> int:
    pi = load_inputs(args, sshare=True)
    warn(pi)
    now, _ = evaluation_time(args.at, pi, live(args), clock_for(args))
    save_if_asked(args, pi, now)
    data = compare_data(pi, args.algorithms, args.weights, now, args.top)
    if args.plot:
        from .compare_plot import plot_compare

        plot_compare(pi, data, args.plot)
    if args.format == "json":
        json.dump(data, sys.stdout, indent=1)
        sys.stdout.write("\n")
    else:
        sys.stdout.write(render_compare(data, args.top))
    return 0
