"""``fairshared sprio``, ``fairshared explain JOBID`` and ``fairshared compare``.

* ``sprio``   — Slurm's ``sprio -l`` from our own computation (the formulas in
  :mod:`fairshared.priority`, the fair-share factor from our engine), optionally
  under another fair-share algorithm;
* ``explain`` — one page on one job: each factor, weight and share of the total,
  the fair-share path from root with the chosen algorithm's per-level figure,
  and the jobs just ahead of it and what separates them;
* ``compare`` — users' fair-share factors and ranks under several algorithms side by
  side, the biggest movers, Kendall's tau-b between each pair and against Slurm's
  current order (and the pending jobs' priorities when the input has jobs).

Inputs: the live cluster (``--source slurm``, the default), a fairshared snapshot
(``--snapshot``; a snapshot written by ``--save-snapshot`` here carries the jobs and
the cluster's partitions/QOS in a ``priority_inputs`` block that ``compute`` ignores)
or, for ``compare``, an sshare dump (``--from-sshare``).
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import math
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict

import numpy as np

from ..engine import ALGORITHMS, Params, build_tree, compute
from ..engine.result import Result
from ..inputs.snapshot import snapshot_from_dict, snapshot_to_dict
from ..inputs.sshare_dump import parse_sshare
from ..model import InputError, Job, Snapshot
from ..priority import (
    FACTOR_NAMES,
    ClusterInfo,
    Factors,
    PartitionInfo,
    PriorityParams,
    job_priority,
    listed_by_sprio,
    ordered_partitions,
    render_sprio,
    sprio,
)
from ..sources.jobinfo_cli import PriorityInputs, parse_sshare_fairshare
from ..sources.slurm_cli import SlurmCli
from ..sources.slurm_text import release_of
from . import positive_float as _positive_float

PRIORITY_INPUTS_VERSION = 1
LABEL = {"age": "Age", "assoc": "Association", "fairshare": "Fair-share", "jobsize": "Job size",
         "partition": "Partition", "qos": "QOS"}
IN_TEXT = {"age": "age", "assoc": "association", "fairshare": "fair-share", "jobsize": "job size",
           "partition": "partition", "qos": "QOS"}


# --- arguments ------------------------------------------------------------------------------------




def parse_at(text: str) -> str | float:
    """``--at``: auto, now, last-calc, Unix seconds or an ISO 8601 date-time (local time if naive)."""
    t = text.strip().lower()
    if t in ("auto", "now", "last-calc"):
        return t
    try:
        return float(t)
    except ValueError:
        pass
    try:
        return _dt.datetime.fromisoformat(text.strip()).timestamp()
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not auto, now, last-calc, Unix seconds or an ISO 8601 date-time") from None


def parse_weights(text: str) -> dict[str, float]:
    """``--weights fairshare=20000,age=0,tres:gres/gpu=500`` → overrides for PriorityParams.with_weights."""
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
        out[k] = val
    return out


def _algorithms(text: str) -> list[str]:
    algs = [a.strip() for a in text.split(",") if a.strip()]
    bad = [a for a in algs if a not in ALGORITHMS]
    if bad or not algs:
        raise argparse.ArgumentTypeError(f"choose from {', '.join(ALGORITHMS)} (got {text!r})")
    return list(dict.fromkeys(algs))


def _add_source(p: argparse.ArgumentParser, *, sshare: bool = False) -> None:
    src = p.add_mutually_exclusive_group()
    src.add_argument("--source", choices=["slurm"], default=None,
                     help="read the live cluster through Slurm's tools (the default)")
    src.add_argument("--snapshot", metavar="FILE", help="a fairshared snapshot (JSON) ('-' = standard input)")
    if sshare:
        src.add_argument("--from-sshare", metavar="FILE",
                         help="output of `sshare -a -l -P` (no jobs; its FairShare column is Slurm's order)")
    p.add_argument("--timeout", type=_positive_float, default=60.0, metavar="SECONDS",
                   help="with the live cluster: how long each Slurm command may take (default: 60)")


def _add_at(p: argparse.ArgumentParser) -> None:
    p.add_argument("--at", type=parse_at, default="auto", metavar="WHEN",
                   help="when to evaluate the age factor: auto (default: slurmctld's last priority "
                   "calculation when its state file is readable, which is what sprio shows; else now; "
                   "a snapshot's own time), now, last-calc, Unix seconds or an ISO 8601 date-time")


def register(subparsers) -> None:
    """Add ``sprio``, ``explain`` and ``compare`` to the ``fairshared`` command line."""
    p = subparsers.add_parser(
        "sprio",
        help="job priorities like `sprio -l`, computed by fairshared (optionally under another algorithm)",
        description="Print every pending job's priority factors as Slurm 22.05's `sprio -l` does (same "
        "columns, widths and rounding), computed from the cluster's weights and our own fair-share "
        "factors.  --algorithm shows what they would be under another fair-share algorithm.",
    )
    _add_source(p)
    p.add_argument("--algorithm", choices=ALGORITHMS,
                   help="fair-share algorithm (default: what the cluster's PriorityFlags say)")
    p.add_argument("--format", choices=("table", "json"), default="table")
    _add_at(p)
    p.add_argument("--save-snapshot", metavar="FILE", help="also write what was read (tree, jobs, partitions, QOS)")
    p.set_defaults(func=cmd_sprio)

    e = subparsers.add_parser(
        "explain",
        help="why a job has its priority, in plain words",
        description="Explain one job's priority: each factor with its weight and share of the total, the "
        "fair-share path from root to the job's association with the algorithm's per-level figures, "
        "and the jobs just ahead of it (and behind) with what separates them.",
    )
    e.add_argument("job", metavar="JOBID", help="job id (or an array task as 123_4)")
    _add_source(e)
    e.add_argument("--algorithm", choices=ALGORITHMS,
                   help="fair-share algorithm (default: what the cluster's PriorityFlags say)")
    _add_at(e)
    e.add_argument("--neighbours", type=int, default=3, metavar="N", help="jobs to show ahead and behind (default 3)")
    __import__("fairshared.commands.explain_vs_cmd", fromlist=["add_arguments"]).add_arguments(e)
    e.set_defaults(func=cmd_explain)

    c = subparsers.add_parser(
        "compare",
        help="fair-share factors and ranks under several algorithms side by side, with Kendall's tau",
        description="Compute every user association's fair-share factor and rank under each algorithm, "
        "list the biggest movers and Kendall's tau-b between each pair of algorithms and against "
        "Slurm's current order (sshare's FairShare column, when the input has it).  With pending jobs "
        "in the input (live cluster or a snapshot from `fairshared sprio --save-snapshot`) it also "
        "compares their priorities, with the cluster's weights or --weights.",
    )
    _add_source(c, sshare=True)
    c.add_argument("--algorithms", type=_algorithms, default=list(ALGORITHMS), metavar="LIST",
                   help="comma-separated (default: classic,fair_tree,level_based)")
    c.add_argument("--weights", type=parse_weights, default={}, metavar="SPEC",
                   help="override priority weights for the job comparison, e.g. fairshare=20000,age=0,"
                   "tres:gres/gpu=500")
    c.add_argument("--format", choices=("table", "json"), default="table")
    c.add_argument("--top", type=int, default=10, metavar="N", help="movers to list (default 10)")
    c.add_argument("--plot", metavar="FILE.png",
                   help="draw fair-share factor against usage/shares per algorithm (needs matplotlib)")
    _add_at(c)
    c.set_defaults(func=cmd_compare)


# --- inputs -----------------------------------------------------------------------------------------


def _open_text(path: str) -> tuple[str, str]:
    if path == "-":
        return sys.stdin.read(), "<stdin>"
    try:
        with open(path, encoding="utf-8", errors="strict") as fh:
            return fh.read(), path
    except OSError as exc:
        raise InputError(f"cannot read: {exc.strerror}", path) from None
    except UnicodeDecodeError as exc:
        raise InputError(f"is not UTF-8 text ({exc.reason})", path) from None


def load_inputs(args: argparse.Namespace, *, sshare: bool = False) -> PriorityInputs:
    """The tree, cluster and jobs from --source slurm (default), --snapshot or --from-sshare."""
    if getattr(args, "from_sshare", None):
        import io

        text, name = _open_text(args.from_sshare)
        snap = parse_sshare(io.StringIO(text), name)
        try:
            slurm_fs = parse_sshare_fairshare(text)
        except InputError:
            slurm_fs = None
        return PriorityInputs(snapshot=snap, cluster=ClusterInfo(), jobs=[], slurm_fairshare=slurm_fs or None)
    if getattr(args, "snapshot", None):
        text, name = _open_text(args.snapshot)
        try:
            doc = json.loads(text, parse_constant=lambda c: (_ for _ in ()).throw(ValueError(c)))
        except json.JSONDecodeError as exc:
            raise InputError(f"is not valid JSON: {exc.msg}", f"{name}:{exc.lineno}") from None
        except ValueError as exc:
            raise InputError(f"is not valid JSON: {exc} is not allowed", name) from None
        return inputs_from_dict(doc, name)
    return SlurmCli(timeout=args.timeout).priority_inputs(sshare=sshare)


def inputs_to_dict(pi: PriorityInputs, evaluated_at: float | None) -> dict:
    """A snapshot document (``compute`` reads it too) with a ``priority_inputs`` block."""
    doc = snapshot_to_dict(pi.snapshot)
    c = pi.cluster
    doc["priority_inputs"] = {
        "version": PRIORITY_INPUTS_VERSION,
        "evaluated_at": evaluated_at,
        "last_calc": pi.last_calc,
        "cluster": {
            "node_count": c.node_count,
            "cpu_count": c.cpu_count,
            "assoc_priority_max": c.assoc_priority_max,
            "tres_order": list(c.tres_order),
            "qos": dict(c.qos_priority),
            "partitions": [
                {"name": p.name, "priority_job_factor": p.priority_job_factor, "priority_tier": p.priority_tier,
                 "max_time": p.max_time, "tres": dict(p.tres)}
                for p in c.partitions.values()
            ],
        },
        "jobs": [{**{k: v for k, v in asdict(j).items() if k != "partition"}, "partitions": list(j.partitions),
                  "tres": dict(j.tres)} for j in pi.jobs],
        "slurm_fairshare": None if pi.slurm_fairshare is None else [
            {"account": a, "user": u, "partition": p, "fairshare": f} for (a, u, p), f in pi.slurm_fairshare.items()
        ],
    }
    return doc


_JOB_INT = ("job_id", "priority", "nice", "site_factor", "submit_time", "eligible_time", "accrue_time",
            "min_nodes", "cpus", "assoc_priority")


def inputs_from_dict(doc: object, name: str = "<snapshot>") -> PriorityInputs:
    snap = snapshot_from_dict(doc, name)
    block = doc.get("priority_inputs") if isinstance(doc, dict) else None
    if block is None:
        return PriorityInputs(snapshot=snap, cluster=ClusterInfo(), jobs=[], evaluated_at=snap.taken_at)
    where = f"{name}: priority_inputs"
    if not isinstance(block, dict) or block.get("version") != PRIORITY_INPUTS_VERSION:
        raise InputError(f"is not a version {PRIORITY_INPUTS_VERSION} object", where)
    try:
        c = block.get("cluster") or {}
        parts = {}
        for i, p in enumerate(c.get("partitions") or []):
            mt = p.get("max_time")
            parts[str(p["name"])] = PartitionInfo(
                name=str(p["name"]), priority_job_factor=int(p.get("priority_job_factor", 1)),
                priority_tier=int(p.get("priority_tier", 1)), max_time=None if mt is None else int(mt),
                tres={str(k): int(v) for k, v in (p.get("tres") or {}).items()})
        cluster = ClusterInfo(
            partitions=parts,
            qos_priority={str(k): int(v) for k, v in (c.get("qos") or {}).items()},
            node_count=int(c.get("node_count", 1)), cpu_count=int(c.get("cpu_count", 1)),
            assoc_priority_max=int(c.get("assoc_priority_max", 0)),
            tres_order=tuple(c.get("tres_order") or ClusterInfo().tres_order),
            slurm_version=release_of(snap.config or {}),
        )
        if cluster.node_count < 1 or cluster.cpu_count < 1:
            raise ValueError("node_count and cpu_count must be >= 1")
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise InputError(f"bad cluster description ({exc})", where) from None
    jobs = []
    for i, j in enumerate(block.get("jobs") or []):
        try:
            kw = {k: int(j[k]) for k in _JOB_INT if k in j and j[k] is not None}
            tl = j.get("time_limit")
            kw.setdefault("priority", 1)
            jobs.append(Job(
                user=str(j["user"]), account=str(j["account"]),
                partition=",".join(str(p) for p in j["partitions"]),
                qos=str(j.get("qos", "normal")), state=str(j.get("state", "PENDING")),
                direct_set_prio=bool(j.get("direct_set_prio", False)),
                time_limit=None if tl is None else int(tl),
                tres={str(k): int(v) for k, v in (j.get("tres") or {}).items()},
                display_id=str(j.get("display_id") or j["job_id"]), reason=str(j.get("reason", "")),
                **kw))
        except (KeyError, TypeError, ValueError) as exc:
            raise InputError(f"is not a job record ({exc})", f"{where}.jobs[{i}]") from None
    fs = block.get("slurm_fairshare")
    slurm_fs = None
    if fs is not None:
        try:
            slurm_fs = {(r["account"], r["user"], r.get("partition")): float(r["fairshare"]) for r in fs}
        except (KeyError, TypeError, ValueError) as exc:
            raise InputError(f"bad slurm_fairshare ({exc})", where) from None
    ev = block.get("evaluated_at")
    return PriorityInputs(snapshot=snap, cluster=cluster, jobs=jobs, last_calc=block.get("last_calc"),
                          slurm_fairshare=slurm_fs, evaluated_at=ev if ev is not None else snap.taken_at)


def evaluation_time(at: str | float, pi: PriorityInputs, live: bool) -> tuple[int, str]:
    """The time the age factor is evaluated at, and a phrase saying which."""
    if isinstance(at, float):
        return int(at), "the time given with --at"
    if at == "now":
        return int(time.time()), "now"
    if at == "last-calc":
        if pi.last_calc is None:
            raise InputError("--at last-calc: slurmctld's last priority calculation is unknown (its "
                             "StateSaveLocation/priority_last_decay_ran is unreadable here)")
        return int(pi.last_calc), "slurmctld's last priority calculation"
    if not live and pi.evaluated_at is not None:
        return int(pi.evaluated_at), "the snapshot's time"
    if live and pi.last_calc is not None:
        return int(pi.last_calc), "slurmctld's last priority calculation"
    return int(time.time()), "now"


def default_algorithm(config: dict) -> str:
    flags = {str(f).upper() for f in config.get("priority_flags") or []}
    return "classic" if flags & {"NO_FAIR_TREE", "DEPTH_OBLIVIOUS"} else "fair_tree"


def engine_result(snap: Snapshot, algorithm: str, tree=None) -> Result:
    cfg = snap.config or {}
    damp = cfg.get("dampening", 1)
    if isinstance(damp, bool) or not isinstance(damp, (int, float)) or not damp > 0:
        raise InputError(f"FairShareDampeningFactor must be a number > 0, not {damp!r}")
    tree = tree if tree is not None else build_tree(snap.associations)
    try:
        return compute(tree, algorithm, Params(dampening=float(damp), priority_levels=cfg.get("priority_levels")))
    except (ValueError, TypeError) as exc:
        raise InputError(f"cannot compute {algorithm}: {exc}") from None


def assoc_index(result: Result) -> dict[tuple, int]:
    t = result.tree
    return {t.key(i): i for i in range(t.n)}


def job_assoc(job: Job, index: dict[tuple, int]) -> int | None:
    """The job's association: (account, user, partition) if such a per-partition one exists, else (account, user)."""
    for part in job.partitions:
        i = index.get((job.account, job.user, part))
        if i is not None:
            return i
    return index.get((job.account, job.user, None))


