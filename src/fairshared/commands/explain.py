"""``fairshared explain JOBID``: one page on one job's priority, in plain words.

Each factor with its weight and share of the total, the fair-share path from root with the chosen
algorithm's per-level figure, and the jobs just ahead of it (and behind) with what separates them.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import math
import sys

import numpy as np

from ..engine import ALGORITHMS, Params, build_tree
from ..engine.decide import decide
from ..engine.ranks import assoc_index, fairshare_of, job_assoc
from ..engine.result import Result
from ..explain_common import details, duration, find_job, queue_entries, utc, why
from ..explain_json import explain_data
from ..model import InputError, Job, Snapshot
from ..priority import job_priority, ordered_partitions
from ..priority_sprio import listed_by_sprio
from ..settings import ClusterSettings
from . import count
from .common import (
    add_at,
    add_source,
    clock_for,
    evaluation_time,
    live,
    load_inputs,
    run_engine,
    save_if_asked,
    warn,
)
from .explain_vs_cmd import add_arguments as add_vs_arguments
from .explain_vs_cmd import cmd_explain_vs

LABEL = {"age": "Age", "assoc": "Association", "fairshare": "Fair-share", "jobsize": "Job size",
         "partition": "Partition", "qos": "QOS"}


def register(subparsers) -> None:
    e = subparsers.add_parser(
        "explain",
        help="why a job has its priority, in plain words",
        description="Explain one job's priority: each factor with its weight and share of the total, the "
        "fair-share path from root to the job's association with the algorithm's per-level figures, "
        "and the jobs just ahead of it (and behind) with what separates them.",
    )
    e.add_argument("job", metavar="JOBID", help="job id (or an array task as 123_4)")
    add_source(e)
    e.add_argument("--algorithm", choices=ALGORITHMS,
                   help="fair-share algorithm (default: what the cluster's PriorityFlags say)")
    add_at(e)
    e.add_argument("--neighbours", type=count, default=3, metavar="N", help="jobs to show ahead and behind (default 3)")
    add_vs_arguments(e)
    e.set_defaults(func=cmd_explain)


def _fmt_points(x: float) -> str:
    return f"{x:,.2f}"


def _ordinal(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def explain_text(pi: Snapshot, job_ref: str, algorithm: str, engine: Params, now: int, when: str,
                 neighbours: int = 3) -> str:
    tree = build_tree(pi.associations)
    result = run_engine(pi, algorithm, engine, tree)
    settings = pi.settings
    cluster = details(pi)
    job = find_job(pi.jobs, job_ref)
    if job is None:
        raise InputError(f"job {job_ref} is not among the pending jobs read")
    fs = fairshare_of(result)(job)
    rows = job_priority(job, fs, cluster, settings, now)
    out: list[str] = []
    w = out.append
    parts = ",".join(ordered_partitions(job, cluster))
    w(f"Job {job.display_id or job.job_id} — user {job.user}, account {job.account}, "
      f"partition {parts}, QOS {job.qos or '-'}")
    w(f"State: {job.state}" + (f" ({job.reason})" if job.reason else "")
      + f"; Slurm's current priority: {job.priority}")
    w(f"fairshared, with the {algorithm} fair-share algorithm, evaluated at {utc(now)} ({when}):")
    pending = listed_by_sprio(job, settings, now)
    if job.priority == 0:
        w("  the job is held (priority 0): Slurm does not rank it until it is released.")
    elif not pending:
        w("  the job is not eligible yet (begin time in the future), so Slurm does not rank it yet.")
    for f in rows:
        w(f"  {'' if pending else 'once eligible: '}priority {f.priority} in partition {f.partition}")
    w("")
    main = rows[0]
    if main.direct:
        w(f"An operator fixed this job's priority at {main.priority} (scontrol update priority=…): Slurm no")
        w("longer computes it from factors, and nice changes are ignored, until the job is held and released.")
    else:
        w("Where the priority comes from (weights are the cluster's PriorityWeight* settings):")
        weights = settings.weights
        factor_total = sum(main.weighted.values()) + sum(main.tres_weighted.values())
        w(f"  {'factor':<12} {'value':>10} {'weight':>8} {'points':>12} {'share':>7}")
        for k in ("fairshare", "age", "jobsize", "partition", "qos", "assoc"):
            pts = main.weighted[k]
            share = f"{100 * pts / factor_total:.1f}%" if factor_total else "-"
            w(f"  {LABEL[k]:<12} {main.factors[k]:>10.6f} {weights[k]:>8} {_fmt_points(pts):>12} {share:>7}")
        for t, v in main.tres_weighted.items():
            share = f"{100 * v / factor_total:.1f}%" if factor_total else "-"
            w(f"  {'TRES ' + t:<12} {main.tres[t]:>10.6f} {settings.tres_weights[t]:>8g} {_fmt_points(v):>12} {share:>7}")
        w(f"  {'Site factor':<12} {'':>10} {'':>8} {main.site:>+12,}")
        w(f"  {'Nice':<12} {'':>10} {'':>8} {-main.nice:>+12,}")
        w(f"  {'Total':<12} {'':>10} {'':>8} {_fmt_points(main.total):>12}   → priority {main.priority}"
          + (" (at least 1)" if main.total < 1 else " (cut to 2^32 − 1)" if main.total >= 2 ** 32
             else " (the integer part)"))
        w("")
        w(_age_line(job, settings, now))
        nodes, cpus = cluster.node_count, cluster.cpu_count
        if "SMALL_RELATIVE_TO_TIME" in settings.flags:
            w(f"Job size: {job.cpus} CPUs per minute of time limit, relative to the {cpus} CPUs of the cluster"
              + (" (PriorityFavorSmall: 1 minus that)" if settings.favor_small else "") + ".")
        elif settings.favor_small:
            w(f"Job size (PriorityFavorSmall): the free part of the cluster: (({nodes} − {job.min_nodes}) / {nodes}"
              f" + ({cpus} − {job.cpus}) / {cpus}) / 2 = {main.factors['jobsize']:.6f}.")
        else:
            w(f"Job size: ({job.min_nodes} of {nodes} nodes + {job.cpus} of {cpus} CPUs) / 2 = "
              f"{main.factors['jobsize']:.6f}.")
        p = cluster.partitions.get(main.partition)
        if p is not None:
            if "NO_NORMAL_PART" in settings.flags:
                w(f"Partition {p.name}: PriorityJobFactor {p.priority_job_factor}, used as is (NO_NORMAL_PART).")
            else:
                w(f"Partition {p.name}: PriorityJobFactor {p.priority_job_factor} of the highest "
                  f"{cluster.part_max_priority}.")
        qp = cluster.qos_priority.get(job.qos, 0)
        if "NO_NORMAL_QOS" in settings.flags:
            w(f"QOS {job.qos}: priority {qp}, used as is (NO_NORMAL_QOS).")
        else:
            w(f"QOS {job.qos}: priority {qp} of the highest {cluster.qos_max_priority}.")
        if job.site_factor:
            w(f"Site factor {job.site_factor:+} was set by an operator or a site_factor plugin.")
        if job.nice:
            w(f"Nice {job.nice}: {'lowers' if job.nice > 0 else 'raises'} the priority by {abs(job.nice)}.")
    w("")
    out.extend(fairshare_path(result, tree, job, algorithm, engine.dampening))
    w("")
    out.extend(_neighbours(pi, result, settings, now, job, neighbours))
    return "\n".join(out) + "\n"


def _age_line(job: Job, settings: ClusterSettings, now: int) -> str:
    if not job.accrue_time:
        return "Age: the job is not accruing age yet (no accrue time: not eligible, held, dependent or over a limit)."
    waited = max(0, now - job.accrue_time)
    max_age = int(settings.max_age_seconds)
    if max_age and waited < max_age:
        return (f"Age: waiting {duration(waited)} of PriorityMaxAge {duration(max_age)}: "
                f"{waited} / {max_age} = {waited / max_age:.6f}.")
    return f"Age: waiting {duration(waited)}, at least PriorityMaxAge {duration(max_age)}: the full 1.0."


def fairshare_path(result: Result, tree, job: Job, algorithm: str, dampening: float = 1.0) -> list[str]:
    """The association path from root with shares, usage and the algorithm's per-level figure."""
    index = assoc_index(result)
    i = job_assoc(job, index)
    lines: list[str] = []
    w = lines.append
    if i is None:
        w(f"Fair share: {job.user} has no association in account {job.account}: Slurm gives factor 0.")
        return lines
    # level_based's FSRaw; the other algorithms have none and never read these zeros
    fs_raw = result.fs_raw if result.fs_raw is not None else np.zeros(tree.n, dtype=np.uint64)
    chain = []
    x = i
    while x >= 0:
        chain.append(x)
        x = int(tree.parent[x])
    chain.reverse()
    head = {"fair_tree": "LevelFS = NormShares / EffectvUsage at each level; users are ranked depth first, "
                         "higher LevelFS first",
            "classic": "EffectvUsage mixes own and parent usage; F = 2^(−EffectvUsage / NormShares / d)",
            "level_based": "per level F = 2^(−U / (0.1 + 0.9·S)) in a bucket of the 64-bit FSRaw; "
                           "users sorted by FSRaw"}[algorithm]
    w(f"Fair share ({algorithm}): {head}.")
    w(f"  {'association':<24} {'shares':<22} {'usage':<28} {'figure':<26} place")
    fsp = tree.fs_parent
    root_usage = float(tree.usage[0])
    for depth, a in enumerate(chain):
        name = ("  " * max(depth - 1, 0)) + (tree.user[a] and f"{tree.user[a]} ({tree.account[a]})" or tree.account[a])
        if a == 0:
            w(f"  {name:<24} {'':<22} {_num(root_usage) + ' (all usage)':<28}")
            continue
        usage = float(tree.usage[a])
        if tree.use_parent[a]:
            sh = "parent"
        else:
            ls = int(tree.level_shares[a])
            sh = f"{int(tree.shares[a])} of {ls}" + (f" = {int(tree.shares[a]) / ls:.4f}" if ls else "")
        p = int(fsp[a])
        pu = float(tree.usage[p]) if p >= 0 else root_usage
        if algorithm == "classic":
            us = f"{_num(usage)} = {100 * usage / root_usage:.1f}% of all" if root_usage else f"{_num(usage)}"
            fig = f"EffUsage {float(result.effective_usage[a]):.4f} F {float(result.fairshare[a]):.4f}"
        elif algorithm == "fair_tree":
            us = f"{_num(usage)} = {100 * usage / pu:.1f}% of {tree.account[p]}" if pu else _num(usage)
            lf = float(result.level_fs[a])
            fig = "LevelFS " + ("(parent's)" if math.isnan(lf) else _lfs(lf))
        else:
            us = f"{_num(usage)} = {100 * usage / pu:.1f}% of {tree.account[p]}" if pu else _num(usage)
            lf = float(result.level_fs[a])
            raw = int(fs_raw[a])
            parent_raw = int(fs_raw[int(tree.parent[a])])
            fig = ("F " + ("-" if math.isnan(lf) else f"{lf:.4f}") + f" bucket {raw ^ parent_raw:016X}")
        w(f"  {name:<24} {sh:<22} {us:<28} {fig:<26} {_place(result, tree, a, algorithm)}")
    f = float(result.fairshare[i])
    n_users = int(tree.is_user.sum())
    if algorithm == "fair_tree":
        rank = round(f * n_users)
        w(f"  {job.user}'s fair-share factor {f:.6f} = {rank} / {n_users}: "
          f"{_ordinal(n_users - rank + 1)} of {n_users} user associations (ties share a rank).")
    elif algorithm == "level_based":
        rank = round(f * n_users)
        w(f"  {job.user}'s FSRaw {int(fs_raw[i]):016X}; fair-share factor {f:.6f} ≈ {rank} / {n_users}"
          f" ({_ordinal(n_users - rank)} of {n_users} users; the best gets (n−1)/n).")
    else:
        s = float(result.norm_shares[i])
        ue = float(result.effective_usage[i])
        w(f"  {job.user}'s fair-share factor {f:.6f} = 2^(−{ue:.6f} / {s:.6f} / {dampening:g}) "
          f"(EffectvUsage / NormShares / FairShareDampeningFactor); 0.5 = usage exactly matches shares.")
    return lines


