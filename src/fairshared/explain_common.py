"""What ``explain``, ``explain --vs``, ``explain --format json`` and ``whatif`` share.

The scheduler's queue order, the words for what separates two jobs in it, and how a time and a
duration are written.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Callable

from .engine.ranks import fairshare_of
from .engine.result import Result
from .model import ClusterInfo, Snapshot
from .priority import FACTOR_NAMES, Factors, job_priority
from .priority_sprio import listed_by_sprio
from .settings import ClusterSettings

IN_TEXT = {"age": "age", "assoc": "association", "fairshare": "fair-share", "jobsize": "job size",
           "partition": "partition", "qos": "QOS"}


def find_job(jobs, ref: str):
    """The pending job ``ref`` names, by job id or display id (``123_4``, an array task), or None."""
    return next((j for j in jobs if str(j.job_id) == ref or (j.display_id and j.display_id == ref)), None)


def duration(seconds: int) -> str:
    """``93784`` → ``1 d 2 h 3 min`` (seconds only below a day)."""
    seconds = int(seconds)
    if seconds <= 0:
        return "0 s"
    d, rem = divmod(seconds, 86400)
    h, rem = divmod(rem, 3600)
    m, s = divmod(rem, 60)
    parts = [f"{d} d" if d else "", f"{h} h" if h else "", f"{m} min" if m else "",
             f"{s} s" if s and not d else ""]
    return " ".join(p for p in parts if p)


def utc(ts: int) -> str:
    """Unix seconds as ``2026-01-01 00:00:00 UTC``."""
    return _dt.datetime.fromtimestamp(ts, _dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def details(pi: Snapshot) -> ClusterInfo:
    """``pi.cluster_info``: what the job priority needs, which every reader of it asks for (a read
    with details, or :meth:`~fairshared.model.Snapshot.with_empty_details`); ValueError when a
    snapshot without them reaches the job priority, a mistake of the caller's."""
    if pi.cluster_info is None:
        raise ValueError("the job priority needs a snapshot read with details (no cluster info)")
    return pi.cluster_info


def queue_entries(pi: Snapshot, result: Result, settings: ClusterSettings, now: int) -> list[Factors]:
    """Every (job, partition) the scheduler would consider, in its order (:func:`queue_key`)."""
    fs = fairshare_of(result)
    cluster = details(pi)
    entries: list[Factors] = []
    for j in pi.jobs:
        if listed_by_sprio(j, settings, now):
            entries.extend(job_priority(j, fs(j), cluster, settings, now))
    return sorted(entries, key=queue_key(cluster))


def queue_key(cluster: ClusterInfo) -> Callable[[Factors], tuple]:
    """The scheduler's sort key of a (job, partition) entry.

    sort_job_queue2 (22.05): partition PriorityTier high first, then priority high
    first, then submit time, then job id (reservations and preemption, which come
    first there, are not modelled).
    """
    def key(f: Factors) -> tuple:
        p = cluster.partitions.get(f.partition)
        return (-(p.priority_tier if p else 0), -f.priority, f.job.submit_time, f.job.job_id)

    return key


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


def why(a: Factors, b: Factors) -> str:
    """What puts ``a`` ahead of (or behind) ``b``, in words: the factors that differ, largest first."""
    if a.direct or b.direct:
        who = [f"{x.job.job_id}" for x in (a, b) if x.direct]
        return f"priority fixed by an operator for job {' and '.join(who)}"
    diffs = _differences(a, b)
    if not diffs:
        return "no factor differs (the earlier submission, then the lower job id, goes first)"
    return ", ".join(f"{name} {d:+,.0f}" if abs(d) >= 10 else f"{name} {d:+.1f}" for name, d in diffs)