def fairshare_of(result: Result) -> Callable[[Job], float]:
    index = assoc_index(result)

    def fs(job: Job) -> float:
        i = job_assoc(job, index)
        if i is None:
            return 0.0  # Slurm: a job without association gets 0 ("Unable to compute fairshare")
        v = float(result.fairshare[i])
        return 0.0 if math.isnan(v) else v

    return fs


def _live(args) -> bool:
    return not (getattr(args, "snapshot", None) or getattr(args, "from_sshare", None))


def _warn(pi: PriorityInputs) -> None:
    for w in pi.warnings:
        print(f"fairshared: warning: {w}", file=sys.stderr)


# --- sprio --------------------------------------------------------------------------------------------


def cmd_sprio(args: argparse.Namespace) -> int:
    pi = load_inputs(args)
    _warn(pi)
    now, _ = evaluation_time(args.at, pi, _live(args))
    cfg = pi.snapshot.config or {}
    algorithm = args.algorithm or default_algorithm(cfg)
    result = engine_result(pi.snapshot, algorithm)
    params = PriorityParams.from_config(cfg)
    rows = sprio(pi.jobs, fairshare_of(result), pi.cluster, params, now)
    if args.save_snapshot:
        _save(pi, args.save_snapshot, now)
    if args.format == "json":
        json.dump({"jobs": [r.as_json() for r in rows]}, sys.stdout, indent=1)
        sys.stdout.write("\n")
    else:
        sys.stdout.write(render_sprio(rows, version=pi.cluster.slurm_version))
    return 0