def _num(x: float) -> str:
    return f"{math.floor(x):,}"


def _lfs(x: float) -> str:
    return "inf" if math.isinf(x) else f"{x:.4f}"


def _place(result: Result, tree, a: int, algorithm: str) -> str:
    """Position among the associations it competes with (same fair-share parent)."""
    fsp = tree.fs_parent
    sibs = [s for s in range(tree.n) if s != 0 and fsp[s] == fsp[a] and not tree.use_parent[s]]
    if tree.use_parent[a] or len(sibs) < 1:
        return ""
    if algorithm == "classic":
        key = {s: float(result.fairshare[s]) for s in sibs}
    else:
        key = {s: float(result.level_fs[s]) for s in sibs}
    better = sum(1 for s in sibs if key[s] > key[a])
    return f"{_ordinal(better + 1)} of {len(sibs)}"


def _neighbours(pi: Snapshot, result: Result, settings: ClusterSettings, now: int, job: Job,
                n: int) -> list[str]:
    entries = queue_entries(pi, result, settings, now)
    mine = [k for k, e in enumerate(entries) if e.job.job_id == job.job_id]
    lines: list[str] = []
    if not mine:
        lines.append("Queue: the job is not in the queue Slurm ranks (held, not eligible, or not pending).")
        return lines
    k = mine[0]
    me = entries[k]
    same = [e for e in entries if e.partition == me.partition]
    pos = next(q for q, e in enumerate(same) if e.job.job_id == job.job_id)
    lines.append(f"Queue in partition {me.partition}: {_ordinal(pos + 1)} of {len(same)} "
                 "(order: PriorityTier, priority, submit time, job id).")
    ahead = same[max(0, pos - n):pos]
    behind = same[pos + 1:pos + 1 + n]
    if ahead:
        lines.append("Just ahead of it:")
        for e in reversed(ahead):
            lines.append(f"  job {e.job.display_id or e.job.job_id} ({e.job.user}): priority {e.priority}, "
                         f"{e.priority - me.priority:+,} — {why(e, me)}")
    elif pos == 0:
        lines.append("Nothing is ahead of it in this partition.")
    # with --neighbours 0 the jobs around it are counted, not listed (never "nothing is ahead")
    hidden_ahead, hidden_behind = pos - len(ahead), len(same) - pos - 1 - len(behind)
    if hidden_ahead or hidden_behind:
        lines.append(f"Not listed (--neighbours {n}): {hidden_ahead} more ahead, {hidden_behind} more behind.")
    if behind:
        lines.append("Just behind it:")
        for e in behind:
            lines.append(f"  job {e.job.display_id or e.job.job_id} ({e.job.user}): priority {e.priority}, "
                         f"{e.priority - me.priority:+,} — {why(e, me)}")
    return lines