def _save(pi: PriorityInputs, path: str, now: int) -> None:
    try:
        with open(path, "w", encoding="utf-8") as fh:
            json.dump(inputs_to_dict(pi, now), fh, indent=1)
            fh.write("\n")
    except OSError as exc:
        raise InputError(f"cannot write snapshot: {exc.strerror}", path) from None


# --- explain ------------------------------------------------------------------------------------------


def _fmt_points(x: float) -> str:
    return f"{x:,.2f}"


def _duration(seconds: int) -> str:
    seconds = int(seconds)
    if seconds <= 0:
        return "0 s"
    d, rem = divmod(seconds, 86400)
    h, rem = divmod(rem, 3600)
    m, s = divmod(rem, 60)
    parts = [f"{d} d" if d else "", f"{h} h" if h else "", f"{m} min" if m else "", f"{s} s" if s and not d else ""]
    return " ".join(p for p in parts if p)


def _ordinal(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def _utc(ts: int) -> str:
    return _dt.datetime.fromtimestamp(ts, _dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def queue_entries(pi: PriorityInputs, result: Result, params: PriorityParams, now: int) -> list[Factors]:
    """Every (job, partition) the scheduler would consider, in its order.

    sort_job_queue2 (22.05): partition PriorityTier high first, then priority high
    first, then submit time, then job id (reservations and preemption, which come
    first there, are not modelled).
    """
    fs = fairshare_of(result)
    entries: list[Factors] = []
    for j in pi.jobs:
        if listed_by_sprio(j, params, now):
            entries.extend(job_priority(j, fs(j), pi.cluster, params, now))

    def tier(f: Factors) -> int:
        p = pi.cluster.partitions.get(f.partition)
        return p.priority_tier if p else 0

    return sorted(entries, key=lambda f: (-tier(f), -f.priority, f.job.submit_time, f.job.job_id))


def _differences(a: Factors, b: Factors) -> list[tuple[str, float]]:
    """Points by which a's priority exceeds b's, per factor (largest first)."""
    out = []
    for k in FACTOR_NAMES:
        d = a.weighted[k] - b.weighted[k]
        if abs(d) >= 0.005:
            out.append((IN_TEXT[k], d))
    tres = sorted(set(a.tres_weighted) | set(b.tres_weighted))
    for t in tres:
        d = a.tres_weighted.get(t, 0.0) - b.tres_weighted.get(t, 0.0)
        if abs(d) >= 0.005:
            out.append((f"TRES {t}", d))
    if a.site != b.site:
        out.append(("site factor", float(a.site - b.site)))
    if a.nice != b.nice:
        out.append(("nice", float(b.nice - a.nice)))
    return sorted(out, key=lambda kv: -abs(kv[1]))


def _why(a: Factors, b: Factors) -> str:
    if a.direct or b.direct:
        who = [f"{x.job.job_id}" for x in (a, b) if x.direct]
        return f"priority fixed by an operator for job {' and '.join(who)}"
    diffs = _differences(a, b)
    if not diffs:
        return "no factor differs (the earlier submission, then the lower job id, goes first)"
    return ", ".join(f"{name} {d:+,.0f}" if abs(d) >= 10 else f"{name} {d:+.1f}" for name, d in diffs)


def explain_text(pi: PriorityInputs, job_ref: str, algorithm: str, now: int, when: str,
                 neighbours: int = 3) -> str:
    cfg = pi.snapshot.config or {}
    tree = build_tree(pi.snapshot.associations)
    result = engine_result(pi.snapshot, algorithm, tree)
    params = PriorityParams.from_config(cfg)
    job = next((j for j in pi.jobs if str(j.job_id) == job_ref or j.display_id == job_ref), None)
    if job is None:
        raise InputError(f"job {job_ref} is not among the pending jobs read")
    fs = fairshare_of(result)(job)
    rows = job_priority(job, fs, pi.cluster, params, now)
    out: list[str] = []
    w = out.append
    parts = ",".join(ordered_partitions(job, pi.cluster))
    w(f"Job {job.display_id or job.job_id} — user {job.user}, account {job.account}, "
      f"partition {parts}, QOS {job.qos or '-'}")
    w(f"State: {job.state}" + (f" ({job.reason})" if job.reason else "")
      + f"; Slurm's current priority: {job.priority}")
    w(f"fairshared, with the {algorithm} fair-share algorithm, evaluated at {_utc(now)} ({when}):")
    pending = listed_by_sprio(job, params, now)
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
        weights = params.weights()
        factor_total = sum(main.weighted.values()) + sum(main.tres_weighted.values())
        w(f"  {'factor':<12} {'value':>10} {'weight':>8} {'points':>12} {'share':>7}")
        for k in ("fairshare", "age", "jobsize", "partition", "qos", "assoc"):
            pts = main.weighted[k]
            share = f"{100 * pts / factor_total:.1f}%" if factor_total else "-"
            w(f"  {LABEL[k]:<12} {main.factors[k]:>10.6f} {weights[k]:>8} {_fmt_points(pts):>12} {share:>7}")
        for t, v in main.tres_weighted.items():
            share = f"{100 * v / factor_total:.1f}%" if factor_total else "-"
            w(f"  {'TRES ' + t:<12} {main.tres[t]:>10.6f} {params.weight_tres[t]:>8g} {_fmt_points(v):>12} {share:>7}")
        w(f"  {'Site factor':<12} {'':>10} {'':>8} {main.site:>+12,}")
        w(f"  {'Nice':<12} {'':>10} {'':>8} {-main.nice:>+12,}")
        w(f"  {'Total':<12} {'':>10} {'':>8} {_fmt_points(main.total):>12}   → priority {main.priority}"
          + (" (at least 1)" if main.total < 1 else " (cut to 2^32 − 1)" if main.total >= 2 ** 32
             else " (the integer part)"))
        w("")
        w(_age_line(job, params, now))
        nodes, cpus = pi.cluster.node_count, pi.cluster.cpu_count
        if "SMALL_RELATIVE_TO_TIME" in params.flags:
            w(f"Job size: {job.cpus} CPUs per minute of time limit, relative to the {cpus} CPUs of the cluster"
              + (" (PriorityFavorSmall: 1 minus that)" if params.favor_small else "") + ".")
        elif params.favor_small:
            w(f"Job size (PriorityFavorSmall): the free part of the cluster: (({nodes} − {job.min_nodes}) / {nodes}"
              f" + ({cpus} − {job.cpus}) / {cpus}) / 2 = {main.factors['jobsize']:.6f}.")
        else:
            w(f"Job size: ({job.min_nodes} of {nodes} nodes + {job.cpus} of {cpus} CPUs) / 2 = "
              f"{main.factors['jobsize']:.6f}.")
        p = pi.cluster.partitions.get(main.partition)
        if p is not None:
            if "NO_NORMAL_PART" in params.flags:
                w(f"Partition {p.name}: PriorityJobFactor {p.priority_job_factor}, used as is (NO_NORMAL_PART).")
            else:
                w(f"Partition {p.name}: PriorityJobFactor {p.priority_job_factor} of the highest "
                  f"{pi.cluster.part_max_priority}.")
        qp = pi.cluster.qos_priority.get(job.qos, 0)
        if "NO_NORMAL_QOS" in params.flags:
            w(f"QOS {job.qos}: priority {qp}, used as is (NO_NORMAL_QOS).")
        else:
            w(f"QOS {job.qos}: priority {qp} of the highest {pi.cluster.qos_max_priority}.")
        if job.site_factor:
            w(f"Site factor {job.site_factor:+} was set by an operator or a site_factor plugin.")
        if job.nice:
            w(f"Nice {job.nice}: {'lowers' if job.nice > 0 else 'raises'} the priority by {abs(job.nice)}.")
    w("")
    out.extend(fairshare_path(result, tree, job, algorithm, float(cfg.get("dampening") or 1)))
    w("")
    out.extend(_neighbours(pi, result, params, now, job, neighbours))
    return "\n".join(out) + "\n"


def _age_line(job: Job, params: PriorityParams, now: int) -> str:
    if not job.accrue_time:
        return "Age: the job is not accruing age yet (no accrue time: not eligible, held, dependent or over a limit)."
    waited = max(0, now - job.accrue_time)
    if params.max_age and waited < params.max_age:
        return (f"Age: waiting {_duration(waited)} of PriorityMaxAge {_duration(params.max_age)}: "
                f"{waited} / {params.max_age} = {waited / params.max_age:.6f}.")
    return f"Age: waiting {_duration(waited)}, at least PriorityMaxAge {_duration(params.max_age)}: the full 1.0."


def fairshare_path(result: Result, tree, job: Job, algorithm: str, dampening: float = 1.0) -> list[str]:
    """The association path from root with shares, usage and the algorithm's per-level figure."""
    index = assoc_index(result)
    i = job_assoc(job, index)
    lines: list[str] = []
    w = lines.append
    if i is None:
        w(f"Fair share: {job.user} has no association in account {job.account}: Slurm gives factor 0.")
        return lines
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
            raw = int(result.fs_raw[a])
            parent_raw = int(result.fs_raw[int(tree.parent[a])])
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
        w(f"  {job.user}'s FSRaw {int(result.fs_raw[i]):016X}; fair-share factor {f:.6f} ≈ {rank} / {n_users}"
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


def _neighbours(pi: PriorityInputs, result: Result, params: PriorityParams, now: int, job: Job,
                n: int) -> list[str]:
    entries = queue_entries(pi, result, params, now)
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
                         f"{e.priority - me.priority:+,} — {_why(e, me)}")
    else:
        lines.append("Nothing is ahead of it in this partition.")
    if behind:
        lines.append("Just behind it:")
        for e in behind:
            lines.append(f"  job {e.job.display_id or e.job.job_id} ({e.job.user}): priority {e.priority}, "
                         f"{e.priority - me.priority:+,} — {_why(e, me)}")
    return lines


def cmd_explain(args: argparse.Namespace) -> int:
    if getattr(args, "vs", None):
        return __import__("fairshared.commands.explain_vs_cmd", fromlist=["x"]).cmd_explain_vs(args)
    pi = load_inputs(args)
    _warn(pi)
    now, when = evaluation_time(args.at, pi, _live(args))
    algorithm = args.algorithm or default_algorithm(pi.snapshot.config or {})
    sys.stdout.write(explain_text(pi, args.job, algorithm, now, when, args.neighbours))
    return 0


# --- compare ------------------------------------------------------------------------------------------


def kendall_tau_b(x: Sequence[float], y: Sequence[float]) -> float:
    """Kendall's tau-b of two equally long sequences (NaN when undefined).

    tau_b = (C − D) / sqrt((n0 − n1)(n0 − n2)), n0 = n(n−1)/2, n1 and n2 the pairs
    tied in x and in y.  Written out here (O(n²) in numpy chunks) rather than
    pulling in scipy for one function; scipy.stats.kendalltau(x, y) gives the same.
    """
    a = np.asarray(x, dtype=np.float64)
    b = np.asarray(y, dtype=np.float64)
    if a.shape != b.shape:
        raise ValueError("x and y differ in length")
    n = a.size
    if n < 2:
        return math.nan
    s = 0
    step = max(1, 1_000_000 // n)
    for start in range(0, n, step):
        sa = np.sign(a[start:start + step, None] - a[None, :])
        sb = np.sign(b[start:start + step, None] - b[None, :])
        s += int((sa * sb).sum())
    s //= 2  # every unordered pair was counted twice

    def tied(v: np.ndarray) -> int:
        _, counts = np.unique(v, return_counts=True)
        return int((counts * (counts - 1) // 2).sum())

    n0 = n * (n - 1) // 2
    denom = (n0 - tied(a)) * (n0 - tied(b))
    return s / math.sqrt(denom) if denom > 0 else math.nan


def competition_ranks(values: Sequence[float]) -> list[int]:
    """1 = largest; ties share the best rank ("1224")."""
    v = np.asarray(values, dtype=np.float64)
    desc = np.sort(v)[::-1]
    return [int(r) for r in 1 + np.searchsorted(-desc, -v, side="left")]


def compare_data(pi: PriorityInputs, algorithms: list[str], weights: dict, now: int, top: int = 10) -> dict:
    snap = pi.snapshot
    tree = build_tree(snap.associations)
    results = {a: engine_result(snap, a, tree) for a in algorithms}
    users = [i for i in range(tree.n) if tree.is_user[i]]
    rows = []
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
    have_slurm = bool(pi.slurm_fairshare)
    if have_slurm:
        for r in rows:
            r["slurm_fairshare"] = pi.slurm_fairshare.get((r["account"], r["user"], r["partition"]))
        known = [r for r in rows if r["slurm_fairshare"] is not None]
        for r, rank in zip(known, competition_ranks([r["slurm_fairshare"] for r in known])):
            r["slurm_rank"] = rank
    taus = {}
    for x in range(len(algorithms)):
        for y in range(x + 1, len(algorithms)):
            a, b = algorithms[x], algorithms[y]
            taus[f"{a}|{b}"] = _jnum(kendall_tau_b([r["factors"][a] or 0 for r in rows],
                                                   [r["factors"][b] or 0 for r in rows]))
    if have_slurm:
        known = [r for r in rows if r["slurm_fairshare"] is not None]
        for a in algorithms:
            taus[f"{a}|slurm"] = _jnum(kendall_tau_b([r["factors"][a] or 0 for r in known],
                                                     [r["slurm_fairshare"] for r in known]))
    movers = []
    if len(algorithms) > 1:
        for r in rows:
            ranks = [r["ranks"][a] for a in algorithms]
            spread = max(ranks) - min(ranks)
            if spread:
                movers.append({"account": r["account"], "user": r["user"], "partition": r["partition"],
                               "ranks": dict(r["ranks"]), "spread": spread})
        movers.sort(key=lambda m: (-m["spread"], m["user"], m["account"]))
    data = {"algorithms": algorithms, "users": rows, "movers": movers[:top], "kendall_tau": taus}
    if pi.jobs:
        data.update(_compare_jobs(pi, results, weights, now))
    return data


def _compare_jobs(pi: PriorityInputs, results: dict[str, Result], weights: dict, now: int) -> dict:
    params = PriorityParams.from_config(pi.snapshot.config or {})
    if weights:
        params = params.with_weights(weights)
    jobs = [j for j in pi.jobs if listed_by_sprio(j, params, now)]
    rows = []
    per_alg = {}
    for a, res in results.items():
        fs = fairshare_of(res)
        per_alg[a] = [job_priority(j, fs(j), pi.cluster, params, now)[0].priority for j in jobs]
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
    taus = {}
    algs = list(results)
    for x in range(len(algs)):
        for y in range(x + 1, len(algs)):
            taus[f"{algs[x]}|{algs[y]}"] = _jnum(kendall_tau_b(per_alg[algs[x]], per_alg[algs[y]]))
    for a in algs:
        taus[f"{a}|slurm"] = _jnum(kendall_tau_b(per_alg[a], [j.priority for j in jobs]))
    return {"weights": {**params.weights(), **{f"tres:{k}": v for k, v in params.weight_tres.items()}},
            "jobs": rows, "jobs_kendall_tau": taus}


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


def plot_compare(pi: PriorityInputs, data: dict, path: str) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise InputError("--plot needs matplotlib, an optional extra: pip install matplotlib "
                         "(or pip install 'fairshared[plot]')") from None
    tree = build_tree(pi.snapshot.associations)
    classic = engine_result(pi.snapshot, "classic", tree)
    users = [i for i in range(tree.n) if tree.is_user[i]]
    x = []
    for i in users:
        s = float(classic.norm_shares[i])
        u = float(classic.norm_usage[i])
        x.append(u / s if s > 0 else math.inf)
    finite = [v for v in x if math.isfinite(v) and v > 0]
    floor = min(finite) / 2 if finite else 1e-3
    ceil = max(finite) * 2 if finite else 1.0
    xs = [min(max(v, floor), ceil) for v in x]
    algs = data["algorithms"]
    fig, axes = plt.subplots(1, len(algs), figsize=(4.5 * len(algs), 4), squeeze=False, sharey=True)
    for ax, a in zip(axes[0], algs):
        ys = [r["factors"][a] if r["factors"][a] is not None else 0.0 for r in data["users"]]
        ax.scatter(xs, ys, s=14)
        ax.set_xscale("log")
        ax.set_title(a)
        ax.set_xlabel("usage / shares (NormUsage / NormShares)")
        ax.grid(True, alpha=0.3)
    axes[0][0].set_ylabel("fair-share factor")
    fig.tight_layout()
    try:
        fig.savefig(path, dpi=100)
    except OSError as exc:
        raise InputError(f"cannot write the plot: {exc.strerror}", path) from None
    finally:
        plt.close(fig)


def cmd_compare(args: argparse.Namespace) -> int:
    pi = load_inputs(args, sshare=True)
    _warn(pi)
    now, _ = evaluation_time(args.at, pi, _live(args))
    data = compare_data(pi, args.algorithms, args.weights, now, args.top)
    if args.plot:
        plot_compare(pi, data, args.plot)
    if args.format == "json":
        json.dump(data, sys.stdout, indent=1)
        sys.stdout.write("\n")
    else:
        sys.stdout.write(render_compare(data, args.top))
    return 0