def not_in_demo_queue(job_ref: str, pi: Snapshot, now: int) -> str:
    """The demo's queue moves with its clock (jobs start, new ones come): an id read a minute ago
    may have left it.  Say so, with the --at that shows it and ids pending at this moment."""
    pending = ", ".join(str(j.display_id or j.job_id) for j in sorted(pi.jobs, key=lambda j: j.job_id)[:5])
    at = _dt.datetime.fromtimestamp(now, _dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return (f"job {job_ref} is not pending in the demo cluster at {at}: its queue moves with the clock, so "
            f"give explain the --at of the command that showed the id (`fairshared sprio --demo --at {at}` "
            f"lists the jobs pending at that moment: {pending}{', ...' if len(pi.jobs) > 5 else ''})")


def cmd_explain(args: argparse.Namespace) -> int:
    if getattr(args, "vs", None):
        return cmd_explain_vs(args)
    pi = load_inputs(args)
    warn(pi)
    now, when = evaluation_time(args.at, pi, live(args), clock_for(args))
    algorithm, engine = decide(pi.settings, algorithm=args.algorithm)
    save_if_asked(args, pi, now)
    if args.demo and find_job(pi.jobs, args.job) is None:
        raise InputError(not_in_demo_queue(args.job, pi, now))
    if args.format == "json":
        result = run_engine(pi, algorithm, engine)
        data = explain_data(pi, args.job, result, now, when, args.neighbours)
        json.dump(data, sys.stdout, indent=1)
        sys.stdout.write("\n")
        return 0
    sys.stdout.write(explain_text(pi, args.job, algorithm, engine, now, when, args.neighbours))
    return 0
